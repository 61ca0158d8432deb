import Foundation
import Storage
import Testing

@Suite struct MigrationTests {
    private func userVersion(_ database: Database) throws -> Int32? {
        try database.read { try $0.queryOne("PRAGMA user_version")?.value(at: 0, as: Int32.self) }
    }

    /// Opens `path` with `migrations` and returns the resulting schema version.
    private func versionAfterOpening(_ path: String, _ migrations: [Migration]) throws -> Int32? {
        try userVersion(Database(path: path, migrations: migrations))
    }

    @Test func freshDatabaseAppliesEveryMigrationAndIsConfigured() async throws {
        try await withTemporaryDatabasePath { path in
            let database = try Database(
                path: path,
                migrations: [
                    itemsMigration,
                    Migration(2, "add tags") {
                        try $0.execute("CREATE TABLE tags (item INTEGER REFERENCES items(id))")
                    },
                ])
            #expect(try userVersion(database) == 2)
            let tables = try database.read {
                try $0.query("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name").compactMap {
                    $0.string(0)
                }
            }
            #expect(tables == ["items", "tags"])
            for access in [database.read, database.write] as [((Connection) throws -> Row?) throws -> Row?] {
                let settings = try access {
                    try $0.queryOne(
                        "SELECT (SELECT journal_mode FROM pragma_journal_mode) AS journal, "
                            + "(SELECT foreign_keys FROM pragma_foreign_keys) AS fk, "
                            + "(SELECT synchronous FROM pragma_synchronous) AS sync")
                }
                #expect(settings?.string("journal") == "wal")
                #expect(settings?.bool("fk") == true)
                #expect(settings?.int("sync") == 2)  // FULL
            }
        }
    }

    @Test func incrementalMigrationAppliesOnlyNewSteps() async throws {
        try await withTemporaryDatabasePath { path in
            let first = Counter()
            let second = Counter()
            let v1 = Migration(1, "one") {
                try $0.execute("CREATE TABLE one (x)")
                first.increment()
            }
            let v2 = Migration(2, "two") {
                try $0.execute("CREATE TABLE two (x)")
                second.increment()
            }
            let versions = try [[v1], [v1, v2], [v1, v2]].map { try versionAfterOpening(path, $0) }
            #expect(versions == [1, 2, 2])
            #expect(first.count == 1)
            #expect(second.count == 1)
        }
    }

    @Test func databaseNewerThanKnownIsRefusedAndLeftAlone() async throws {
        try await withTemporaryDatabasePath { path in
            let v2 = Migration(2, "two") { try $0.execute("CREATE TABLE two (x)") }
            _ = try Database(path: path, migrations: [itemsMigration, v2])
            let error = #expect(throws: StorageError.self) {
                try Database(path: path, migrations: [itemsMigration])
            }
            #expect(error?.kind == .migration)
            #expect(error?.message.contains("newer") == true)
            #expect(try versionAfterOpening(path, [itemsMigration, v2]) == 2)
        }
    }

    @Test func failingMigrationRollsBackAndKeepsUserVersion() async throws {
        try await withTemporaryDatabasePath { path in
            let broken = Migration(2, "broken") { connection in
                try connection.execute("CREATE TABLE half (x)")
                try connection.execute("INSERT INTO missing_table VALUES (1)")
            }
            let error = #expect(throws: StorageError.self) {
                try Database(path: path, migrations: [itemsMigration, broken])
            }
            #expect(error?.kind == .migration)
            #expect(error?.message.contains("broken") == true)
            #expect(error?.sql == "INSERT INTO missing_table VALUES (1)")

            let database = try Database(path: path, migrations: [itemsMigration])
            #expect(try userVersion(database) == 1)
            let half = try database.read { try $0.queryOne("SELECT 1 FROM sqlite_master WHERE name = 'half'") }
            #expect(half == nil)
        }
    }

    @Test func swiftErrorInMigrationBecomesMigrationError() async throws {
        try await withTemporaryDatabasePath { path in
            let throwing = Migration(1, "throws") { _ in throw TestFailure() }
            let error = #expect(throws: StorageError.self) { try Database(path: path, migrations: [throwing]) }
            #expect(error?.kind == .migration)
            let version = try versionAfterOpening(path, [])
            #expect(version == 0)
        }
    }

    @Test func migrationsMustBeStrictlyIncreasing() async throws {
        try await withTemporaryDatabasePath { path in
            let v2 = Migration(2, "two") { _ in }
            let error = #expect(throws: StorageError.self) {
                try Database(path: path, migrations: [v2, itemsMigration])
            }
            #expect(error?.kind == .misuse)
        }
    }

    /// Two replicas starting at once: each migration must run exactly once.
    @Test func concurrentStartupsApplyEachMigrationOnce() async throws {
        try await withTemporaryDatabasePath { path in
            let applied = Counter()
            let migrations = (1...5).map { version in
                Migration(Int32(version), "step \(version)") { connection in
                    applied.increment()
                    try connection.execute("CREATE TABLE t\(version) (x)")
                    Thread.sleep(forTimeInterval: 0.02)  // widen the race window
                }
            }
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<4 {
                    group.addTask { _ = try Database(path: path, migrations: migrations) }
                }
                try await group.waitForAll()
            }
            #expect(applied.count == 5)
            #expect(try versionAfterOpening(path, migrations) == 5)
        }
    }
}
