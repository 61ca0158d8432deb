import Foundation
import Testing

@testable import ZooCore

@Suite struct LexiconCSVTests {
    static let header = LexiconCSV.columns.joined(separator: ";") + ";\n"

    /// A lexicon row with the given overrides (by column name); other columns get plausible values.
    static func row(_ values: [String: String]) -> String {
        var fields = LexiconCSV.columns.map { values[$0] ?? "x" }
        fields[LexiconCSV.columns.firstIndex(of: "classes")!] = values["classes"] ?? "Savci (Mammalia)"
        return fields.map { "\"" + $0.replacingOccurrences(of: "\"", with: "\"\"") + "\"" }.joined(separator: ";")
            + "\n"
    }

    @Test func splitsTaxaAndListsAndCleansValues() throws {
        let csv =
            Self.header
            + Self.row([
                "id": "7", "title": " Lev  indický ", "latin_title": "Panthera leo persica",
                "classes": "Savci (Mammalia)",
                "order": "Krabovci = bičovci (Amblypygi)", "continents": "Asie, Afrika ", "biotop": "''", "food": "",
            ])
        let result = try LexiconCSV.parse(csv)
        #expect(result.skipped.isEmpty)
        let animal = try #require(result.animals.first)
        #expect(animal.id == 7 && animal.name == "Lev indický")
        #expect(animal.taxonClass == Taxon(czech: "Savci", latin: "Mammalia"))
        #expect(animal.order == Taxon(czech: "Krabovci = bičovci", latin: "Amblypygi"))
        #expect(animal.continents == ["Asie", "Afrika"])
        #expect(animal.biotopes.isEmpty && animal.foods.isEmpty)
    }

    @Test func badRowsAreSkippedWithRowNumberAndReason() throws {
        let shifted = "12;\"Short\";\"row\"\n"
        let csv =
            Self.header + Self.row(["id": "1", "title": "Dobrý"]) + shifted
            + Self.row(["id": "abc", "title": "Bad id"])
            + Self.row(["id": "3", "title": "Bad class", "classes": "ostrovy Mauritius, Round Island a Rodrigues"])
            + Self.row(["id": "1", "title": "Duplicate"]) + Self.row(["id": "4", "title": "Dobrý taky"])
        let result = try LexiconCSV.parse(csv)
        #expect(result.animals.map(\.id) == [1, 4])
        #expect(result.skipped.map(\.row) == [2, 3, 4, 5])
        #expect(result.skipped.map(\.line) == [3, 4, 5, 6])
        #expect(result.skipped[0].reason.contains("shifted columns"))
        #expect(result.skipped[1].reason.contains("not a number"))
        #expect(result.skipped[2].reason.contains("not a class"))
        #expect(result.skipped[3].reason.contains("duplicate id"))
    }

    @Test func wrongHeaderFailsTheImport() {
        #expect(throws: ZooError.self) { try LexiconCSV.parse("id;name\n1;x\n") }
    }

    @Test(.enabled(if: RealData.enabled, RealData.skipMessage))
    func realFileQuirks() throws {
        let result = try RealData.lexiconCSV.get()
        // 328 records: the last is all empty; two with unescaped quotes are recovered.
        #expect(result.animals.count == 327)
        #expect(result.skipped.count == 1)
        #expect(result.skipped.first?.reason.contains("not a number") == true)
        let bat = try #require(result.animals.first { $0.id == 160 })
        #expect(bat.name == "Kaloň rodriguezský")
        #expect(bat.description?.contains("\"zlatý kaloň\"") == true)
        #expect(bat.imageURL == "https://zoopraha.cz/images/lexikon/Kaloň_rodriguezský.jpg")
        #expect(bat.location == "Pavilon velkých želv")
        let hornbill = try #require(result.animals.first { $0.id == 110 })
        #expect(hornbill.description?.hasSuffix("s výraznými \"řasami\"") == true)
        #expect(hornbill.imageURL == "https://zoopraha.cz/images/lexikon/dvojzoborožec_indický_2.jpg")
        let values = result.animals.flatMap { animal in
            [animal.name, animal.latinName, animal.location, animal.description].compactMap { $0 }
                + animal.continents + animal.biotopes + animal.foods
        }
        #expect(!values.contains("''"))
        #expect(values.allSatisfy { $0 == $0.trimmingCharacters(in: .whitespacesAndNewlines) })
        #expect(result.animals.first { $0.id == 80 }?.latinName == nil)  // Trnucha Castexova has ''
    }
}

@Suite(.enabled(if: RealData.enabled, RealData.skipMessage))
struct RealSourceTests {
    @Test func scrapedAnimalsWithMapLocations() throws {
        let result = try RealData.animalsJSON.get()
        #expect(result.animals.count == 605 && result.skipped.isEmpty)
        #expect(result.mapFeatures.count == 90)
        let lion = try #require(result.animals.first { $0.name == "Lev indický" })
        #expect(lion.mapFeatureIDs == [4_791_798_031, 30_000_630])
        #expect(lion.imageURL?.hasPrefix("https://") == true)
        let ostrich = try #require(result.animals.first { $0.name == "Pštros dvouprstý" })
        #expect(ostrich.continents == ["Afrika"])
        let enclosure = try #require(result.mapFeatures.first { $0.id == 4_636_225_666 })
        #expect(enclosure.singularNames == ["žirafa", "pštros", "přímorožec", "antilopa losí"])
        #expect(enclosure.outline.count == 1 && abs(enclosure.anchor.lat - 50.117) < 0.01)
        let pavilion = try #require(result.mapFeatures.first { $0.id == 30_000_630 })
        #expect(pavilion.isBuilding && pavilion.outline.count > 3)
        // 13 of the 90 locations leave singular_names out: kept apart from an empty list (the app answers null there).
        #expect(pavilion.singularNames == nil)
        #expect(result.mapFeatures.filter { $0.singularNames == nil }.count == 13)
        let multi = try #require(result.animals.first { $0.continents.count == 6 })
        #expect(multi.continents.contains("Jižní Amerika"))
    }

    @Test func footpathGraphAndBounds() throws {
        let network = try FootpathNetwork.parse(RealData.data("map-metadata.json"))
        #expect(network.nodes.count == 3361 && network.roads.count == 892)
        let bounds = try MapBounds.parse(RealData.data("map-bounds.json"))
        #expect(bounds.north == 50.122532 && bounds.west == 14.392734)
        #expect(bounds.contains(GeoPoint(lat: 50.1167, lon: 14.405)))
        #expect(!bounds.contains(GeoPoint(lat: 50.0875, lon: 14.4213)))  // Old Town Square
    }

    @Test func adoptionsAndJoinTables() throws {
        let adoptions = try RealData.adoptions.get()
        #expect(adoptions.count == 513)
        let cockroach = try #require(adoptions.first)
        #expect(
            cockroach.englishName == "Madagascar giant cockroach" && cockroach.priceCZK == 1000 && cockroach.visitable)
        let joins = try RealData.joins.get()
        #expect(joins.pavilionNames[43_285_115] == "Sečuán - pavilon ptáků z podhůří Himálaje")
        #expect(joins.singulars["lvi"] == ["lev"])
        #expect(joins.singulars["cervene"] == ["červená", "červený", "červené"])
    }
}
