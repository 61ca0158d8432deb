import Storage
import StorageTestSupport
import Testing

/// The tests' backend is chosen by MENAGERIE_STORAGE_BACKEND, read by the test support alone: the production
/// `Database.inMemory` is always SQLite.
@Suite struct BackendTests {
    @Test func aTypoInTheBackendIsAnErrorNotSQLite() throws {
        #expect(throws: StorageError.self) { try StorageBackend.named("dqlte") }
        #expect(throws: StorageError.self) { try StorageBackend.named("") }
        #expect(try StorageBackend.named(nil) == .sqlite)
        #expect(try StorageBackend.named("dqlite") == .dqlite)
    }

    /// The suites compose runs a second time with MENAGERIE_STORAGE_BACKEND=dqlite really run on dqlite then.
    @Test func theTestBackendIsTheConfiguredOne() throws {
        let onDqlite = try StorageBackend.configured() == .dqlite
        #expect(try Database.scratch().isReplicated == onDqlite)
        #expect(try DatabaseFactory.testBackend.open(migrations: []).isReplicated == onDqlite)
    }

    @Test func productionInMemoryIsAlwaysSQLite() throws {
        #expect(try !Database.inMemory().isReplicated)
        #expect(try !DatabaseFactory.inMemory.open(migrations: []).isReplicated)
    }
}
