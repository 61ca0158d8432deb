import Base
import Foundation
import Testing
@testable import ClassificationCore

@Suite struct CatalogueTests {
    @Test func searchIsCaseAndDiacriticsInsensitiveAndSortedByLocalName() throws {
        let store = try ClassificationStore.inMemory()
        let json = """
        [{"label": "beagle", "name": "Beagle", "local_name": "Bígl", "attributes": {"fur": "krátká", "country of origin": "Anglie"}},
         {"label": "chihuahua", "name": "Chihuahua", "local_name": "Čivava", "attributes": {"size": "malý"}},
         {"label": "akita", "name": "Akita Inu", "local_name": "Akita", "attributes": {"country of origin": "Japonsko"}}]
        """
        try store.importCatalogue(ClassificationStore.parseCatalogue(Array(json.utf8)))
        #expect(try store.searchCatalogue("").map(\.label) == ["akita", "beagle", "chihuahua"])
        #expect(try store.searchCatalogue("CIVAVA").map(\.label) == ["chihuahua"])
        #expect(try store.searchCatalogue("kratka").map(\.label) == ["beagle"])
        #expect(try store.searchCatalogue("o").map(\.label) == ["akita", "beagle"])  // Japonsko, Anglie… sorted by local name
        #expect(try store.catalogueEntry(label: "beagle")?.attributes["fur"] == "krátká")
        #expect(try store.catalogueEntry(label: "poodle") == nil)
        #expect(throws: ClassificationError.self) { try ClassificationStore.parseCatalogue(Array(#"[{"name": "x"}]"#.utf8)) }
        #expect(throws: ClassificationError.self) { try ClassificationStore.parseCatalogue(Array("[{".utf8)) }
    }

    @Test func feedbackIsKeptOnlyWithConsent() throws {
        let store = try ClassificationStore.inMemory()
        #expect(try store.recordFeedback(image: DatasetTests.red, label: "red", consent: false) == nil)
        #expect(try store.datasets().isEmpty)
        #expect(try store.database.read { try $0.queryOne("SELECT COUNT(*) FROM images")?.int(0) } == 0)
        let name = try store.recordFeedback(image: DatasetTests.red, label: "red", consent: true)
        try store.recordFeedback(image: DatasetTests.blue, label: "blue", consent: true)  // sorts before red
        try store.recordFeedback(image: DatasetTests.red2, label: "red", consent: true)
        let dataset = try store.dataset(named: try #require(name))
        #expect(dataset.labels == ["blue", "red"])
        #expect(dataset.countsPerLabel == ["blue": 1, "red": 2])
        let redHash = SHA256.hex(DatasetTests.red)
        #expect(dataset.samples.first { $0.hash == redHash }?.label == 1)
        #expect(throws: ClassificationError.self) { try store.recordFeedback(image: [1, 2, 3], label: "red", consent: true) }
    }
}
