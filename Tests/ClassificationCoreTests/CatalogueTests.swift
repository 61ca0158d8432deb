import Base
import Foundation
import StorageTestSupport
import TLS
import Testing

@testable import ClassificationCore

@Suite struct CatalogueTests {
    @Test func searchIsCaseAndDiacriticsInsensitiveAndSortedByLocalName() throws {
        let store = try ClassificationStore.inMemory(using: .testBackend)
        try store.importCatalogue(
            [
                CatalogueEntry(
                    label: "beagle", name: "Beagle", localName: "Bígl",
                    attributes: [.init("fur", "krátká"), .init("country of origin", "Anglie")]),
                CatalogueEntry(
                    label: "chihuahua", name: "Chihuahua", localName: "Čivava", attributes: [.init("size", "malý")]),
                CatalogueEntry(
                    label: "akita", name: "Akita Inu", localName: "Akita",
                    attributes: [.init("country of origin", "Japonsko")]),
            ], app: "dogs")
        #expect(try store.searchCatalogue("", app: "dogs").map(\.label) == ["akita", "beagle", "chihuahua"])
        #expect(try store.searchCatalogue("CIVAVA", app: "dogs").map(\.label) == ["chihuahua"])
        #expect(try store.searchCatalogue("kratka", app: "dogs").map(\.label) == ["beagle"])
        // Japonsko, Anglie… sorted by local name
        #expect(try store.searchCatalogue("o", app: "dogs").map(\.label) == ["akita", "beagle"])
        #expect(try store.catalogueEntry(label: "beagle", app: "dogs")?[attribute: "fur"] == "krátká")
        #expect(try store.catalogueEntry(label: "poodle", app: "dogs") == nil)
        #expect(throws: ClassificationError.self) {
            try store.importCatalogue([CatalogueEntry(label: "", name: "x", localName: "x")], app: "dogs")
        }
    }

    /// Each app has its catalogue, keyed by label, its attributes in the order imported (they were sorted by code
    /// point: the dog seed's fur, size, weight … came back as avgAge, color, fur …).
    @Test func catalogueIsPerAppInTheOrderImported() throws {
        let store = try ClassificationStore.inMemory(using: .testBackend)
        let keys = ["id", "fur", "size", "weight", "height", "color", "avgAge", "originCountry", "imageName"]
        try store.importCatalogue(
            [
                CatalogueEntry(
                    label: "beagle", name: "Beagle", localName: "Bígl",
                    attributes: keys.map { .init($0, "\($0) value") })
            ], app: "dogs")
        try store.importCatalogue(
            [CatalogueEntry(label: "beagle", name: "A clover called beagle", localName: "Jetel")], app: "clovers")
        #expect(try store.catalogueEntry(label: "beagle", app: "dogs")?.attributes.map(\.key) == keys)
        #expect(try store.catalogueEntry(label: "beagle", app: "clovers")?.localName == "Jetel")
        #expect(try store.catalogueEntry(label: "beagle", app: "cats") == nil)
        #expect(try store.searchCatalogue("", app: "clovers").map(\.name) == ["A clover called beagle"])
        #expect(throws: ClassificationError.invalid("catalogue[1]: label \"a\" is catalogue[0]'s too")) {
            try store.importCatalogue(
                [
                    CatalogueEntry(label: "a", name: "a", localName: "a"),
                    CatalogueEntry(label: "a", name: "b", localName: "b"),
                ], app: "dogs")
        }
    }

    @Test func feedbackIsKeptOnlyWithConsent() throws {
        let store = try ClassificationStore.inMemory(using: .testBackend)
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
        #expect(throws: ClassificationError.self) {
            try store.recordFeedback(image: [1, 2, 3], label: "red", consent: true)
        }
    }
}
