import Storage

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// The backend the tests' databases run on (`DatabaseFactory.testBackend`, `Database.scratch`): the one reading of
/// `MENAGERIE_STORAGE_BACKEND`, so that every suite, and every store built on them, agrees on it. compose's test
/// command runs the storage suites a second time with it set to `dqlite`.
public enum StorageBackend: String, Sendable {
    case sqlite, dqlite

    /// `MENAGERIE_STORAGE_BACKEND`, SQLite when it is unset; any other value is `.misuse` (a typo must not quietly
    /// run a suite on the other backend).
    public static func configured() throws(StorageError) -> StorageBackend {
        try named(getenv("MENAGERIE_STORAGE_BACKEND").map { String(cString: $0) })
    }

    /// The backend a value of `MENAGERIE_STORAGE_BACKEND` names (nil: unset).
    public static func named(_ value: String?) throws(StorageError) -> StorageBackend {
        guard let value else { return .sqlite }
        guard let backend = StorageBackend(rawValue: value) else {
            throw StorageError(.misuse, message: "MENAGERIE_STORAGE_BACKEND is sqlite or dqlite, not \"\(value)\"")
        }
        return backend
    }
}

extension DatabaseFactory {
    /// Private databases on the configured backend: in-memory SQLite, or with `MENAGERIE_STORAGE_BACKEND=dqlite` a
    /// fresh database of the test process's dqlite node (`TestCluster`). Tests pass it to the stores' `inMemory`
    /// constructors, so every suite built on them runs on both backends.
    public static let testBackend = DatabaseFactory { migrations in
        guard try StorageBackend.configured() == .dqlite else { return try Database.inMemory(migrations: migrations) }
        return try Database(cluster: try TestCluster.shared.client(), migrations: migrations)
    }
}

extension Database {
    /// A private database on the configured backend (`DatabaseFactory.testBackend`).
    public static func scratch(migrations: [Migration] = []) throws -> Database {
        try DatabaseFactory.testBackend.open(migrations: migrations)
    }

    /// For tests that run on both backends with a file of their own: the SQLite file at `path`, or with
    /// `MENAGERIE_STORAGE_BACKEND=dqlite` a database of the test process's dqlite node named after `path`, so that
    /// two opens of one path share one database as two connections to one file do (replicas sharing a file).
    public static func scratch(path: String, migrations: [Migration] = []) throws -> Database {
        guard try StorageBackend.configured() == .dqlite else {
            return try Database(path: path, migrations: migrations)
        }
        var hash: UInt64 = 14_695_981_039_346_656_037  // FNV-1a: a stable name for the path
        for byte in path.utf8 { hash = (hash ^ UInt64(byte)) &* 1_099_511_628_211 }
        return try Database(cluster: try TestCluster.shared.client(database: "scratch-\(hash)"), migrations: migrations)
    }
}
