import Foundation
import Storage
import StorageTestSupport
import Testing

@testable import ClassificationCore

/// Datasets belong to the user who uploaded them; those from before owners existed are the admin's.
@Suite struct DatasetOwnershipTests {
    static func colours() throws -> Dataset {
        try DatasetBuilder.classification(files: [
            ("red/a.png", DatasetTests.red), ("red/b.png", DatasetTests.red2),
            ("blue/a.png", DatasetTests.blue), ("blue/b.png", DatasetTests.blue2),
        ])
    }

    @Test func aUserSeesAndDeletesOnlyTheirOwnDatasets() throws {
        let store = try ClassificationStore.inMemory(using: .testBackend)
        try store.saveDataset(try Self.colours(), name: "mine", owner: "alice")
        #expect(try store.datasets(owner: "alice").map(\.name) == ["mine"])
        #expect(try store.datasets(owner: "bob").isEmpty)
        #expect(throws: ClassificationError.self) { try store.datasetSummary(named: "mine", owner: "bob") }
        #expect(throws: ClassificationError.self) { try store.dataset(named: "mine", owner: "bob") }
        #expect(throws: ClassificationError.self) { try store.deleteDataset(named: "mine", owner: "bob") }
        #expect(try store.dataset(named: "mine", owner: "alice").samples.count == 4)
        try store.deleteDataset(named: "mine", owner: "alice")
        #expect(try store.datasets().isEmpty)
    }

    @Test func datasetsFromBeforeOwnersBecomeTheAdminsOnUpgrade() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent(
            "cls-owners-\(UUID().uuidString).sqlite"
        ).path
        defer { for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) } }
        do {
            let old = ClassificationStore(
                database: try Database(path: path, migrations: Array(ClassificationStore.migrations.prefix(2))))
            try old.database.write { db in
                try db.execute(
                    "INSERT INTO datasets (name, kind, labels, created_at) VALUES ('old', 'classification', '[\"a\"]', 1)"
                )
            }
        }
        let store = try ClassificationStore(path: path)
        #expect(try store.datasets(owner: ClassificationStore.formerOwner).map(\.name) == ["old"])
        #expect(try store.datasets(owner: "alice").isEmpty)
    }
}
