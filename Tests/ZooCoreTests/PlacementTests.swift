import Foundation
import Storage
import StorageTestSupport
import Testing

@testable import ZooCore

/// The union of the two lexicons by species, and where a walk to an animal without a pen of its own ends.
@Suite struct PlacementTests {
    static let mammals = Taxon(czech: "Savci", latin: "Mammalia")

    @Test func theWebsiteEntriesKeepTheirIDsAndValuesAndTheLexiconFillsWhatTheyLack() {
        let lexicon = [
            Animal(
                id: 1, name: "Lev indický", latinName: "Panthera  leo persica (Meyer, 1826)",
                taxonClass: Taxon(czech: "Savci", latin: nil), description: "lexicon text",
                projects: "lexicon projects",
                location: "Pavilon šelem a plazů", locationURL: "https://zoo/selmy", imageURL: "https://old.jpg",
                imageAlt: "old", sources: [.lexiconCSV]),
            Animal(id: 2, name: "Jen v lexikonu", latinName: "Solus lexiconi", sources: [.lexiconCSV]),
            // Id 5 on the website is another species: this row is the website's id 7 by Latin name.
            Animal(
                id: 5, name: "Amazoňan modrobradý", latinName: "Amazona festiva", projects: "amazon projects",
                sources: [.lexiconCSV]),
            // Two website entries share the Latin name: the Czech name tells them apart.
            Animal(
                id: 40, name: "Vikuňa", latinName: "Vicugna vicugna", breeding: "since 1990", sources: [.lexiconCSV]),
            // No Latin name in common, the Czech name is.
            Animal(
                id: 50, name: "Irena tyrkysová", latinName: "Irena tyrkysová", projects: "irena", sources: [.lexiconCSV]
            ),
        ]
        let website = [
            Animal(
                id: 1, name: "Lev", latinName: "Panthera leo persica", taxonClass: Self.mammals,
                description: "website text", proportions: "2 m", location: "Šelmy", imageURL: "https://new.jpg",
                isCurrentlyAvailable: false, mapFeatureIDs: [10], sources: [.animalsJSON]),
            Animal(id: 3, name: "Jen na webu", mapFeatureIDs: [11], sources: [.animalsJSON]),
            Animal(
                id: 5, name: "Amazoňan jamajský", latinName: "Amazona collaria", location: "Ptačí svět",
                sources: [.animalsJSON]),
            Animal(id: 7, name: "Amazoňan modrobradý", latinName: "Amazona  Festiva\u{200B}", sources: [.animalsJSON]),
            Animal(id: 8, name: "Lama vikuňa", latinName: "Vicugna vicugna", sources: [.animalsJSON]),
            Animal(id: 9, name: "Vikuňa", latinName: "Vicugna vicugna", sources: [.animalsJSON]),
            Animal(id: 11, name: "Irena tyrkysová", latinName: "Irena puella", sources: [.animalsJSON]),
        ]
        let (union, report) = LexiconUnion.merge(lexicon: lexicon, website: website)
        #expect(union.map(\.id) == [1, 3, 5, 7, 8, 9, 11, 100_002])
        #expect(
            union.map(\.sources) == [
                [.lexiconCSV, .animalsJSON], [.animalsJSON], [.animalsJSON],
                [.lexiconCSV, .animalsJSON], [.animalsJSON], [.lexiconCSV, .animalsJSON],
                [.lexiconCSV, .animalsJSON], [.lexiconCSV],
            ])
        let lion = union[0]
        #expect(lion.name == "Lev" && lion.description == "website text")  // the website's values stand
        #expect(lion.location == "Šelmy" && lion.imageURL == "https://new.jpg")
        #expect(lion.locationURL == nil && lion.imageAlt == nil)  // they belong to the lexicon's location and image
        #expect(lion.projects == "lexicon projects")  // filled from the lexicon
        #expect(lion.taxonClass == Self.mammals)
        #expect(lion.mapFeatureIDs == [10] && !lion.isCurrentlyAvailable)
        #expect(union[2].name == "Amazoňan jamajský" && union[2].projects == nil && union[2].location == "Ptačí svět")
        #expect(union[3].projects == "amazon projects")
        #expect(union[4].breeding == nil && union[5].breeding == "since 1990")
        #expect(union[6].projects == "irena")
        #expect(union[7].name == "Jen v lexikonu")
        #expect(lion.otherNames == ["Lev indický"] && union[3].otherNames.isEmpty)  // the lexicon's other name, kept
        #expect(report.websiteEntries == 7 && report.lexiconRows == 5)
        #expect(report.matchedByLatinName == 3 && report.matchedByCzechName == 1 && report.added == 1)
        #expect(report.addedIDBase == 100_000)
        #expect(
            report.conflicts == [
                "lexicon id 5 \u{201C}Amazoňan modrobradý (Amazona festiva)\u{201D} is website id 5 \u{201C}Amazoňan jamajský (Amazona collaria)\u{201D} there; matched website id 7 by Latin name"
            ])
    }

    @Test func latinNamesAreComparedWithoutNoise() {
        #expect(SpeciesIndex.latinKey("Panthera leo  persica (Meyer, 1826)") == ["panthera", "leo", "persica"])
        #expect(SpeciesIndex.latinKey("žlutokrký) (Threskiornis spinicollis") == ["threskiornis", "spinicollis"])
        #expect(SpeciesIndex.latinKey("Microcebus ganzhorni\u{200B}") == ["microcebus", "ganzhorni"])
        #expect(SpeciesIndex.latinKey("Panthera leo Linnaeus, 1758") == ["panthera", "leo"])
        #expect(SpeciesIndex.latinKey("Pyxis sp.") == ["pyxis"])
        #expect(SpeciesIndex.latinKey("  ") == nil && SpeciesIndex.latinKey(nil) == nil)
        #expect(
            LexiconUnion.addedIDBase(above: 700) == 100_000 && LexiconUnion.addedIDBase(above: 100_000) == 1_000_000)
    }

    @Test func importOfBothFilesServesTheUnionAndCountsEachSource() throws {
        let csv = """
            id;title;latin_title;classes;order;description;image_src;image_alt;continents;spread_note;biotop;biotopes_note;food;food_note;proportions;reproduction;attractions;projects_note;breeding;localities_title;localities_url;
            1;Lev indický;Panthera leo persica;Savci (Mammalia);Šelmy (Carnivora);Z lexikonu;;;Asie;;;;;;;;;;;Pavilon šelem a plazů;
            2;Surikata;;Savci (Mammalia);;;;;;;;;;;;;;;;Afrika zblízka;
            """
        let json = """
            [{"_id": 1, "name": "Lev indický", "base_summary": "Z webu", "sizes": "2 m", "map_locations": [
               {"_id": 10, "name": "lvi", "is_animal_pen": true, "geometry": {"coordinates": [14.40, 50.11]}}]},
             {"_id": 3, "name": "Adax", "location_in_zoo": "Pláně"}]
            """
        let library = try ZooLibrary(database: .scratch(migrations: ZooSchema.migrations))
        try library.importFiles(
            [
                ZooSourceFile(kind: .lexiconCSV, name: "lexicon.csv", content: Data(csv.utf8)),
                ZooSourceFile(kind: .animalsJSON, name: "animals.json", content: Data(json.utf8)),
            ], source: "test", trigger: .client)
        let animals = try library.snapshot().catalogue.animals
        #expect(animals.map(\.id) == [1, 3, 100_002])
        #expect(
            animals[0].description == "Z webu" && animals[0].order?.latin == "Carnivora"
                && animals[0].mapFeatureIDs == [10])
        let counts = try library.metadata().counts
        #expect((counts.bothSources, counts.lexiconCSVOnly, counts.animalsJSONOnly) == (1, 1, 1))
    }

    /// Pens of the house's animals, its building (named through the fixes), a path the fixes name, plurals.
    static func catalogue() -> Catalogue {
        let features = [
            MapFeature(
                id: 100, name: "lvi", isAnimalPen: true, isBuilding: false, singularNames: [],
                outline: [GeoPoint(lat: 50.1, lon: 14.4)], animalNames: []),
            MapFeature(
                id: 200, name: "Indonéská džungle", isAnimalPen: false, isBuilding: true, singularNames: [],
                outline: [GeoPoint(lat: 50.2, lon: 14.4)], animalNames: []),
            MapFeature(
                id: 300, name: "Ptačí svět (OSM)", isAnimalPen: false, isBuilding: true, singularNames: [],
                outline: [GeoPoint(lat: 50.3, lon: 14.4)], animalNames: []),
            MapFeature(
                id: 400, name: "lachtani", isAnimalPen: true, isBuilding: false, singularNames: [],
                outline: [GeoPoint(lat: 50.4, lon: 14.4)], animalNames: []),
        ]
        let animals = [
            Animal(id: 1, name: "Lev", location: "Dolní část zoo", mapFeatureIDs: [100]),
            Animal(id: 2, name: "Koroptev", location: "dolni CAST zoo"),
            Animal(id: 3, name: "Bulbul", location: "Pavilon Indonéská džungle"),
            Animal(id: 4, name: "Loskuták", location: "Ptačí svět"),
            Animal(id: 5, name: "Lachtan", location: "Lachtani"),
            Animal(id: 6, name: "Nikde"),
            Animal(id: 7, name: "Kos", location: "Příroda kolem nás"),
            Animal(id: 8, name: "Krajta", mapFeatureIDs: [200]),
        ]
        return Catalogue(
            animals: animals, mapFeatures: features,
            joins: MapJoinTables(pavilionNames: [300: "Ptačí svět"], singulars: ["lachtani": ["lachtan"]]))
    }

    @Test func anAnimalWithoutAPenIsPlacedAtItsHouseOrZooPart() throws {
        let catalogue = Self.catalogue()
        func placement(_ id: Int) throws -> Placement? { catalogue.placement(of: try catalogue.animal(id: id)) }
        #expect(try placement(1) == Placement(kind: .pen, name: "Lev", featureIDs: [100]))
        // A zoo part: the pens of its animals, matched without case and diacritics.
        #expect(try placement(2) == Placement(kind: .zooPart, name: "Dolní část zoo", featureIDs: [100]))
        // A house: its building, "Pavilon …" prefix ignored.
        #expect(try placement(3) == Placement(kind: .house, name: "Indonéská džungle", featureIDs: [200]))
        // A building named through zoo-parts-fixes.csv.
        #expect(try placement(4) == Placement(kind: .house, name: "Ptačí svět", featureIDs: [300]))
        // A plural pen name matching the zoo part through singular-plural.csv.
        #expect(try placement(5)?.featureIDs == [400])
        #expect(try placement(6) == nil)
        #expect(try placement(7) == nil)
        // animals.json places pavilion animals at the building: that is their house, not a pen.
        #expect(try placement(8) == Placement(kind: .house, name: "Indonéská džungle", featureIDs: [200]))
        #expect(catalogue.house(named: "indonéská DŽUNGLE")?.featureIDs == [200])
        #expect(catalogue.house(named: "Pavilon Ptačí svět")?.featureIDs == [300])
    }

    @Test func routabilityCountsAndNamesTheExceptions() throws {
        let network = FootpathNetwork(
            nodes: [
                FootpathNode(id: 1, position: GeoPoint(lat: 50.0, lon: 14.4)),
                FootpathNode(id: 2, position: GeoPoint(lat: 50.5, lon: 14.4)),
            ],
            roads: [Footpath(id: 9, nodeIDs: [1, 2])])
        let snapshot = ZooSnapshot(
            catalogue: Self.catalogue(), router: Router(graph: FootpathGraph(network: network), bounds: nil))
        let report = snapshot.routability()
        #expect(report.animals == 8)
        // Lachtan reaches the pen "lachtani" itself (singular "lachtan" is its name).
        #expect((report.toPen, report.toHouse, report.toZooPart) == (2, 3, 1))
        #expect(report.unroutableAnimals.map(\.animalID) == [6, 7])
        #expect(report.unroutableAnimals[0].reason.contains("no location in either source"))
        #expect(report.unroutableHouses.map(\.name) == ["Příroda kolem nás"])
        let (_, destination) = try snapshot.routeWithDestination(
            from: .point(GeoPoint(lat: 50.0, lon: 14.4)), to: .animal(id: 2))
        #expect(destination == Destination(kind: .zooPart, name: "Dolní část zoo", featureID: 100))
    }

    @Test func anUnknownFilterValueIsRejectedWithTheKnownOnes() {
        let catalogue = Self.catalogue()
        #expect(
            throws: ZooError.invalidArgument(
                "unknown house \"Atlantida\"; known values: Dolní část zoo, Lachtani, Pavilon Indonéská džungle, Ptačí svět, Příroda kolem nás"
            )
        ) {
            try catalogue.search(SearchQuery(filter: AnimalFilter(zooHouses: ["Atlantida"])))
        }
        #expect((try? catalogue.search(SearchQuery(filter: AnimalFilter(zooHouses: ["indonéská džungle"]))).total) == 1)
    }

    @Test(.enabled(if: RealData.enabled, RealData.skipMessage))
    func atLeastFourFifthsOfTheRealUnionAreRoutable() throws {
        let union = LexiconUnion.merge(
            lexicon: try RealData.lexiconCSV.get().animals, website: try RealData.animalsJSON.get().animals
        ).animals
        let catalogue = Catalogue(
            animals: union, mapFeatures: try RealData.animalsJSON.get().mapFeatures, joins: try RealData.joins.get())
        let report = ZooSnapshot(catalogue: catalogue, router: try RealData.router.get()).routability()
        #expect(Double(report.routableAnimals) >= 0.8 * Double(report.animals))
        #expect(catalogue.house(named: "Ptačí mokřady") != nil)
    }
}

/// The real lexicon CSV merged into the real animals.json: the website's entries under their own ids, the
/// lexicon's other species beside them, none under another's id (issue 39).
@Suite(.enabled(if: RealData.enabled, RealData.skipMessage))
struct RealLexiconUnionTests {
    static let merged = Result {
        LexiconUnion.merge(
            lexicon: try RealData.lexiconCSV.get().animals, website: try RealData.animalsJSON.get().animals)
    }

    @Test func everyWebsiteEntryKeepsItsIDNameLatinNameLocationAndImage() throws {
        let (union, _) = try Self.merged.get()
        let byID = Dictionary(uniqueKeysWithValues: union.map { ($0.id, $0) })
        let website = try RealData.animalsJSON.get().animals
        #expect(website.count == 605)
        for entry in website {
            let served = try #require(byID[entry.id])
            #expect(
                served.name == entry.name && served.latinName == (entry.latinName ?? served.latinName), "id \(entry.id)"
            )
            if entry.location != nil { #expect(served.location == entry.location, "id \(entry.id)") }
            if entry.imageURL != nil { #expect(served.imageURL == entry.imageURL, "id \(entry.id)") }
            #expect(
                served.isCurrentlyAvailable == entry.isCurrentlyAvailable && served.mapFeatureIDs == entry.mapFeatureIDs
            )
        }
        let amazon = try #require(byID[5])
        #expect(amazon.name == "Amazoňan jamajský" && amazon.latinName == "Amazona collaria")
        #expect(byID[22]?.name == "Ara Learův")
    }

    @Test func theLexiconsOtherSpeciesAreAddedUnderIDsAboveTheWebsites() throws {
        let (union, report) = try Self.merged.get()
        let lexicon = try RealData.lexiconCSV.get().animals
        let maximum = try RealData.animalsJSON.get().animals.map(\.id).max() ?? 0
        #expect(report.websiteEntries == 605 && report.lexiconRows == 327)
        #expect(report.matchedByLatinName + report.matchedByCzechName + report.added == 327)
        #expect(union.count == 605 + report.added && Set(union.map(\.id)).count == union.count)
        let added = union.filter { $0.sources == [.lexiconCSV] }
        #expect(added.count == report.added && added.allSatisfy { $0.id > maximum && $0.id > report.addedIDBase })
        #expect(
            added.allSatisfy { row in lexicon.contains { $0.id == row.id - report.addedIDBase && $0.name == row.name } }
        )
        // Matched rows are the same species: the Latin names agree at species level, or the Czech names do.
        #expect(report.added >= 60 && report.added <= 70)
        let festiva = try #require(union.first { $0.latinName == "Amazona festiva" })
        #expect(festiva.id == 679 && festiva.name == "Amazoňan modrobradý")
        let alone = try #require(union.first { $0.name == "Karakal" })
        #expect(alone.id == report.addedIDBase + 10 && alone.sources == [.lexiconCSV])
        #expect(
            report.conflicts.contains {
                $0.hasPrefix("lexicon id 5 \u{201C}Amazoňan modrobradý (Amazona festiva)\u{201D} is website id 5")
            })
    }

    @Test func searchFindsTheWebsitesSpeciesTheLexiconHid() throws {
        let (union, _) = try Self.merged.get()
        let catalogue = Catalogue(
            animals: union, mapFeatures: try RealData.animalsJSON.get().mapFeatures,
            adoptions: try RealData.adoptions.get(), joins: try RealData.joins.get())
        // The lexicon's Czech name of a species the website names otherwise finds it too.
        for text in ["Learův", "jamajský", "Levhart obláčkový", "Jelen lyrorohý"] {
            #expect(try catalogue.search(SearchQuery(text: text, includeUnavailable: true)).total >= 1, "\(text)")
        }
        // Every lexicon row is found by its own name, without diacritics, as it was before the merge by species.
        for row in try RealData.lexiconCSV.get().animals {
            let plain = row.name.folding(options: .diacriticInsensitive, locale: nil)
            let found = try catalogue.search(SearchQuery(text: plain, includeUnavailable: true, limit: 500)).animals
            #expect(
                found.contains { ([$0.name] + $0.otherNames).map(TextKey.nameKey).contains(TextKey.nameKey(row.name)) },
                "\(row.id) \(row.name)")
        }
        let lexiconLatin = Set(try RealData.animalsJSON.get().animals.compactMap(\.latinName))
        #expect(lexiconLatin.isSubset(of: Set(union.compactMap(\.latinName))))
    }
}
