import Foundation
import StorageTestSupport
import Testing

@testable import ZooCore

@Suite struct CatalogueTests {
    static let mammals = Taxon(czech: "Savci", latin: "Mammalia")
    static let reptiles = Taxon(czech: "Plazi", latin: "Reptilia")
    static let birds = Taxon(czech: "Ptáci", latin: "Aves")

    static let catalogue = Catalogue(
        animals: [
            Animal(
                id: 1, name: "Lev indický", latinName: "Panthera leo persica", taxonClass: mammals,
                continents: ["Asie"], biotopes: ["listnatý a smíšený les"], foods: ["obratlovci"],
                location: "Pavilon šelem a plazů"),
            Animal(
                id: 2, name: "Želva obrovská", latinName: "Dipsochelys dussumieri", taxonClass: reptiles,
                continents: ["Afrika"], biotopes: ["travnaté území"], foods: ["části rostlin"],
                location: "Pavilon velkých želv"),
            Animal(
                id: 3, name: "Levhart obláčkový", latinName: "Neofelis nebulosa", taxonClass: mammals,
                continents: ["Asie"], biotopes: ["tropický les"], foods: ["obratlovci"],
                location: "Pavilon šelem a plazů"),
            Animal(
                id: 4, name: "Kotul veverovitý", latinName: "Saimiri sciureus", taxonClass: mammals,
                continents: ["Jižní Amerika"], biotopes: ["tropický les"], foods: ["bezobratlí", "plody"],
                location: "Vodní svět"),
            Animal(
                id: 5, name: "Pelikán bílý", latinName: "Pelecanus onocrotalus", taxonClass: birds,
                continents: ["Afrika", "Asie", "Evropa"], biotopes: ["sladké vody"], foods: ["ryby"],
                location: "Ptačí mokřady"),
            Animal(
                id: 6, name: "Zmije levantská", latinName: "Macrovipera lebetina", taxonClass: reptiles,
                continents: ["Asie"], biotopes: ["hory"], foods: ["obratlovci"], location: "Pavilon Indonéská džungle",
                isCurrentlyAvailable: false),
            Animal(
                id: 7, name: "Gekon levý", latinName: "Gekko sinister", taxonClass: reptiles,
                continents: ["Asie"], biotopes: ["tropický les"], foods: ["bezobratlí"], location: "Indonéská džungle"),
        ],
        adoptions: [
            Adoption(
                czechName: "Želva obrovská (= aldabranská)", englishName: "Aldabra giant tortoise",
                className: "Plazi", priceCZK: 5000, visitable: true)
        ])

    func ids(_ query: SearchQuery) throws -> [Int] { try Self.catalogue.search(query).animals.map(\.id) }

    @Test func diacriticsAndCaseInsensitive() throws {
        #expect(try ids(SearchQuery(text: "zelva")) == [2])
        #expect(try ids(SearchQuery(text: "ŽELVA OBROVSKÁ")) == [2])
        #expect(try ids(SearchQuery(text: "obrovska")) == [2])
        #expect(try ids(SearchQuery(text: "dipsochelys")) == [2])
        #expect(try ids(SearchQuery(text: "aldabra")) == [2])  // English name from the adoption list
    }

    @Test func rankingExactThenPrefixThenWordPrefixThenSubstringThenOtherFields() throws {
        // "lev": name prefix (Lev, Levhart), word prefix (Gekon levý), substring (Zmije levantská is unavailable),
        // other fields: none. "Lev indický" and "Levhart" tie on prefix and sort by name.
        #expect(try ids(SearchQuery(text: "lev")) == [1, 3, 7])
        #expect(try ids(SearchQuery(text: "lev indicky")) == [1])
        #expect(try ids(SearchQuery(text: "levhart oblackovy")) == [3])
        // Exact beats prefix: an exact English/Latin name wins over a prefix of a Czech one.
        #expect(try ids(SearchQuery(text: "kotul veverovity")) == [4])
        #expect(try ids(SearchQuery(text: "savci")) == [4, 1, 3])  // other field (class) only, by name
        #expect(try ids(SearchQuery(text: "hart")) == [3])  // substring
        #expect(try ids(SearchQuery(text: "le", includeUnavailable: true)).prefix(3) == [1, 3, 7])
        #expect(try ids(SearchQuery(text: "pele")) == [5])
    }

    @Test func exactNameOutranksPrefix() throws {
        let catalogue = Catalogue(animals: [
            Animal(id: 1, name: "Adax nubijský"), Animal(id: 2, name: "Adax"),
            Animal(id: 3, name: "Pes", latinName: "Adaxus"),
            Animal(id: 4, name: "Velký adax"), Animal(id: 5, name: "Kadaxa"),
            Animal(id: 6, name: "Jiný", order: Taxon(czech: "Adaxovití", latin: nil)),
        ])
        #expect(try catalogue.search(SearchQuery(text: "adax")).animals.map(\.id) == [2, 1, 3, 4, 5, 6])
    }

    @Test func filtersAreOrWithinAKindAndAndAcrossKinds() throws {
        #expect(try ids(SearchQuery(filter: AnimalFilter(classes: ["Savci"]))) == [4, 1, 3])
        #expect(try ids(SearchQuery(filter: AnimalFilter(classes: ["reptilia", "aves"]))) == [7, 5, 2])
        #expect(try ids(SearchQuery(filter: AnimalFilter(classes: ["Savci"], biotopes: ["tropicky les"]))) == [4, 3])
        #expect(
            try ids(
                SearchQuery(filter: AnimalFilter(foods: ["ryby", "plody"], continents: ["Jižní Amerika", "Evropa"])))
                == [4, 5])
        #expect(try ids(SearchQuery(filter: AnimalFilter(zooHouses: ["Indonéská džungle"]))) == [7])
        #expect(
            try ids(SearchQuery(filter: AnimalFilter(zooHouses: ["Indonéská džungle"]), includeUnavailable: true)) == [
                7, 6,
            ])
        #expect(try ids(SearchQuery(text: "lev", filter: AnimalFilter(classes: ["Plazi"]))) == [7])
        // unknown value
        #expect(throws: ZooError.self) { try ids(SearchQuery(filter: AnimalFilter(classes: ["Ryby"]))) }
    }

    @Test func pagingKeepsTheTotal() throws {
        let page = try Self.catalogue.search(SearchQuery(offset: 2, limit: 2))
        #expect(page.total == 6)
        #expect(page.animals.map(\.id) == [1, 3])
        #expect(throws: ZooError.self) { try Self.catalogue.search(SearchQuery(limit: -1)) }
    }

    @Test func filterValuesWithCounts() {
        let values = Self.catalogue.filterValues()
        #expect(
            values.classes == [
                FilterValue(value: "Plazi", count: 2), FilterValue(value: "Ptáci", count: 1),
                FilterValue(value: "Savci", count: 3),
            ])
        #expect(values.continents.first { $0.value == "Asie" }?.count == 4)
        #expect(values.zooHouses.first { $0.value == "Indonéská džungle" }?.count == 1)
        let all = Self.catalogue.filterValues(includeUnavailable: true)
        #expect(all.continents.first { $0.value == "Asie" }?.count == 5)
        #expect(
            all.zooHouses.first {
                MapLinker.pavilionKey($0.value) == "indonesak dzungle" || $0.value.hasSuffix("Indonéská džungle")
            }?.count == 2)
    }

    @Test func detailHasEveryAttributeAndRespectsAvailability() throws {
        let tortoise = try Self.catalogue.animal(id: 2)
        #expect(tortoise.adoption?.priceCZK == 5000 && tortoise.englishName == "Aldabra giant tortoise")
        #expect(throws: ZooError.unknownAnimal(id: 6)) { try Self.catalogue.animal(id: 6) }
        #expect(try Self.catalogue.animal(id: 6, includeUnavailable: true).name == "Zmije levantská")
        #expect(throws: ZooError.unknownAnimal(id: 99)) { try Self.catalogue.animal(id: 99, includeUnavailable: true) }
        #expect(ZooError.unknownAnimal(id: 99).category == .notFound)
    }

    @Test func mapFeaturesJoinDirectlyByPavilionAndBySingularName() {
        let features = [
            MapFeature(
                id: 10, name: "lvi", isAnimalPen: true, isBuilding: false, singularNames: ["lev"],
                outline: [GeoPoint(lat: 50, lon: 14)], animalNames: []),
            MapFeature(
                id: 11, name: "Pavilon šelem a plazů", isAnimalPen: false, isBuilding: true, singularNames: [],
                outline: [GeoPoint(lat: 50, lon: 14)], animalNames: []),
            MapFeature(
                id: 12, name: "želvy", isAnimalPen: true, isBuilding: false, singularNames: [],
                outline: [GeoPoint(lat: 50, lon: 14)], animalNames: []),
            MapFeature(
                id: 13, name: "OSM name", isAnimalPen: false, isBuilding: true, singularNames: [],
                outline: [GeoPoint(lat: 50, lon: 14)], animalNames: ["Kotul veverovitý"]),
        ]
        let joins = MapJoinTables(pavilionNames: [13: "Vodní svět"], singulars: ["zelvy": ["želva"]])
        let catalogue = Catalogue(animals: Self.catalogue.animals, mapFeatures: features, joins: joins)
        #expect(catalogue.animals[0].mapFeatureIDs == [11, 10])  // Lev indický: pavilion + "lev"
        #expect(catalogue.animals[1].mapFeatureIDs == [12])  // Želva obrovská: "želvy" → "želva"
        #expect(catalogue.animals[2].mapFeatureIDs == [11])  // Levhart: pavilion only ("lev" is not its first word)
        #expect(catalogue.animals[3].mapFeatureIDs == [13])  // Kotul: listed by the source
        #expect(catalogue.house(named: "vodni svet")?.featureIDs == [13])
    }
}

@Suite(.enabled(if: RealData.enabled, RealData.skipMessage))
struct RealCatalogueTests {
    @Test func everyImportedCSVAnimalIsFindableByItsNameWithoutDiacritics() throws {
        let catalogue = try RealData.csvCatalogue.get()
        #expect(catalogue.animals.count == 327)
        for animal in catalogue.animals {
            let plain = animal.name.folding(options: .diacriticInsensitive, locale: nil)
            let page = try catalogue.search(
                SearchQuery(text: plain, includeUnavailable: true, limit: Catalogue.maxPageSize))
            #expect(page.animals.first { $0.id == animal.id } != nil, "\(animal.name) not found by \(plain)")
            #expect(
                TextKey.fold(page.animals.first?.name ?? "") == TextKey.fold(animal.name),
                "\(animal.name) not ranked first")
        }
    }

    /// Counts per value straight from the CSV records: column split on commas, trimmed, `''` dropped.
    static func independentCounts(column: String, transform: (String) -> String = { $0 }) throws -> [String: Int] {
        let records = CSVParser.parse(try RealData.text("lexikon-zvirat.csv"))
        let header = records[0].fields
        let index = try #require(header.firstIndex(of: column))
        var counts: [String: Int] = [:]
        for record in records.dropFirst() where record.fields.count >= 21 && Int(record.fields[0]) != nil {
            let values = Set(
                record.fields[index].split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
                    .filter { !$0.isEmpty && $0 != "''" }.map(transform))
            for value in values { counts[value, default: 0] += 1 }
        }
        return counts
    }

    @Test func filterCountsEqualCountsFromTheSourceFile() throws {
        let values = try RealData.csvCatalogue.get().filterValues()
        func dictionary(_ values: [FilterValue]) -> [String: Int] {
            Dictionary(uniqueKeysWithValues: values.map { ($0.value, $0.count) })
        }
        let classes = try Self.independentCounts(column: "classes") {
            String($0.prefix { $0 != "(" }).trimmingCharacters(in: .whitespaces)
        }
        #expect(dictionary(values.classes) == classes)
        #expect(dictionary(values.foods) == (try Self.independentCounts(column: "food")))
        #expect(dictionary(values.biotopes) == (try Self.independentCounts(column: "biotop")))
        #expect(dictionary(values.continents) == (try Self.independentCounts(column: "continents")))
        #expect(dictionary(values.zooHouses) == (try Self.independentCounts(column: "localities_title")))
        // Anchors counted with Python's csv module over well-formed rows (it splits the bat's record: +1 Africa).
        #expect(classes["Savci"] == 112)
        #expect(classes["Ptáci"] == 136 && classes["Plazi"] == 66)
        #expect(dictionary(values.continents)["Afrika"] == 79)
        // Filtering by each value finds exactly `count` animals.
        let catalogue = try RealData.csvCatalogue.get()
        for value in values.biotopes {
            #expect(
                try catalogue.search(SearchQuery(filter: AnimalFilter(biotopes: [value.value]), limit: 0)).total
                    == value.count)
        }
    }

    @Test func adoptionsAndMapLocationsJoinTheCSVLexicon() throws {
        let catalogue = try RealData.csvCatalogue.get()
        let giraffe = try catalogue.animal(id: 323)
        #expect(giraffe.adoption?.priceCZK == 50000 && giraffe.englishName == "Rothschild's giraffe")
        let lion = try catalogue.animal(id: 1)
        #expect(Set(lion.mapFeatureIDs) == [4_791_798_031, 30_000_630])
        #expect(catalogue.animals.filter { !$0.mapFeatureIDs.isEmpty }.count > 200)
    }
}

@Suite struct TextKeyTests {
    @Test func asciiFastPathFoldsLikeFoundation() {
        let samples = [
            "zelva", "  Lev   INDICKY ", "Panthera leo\tpersica\n", "a-b (c)", "", "   ", "Z", "x\u{0B}y\u{0C}z\r\nw",
            "@#1 2!",
        ]
        for text in samples {
            let reference = text.folding(options: [.caseInsensitive, .diacriticInsensitive], locale: nil)
                .split(whereSeparator: { $0.isWhitespace }).joined(separator: " ")
            #expect(TextKey.fold(text) == reference, "\(text.debugDescription)")
        }
        #expect(TextKey.fold("  Želva  OBROVSKÁ ") == "zelva obrovska")
    }
}

/// The search index against a plain scan of every animal's folded text.
@Suite struct SearchIndexTests {
    /// Offsets where `needle` occurs in `haystack`.
    static func occurrences(_ needle: [UInt8], in haystack: [UInt8]) -> [Int] {
        guard !needle.isEmpty, needle.count <= haystack.count else { return [] }
        return (0...(haystack.count - needle.count)).filter { Array(haystack[$0..<($0 + needle.count)]) == needle }
    }

    /// An animal's folded names and other fields.
    struct FoldedAnimal {
        var id: Int
        var sortKey: [UInt8]
        var names: [[UInt8]]
        var others: [[UInt8]]

        init(_ animal: Animal) {
            id = animal.id
            names = [animal.name, animal.latinName, animal.englishName].compactMap { $0 }.map {
                Array(TextKey.fold($0).utf8)
            }
            sortKey = names[0]
            let taxa = [
                animal.taxonClass?.czech, animal.taxonClass?.latin, animal.order?.czech, animal.order?.latin,
                animal.location,
            ]
            others = (taxa.compactMap { $0 } + animal.continents + animal.biotopes + animal.foods).map {
                Array(TextKey.fold($0).utf8)
            }
        }
    }

    /// The rank a plain scan gives: 0 exact name, 1 name prefix, 2 word prefix in a name, 3 name substring,
    /// 4 other field; nil: no match.
    static func plainRank(_ animal: FoldedAnimal, _ needle: [UInt8]) -> Int? {
        if needle.isEmpty { return 0 }
        let ranks = animal.names.compactMap { name -> Int? in
            if name == needle { return 0 }
            let found = occurrences(needle, in: name)
            if found.contains(0) { return 1 }
            if found.contains(where: {
                [UInt8(ascii: " "), UInt8(ascii: "-"), UInt8(ascii: "(")].contains(name[$0 - 1])
            }) {
                return 2
            }
            return found.isEmpty ? nil : 3
        }
        if let best = ranks.min() { return best }
        return animal.others.contains { !occurrences(needle, in: $0).isEmpty } ? 4 : nil
    }

    static func check(_ catalogue: Catalogue, needles: [String]) throws {
        let animals = catalogue.animals.map(FoldedAnimal.init)
        for needle in needles {
            let folded = Array(TextKey.fold(needle).utf8)
            let expected = animals.compactMap { animal in plainRank(animal, folded).map { (rank: $0, animal: animal) } }
                .sorted { a, b in
                    if a.rank != b.rank { return a.rank < b.rank }
                    return a.animal.sortKey == b.animal.sortKey
                        ? a.animal.id < b.animal.id
                        : a.animal.sortKey.lexicographicallyPrecedes(b.animal.sortKey)
                }
                .map(\.animal.id)
            let found = try catalogue.search(
                SearchQuery(text: needle, includeUnavailable: true, limit: Catalogue.maxPageSize))
            #expect(found.animals.map(\.id) == expected, "\(needle.debugDescription)")
            #expect(found.total == expected.count, "\(needle.debugDescription)")
        }
    }

    /// Every letter, a few odd needles, whole names and random pieces of names of 2, 3, 4 and 7 characters.
    static func needles(from catalogue: Catalogue) -> [String] {
        var needles = Set(
            "abcdefghijklmnopqrstuvwxyz".map(String.init) + ["", "xyz", "zz", " a", "-", "(", "sav", "lev"])
        var generator = SystemRandomNumberGenerator()
        for animal in catalogue.animals {
            let name = Array(TextKey.fold(animal.name))
            for length in [2, 3, 4, 7] where name.count >= length {
                let start = Int.random(in: 0...(name.count - length), using: &generator)
                needles.insert(String(name[start..<(start + length)]))
            }
            needles.insert(TextKey.fold(animal.name))
        }
        return needles.sorted()
    }

    @Test func sampleSearchMatchesAPlainScan() throws {
        let library = try ZooLibrary(database: .scratch(migrations: ZooSchema.migrations))
        try library.loadSampleDataIfEmpty(from: SampleFiles.directory)
        let catalogue = try library.snapshot().catalogue
        try Self.check(catalogue, needles: Self.needles(from: catalogue))
    }

    @Test(.enabled(if: RealData.enabled, RealData.skipMessage))
    func realSearchMatchesAPlainScan() throws {
        let catalogue = try RealData.csvCatalogue.get()
        var generator = SystemRandomNumberGenerator()
        let needles = Self.needles(from: catalogue)
        try Self.check(
            catalogue, needles: needles.filter { $0.count <= 1 } + needles.shuffled(using: &generator).prefix(150))
    }
}
