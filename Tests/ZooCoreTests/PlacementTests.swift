import Foundation
import Storage
import Testing
@testable import ZooCore

/// The union of the two lexicons by id, and where a walk to an animal without a pen of its own ends.
@Suite struct PlacementTests {
    static let mammals = Taxon(czech: "Savci", latin: "Mammalia")

    @Test func unionByIDKeepsTheLexiconsTextAndTheWebsitesPensAndRecordsSources() {
        let lexicon = [
            Animal(id: 1, name: "Lev indický", taxonClass: Taxon(czech: "Savci", latin: nil), description: "lexicon text",
                   projects: "lexicon projects", location: "Pavilon šelem a plazů", sources: [.lexiconCSV]),
            Animal(id: 2, name: "Jen v lexikonu", sources: [.lexiconCSV]),
        ]
        let website = [
            Animal(id: 1, name: "Lev", taxonClass: Self.mammals, description: "website text", proportions: "2 m",
                   location: "Šelmy", isCurrentlyAvailable: false, mapFeatureIDs: [10], sources: [.animalsJSON]),
            Animal(id: 3, name: "Jen na webu", mapFeatureIDs: [11], sources: [.animalsJSON]),
        ]
        let union = LexiconUnion.merge(lexicon: lexicon, website: website)
        #expect(union.map(\.id) == [1, 2, 3])
        #expect(union.map(\.sources) == [[.lexiconCSV, .animalsJSON], [.lexiconCSV], [.animalsJSON]])
        let lion = union[0]
        #expect(lion.name == "Lev indický")
        #expect(lion.description == "lexicon text")  // the lexicon's text wins
        #expect(lion.projects == "lexicon projects")
        #expect(lion.location == "Pavilon šelem a plazů")
        #expect(lion.proportions == "2 m")  // filled from the website
        #expect(lion.taxonClass == Self.mammals)  // the Latin class name filled in
        #expect(lion.mapFeatureIDs == [10])
        #expect(!lion.isCurrentlyAvailable)
        #expect(union[2].mapFeatureIDs == [11])
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
        let library = try ZooLibrary(database: .inMemory(migrations: ZooSchema.migrations))
        try library.importFiles([
            ZooSourceFile(kind: .lexiconCSV, name: "lexicon.csv", content: Data(csv.utf8)),
            ZooSourceFile(kind: .animalsJSON, name: "animals.json", content: Data(json.utf8)),
        ], source: "test", trigger: .client)
        let animals = try library.snapshot().catalogue.animals
        #expect(animals.map(\.id) == [1, 2, 3])
        #expect(animals[0].description == "Z lexikonu" && animals[0].proportions == "2 m" && animals[0].mapFeatureIDs == [10])
        let counts = try library.metadata().counts
        #expect((counts.bothSources, counts.lexiconCSVOnly, counts.animalsJSONOnly) == (1, 1, 1))
    }

    /// Pens of the house's animals, its building (named through the fixes), a path the fixes name, plurals.
    static func catalogue() -> Catalogue {
        let features = [
            MapFeature(id: 100, name: "lvi", isAnimalPen: true, isBuilding: false, singularNames: [],
                       outline: [GeoPoint(lat: 50.1, lon: 14.4)], animalNames: []),
            MapFeature(id: 200, name: "Indonéská džungle", isAnimalPen: false, isBuilding: true, singularNames: [],
                       outline: [GeoPoint(lat: 50.2, lon: 14.4)], animalNames: []),
            MapFeature(id: 300, name: "Ptačí svět (OSM)", isAnimalPen: false, isBuilding: true, singularNames: [],
                       outline: [GeoPoint(lat: 50.3, lon: 14.4)], animalNames: []),
            MapFeature(id: 400, name: "lachtani", isAnimalPen: true, isBuilding: false, singularNames: [],
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
        return Catalogue(animals: animals, mapFeatures: features,
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
            nodes: [FootpathNode(id: 1, position: GeoPoint(lat: 50.0, lon: 14.4)), FootpathNode(id: 2, position: GeoPoint(lat: 50.5, lon: 14.4))],
            roads: [Footpath(id: 9, nodeIDs: [1, 2])])
        let snapshot = ZooSnapshot(catalogue: Self.catalogue(), router: Router(graph: FootpathGraph(network: network), bounds: nil))
        let report = snapshot.routability()
        #expect(report.animals == 8)
        // Lachtan reaches the pen "lachtani" itself (singular "lachtan" is its name).
        #expect((report.toPen, report.toHouse, report.toZooPart) == (2, 3, 1))
        #expect(report.unroutableAnimals.map(\.animalID) == [6, 7])
        #expect(report.unroutableAnimals[0].reason.contains("no location in either source"))
        #expect(report.unroutableHouses.map(\.name) == ["Příroda kolem nás"])
        let (_, destination) = try snapshot.routeWithDestination(from: .point(GeoPoint(lat: 50.0, lon: 14.4)), to: .animal(id: 2))
        #expect(destination == Destination(kind: .zooPart, name: "Dolní část zoo", featureID: 100))
    }

    @Test func anUnknownFilterValueIsRejectedWithTheKnownOnes() {
        let catalogue = Self.catalogue()
        #expect(throws: ZooError.invalidArgument(
            "unknown house \"Atlantida\"; known values: Dolní část zoo, Lachtani, Pavilon Indonéská džungle, Ptačí svět, Příroda kolem nás")) {
            try catalogue.search(SearchQuery(filter: AnimalFilter(zooHouses: ["Atlantida"])))
        }
        #expect((try? catalogue.search(SearchQuery(filter: AnimalFilter(zooHouses: ["indonéská džungle"]))).total) == 1)
    }

    @Test(.enabled(if: RealData.enabled, RealData.skipMessage))
    func atLeastFourFifthsOfTheRealUnionAreRoutable() throws {
        let union = LexiconUnion.merge(lexicon: try RealData.lexiconCSV.get().animals, website: try RealData.animalsJSON.get().animals)
        #expect(union.count == 666)
        let catalogue = Catalogue(animals: union, mapFeatures: try RealData.animalsJSON.get().mapFeatures, joins: try RealData.joins.get())
        let report = ZooSnapshot(catalogue: catalogue, router: try RealData.router.get()).routability()
        #expect(Double(report.routableAnimals) >= 0.8 * Double(report.animals))
        #expect(catalogue.house(named: "Ptačí mokřady") != nil)
    }
}
