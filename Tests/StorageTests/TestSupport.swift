import Foundation
import Storage
import Synchronization

/// Runs `body` with the path of a not-yet-existing database file in a fresh temporary directory,
/// removed afterwards.
func withTemporaryDatabasePath<T>(_ body: (String) async throws -> T) async throws -> T {
    let directory = FileManager.default.temporaryDirectory
        .appendingPathComponent("StorageTests-\(UUID().uuidString)", isDirectory: true)
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: directory) }
    return try await body(directory.appendingPathComponent("test.sqlite").path)
}

/// Counts calls from any thread (e.g. how often a migration ran).
final class Counter: Sendable {
    private let value = Atomic<Int>(0)
    func increment() { value.add(1, ordering: .sequentiallyConsistent) }
    var count: Int { value.load(ordering: .sequentiallyConsistent) }
}

struct TestFailure: Error, Equatable {}

/// A one-table schema used by most tests.
let itemsMigration = Migration(1, "create items") { connection in
    try connection.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE)")
}

func itemCount(_ database: Database) throws -> Int {
    try database.read { try $0.queryOne("SELECT count(*) FROM items")?.int(0) ?? -1 }
}
