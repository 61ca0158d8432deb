import Foundation
import StorageTestSupport
import Testing

@testable import ZooCore

@Suite struct SampleDataTests {
    static let directory = ZooDataSet.bundledSampleDirectory

    @Test func loadsAndEveryKeptAnimalWithALocationIsReachable() throws {
        let library = try ZooLibrary(database: .scratch(migrations: ZooSchema.migrations))
        let record = try #require(try library.loadSampleDataIfEmpty(from: Self.directory))
        #expect(record.files.first { $0.kind == .lexiconCSV }?.rowsImported == 13 && record.rowsSkipped == 0)
        let data = try library.database.read(ZooTables.loadDataSet)
        let zoo = try library.snapshot()
        let entrance = GeoPoint(lat: 50.1163, lon: 14.4000)
        for animal in zoo.catalogue.animals where animal.isCurrentlyAvailable && !animal.mapFeatureIDs.isEmpty {
            let route = try zoo.route(from: .point(entrance), to: .animal(id: animal.id))
            #expect(route.distanceMeters > 0 && route.distanceMeters < 1500, "\(animal.name)")
        }
        let cockroach = try zoo.catalogue.animal(id: 13)
        #expect(throws: ZooError.noMapLocation(animalID: 13, name: cockroach.name)) {
            try zoo.route(from: .point(entrance), to: .animal(id: 13))
        }
        #expect(throws: ZooError.unknownAnimal(id: 12)) { try zoo.catalogue.animal(id: 12) }
        #expect(try zoo.catalogue.animal(id: 1).adoption?.englishName == "Lion")
        #expect(try zoo.catalogue.search(SearchQuery(text: "zelva")).animals.map(\.name) == ["Želva obrovská"])
        let bounds = try #require(data.bounds)
        #expect(data.network.nodes.allSatisfy { bounds.contains($0.position, marginMeters: 0) })
    }

    @Test func csvLexiconAgreesWithTheJSONLexicon() throws {
        let csv = try LexiconCSV.parse(
            String(contentsOf: Self.directory.appendingPathComponent("lexikon-zvirat.csv"), encoding: .utf8))
        let json = try AnimalsJSON.parse(Data(contentsOf: Self.directory.appendingPathComponent("animals.json")))
        #expect(csv.skipped.isEmpty)
        #expect(csv.animals.map(\.name) == json.animals.map(\.name))
        #expect(csv.animals.map(\.taxonClass) == json.animals.map(\.taxonClass))
        #expect(csv.animals.map(\.continents) == json.animals.map(\.continents))
        #expect(csv.animals.map(\.location) == json.animals.map(\.location))
        // Joined by name, the CSV lexicon finds the same map locations as the JSON lists.
        let catalogue = Catalogue(animals: csv.animals, mapFeatures: json.mapFeatures)
        #expect(catalogue.animals.map { Set($0.mapFeatureIDs) } == json.animals.map { Set($0.mapFeatureIDs) })
    }
}
