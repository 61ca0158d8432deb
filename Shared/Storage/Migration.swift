/// One schema step. The database's `PRAGMA user_version` records the last version applied.
public struct Migration: Sendable {
    /// Positive, and strictly increasing along the list given to `Database`.
    public let version: Int32
    public let name: String
    let apply: @Sendable (Connection) throws -> Void

    /// A step that `apply` performs inside its own IMMEDIATE transaction (don't BEGIN/COMMIT in it).
    public init(_ version: Int32, _ name: String, _ apply: @escaping @Sendable (Connection) throws -> Void) {
        self.version = version
        self.name = name
        self.apply = apply
    }
}

extension Migration {
    /// Applies the `migrations` newer than the database's `user_version`, each once, in its own IMMEDIATE
    /// transaction. The version is re-read inside each transaction, so concurrent processes never apply a
    /// migration twice. A database newer than the last migration is left untouched.
    static func run(_ migrations: [Migration], on handle: SQLiteHandle) throws {
        try validate(migrations)
        let latest = migrations.last?.version ?? 0
        func userVersion(_ connection: Connection) throws -> Int32 {
            let version = try connection.queryOne("PRAGMA user_version")?.value(at: 0, as: Int32.self) ?? 0
            guard version <= latest else {
                throw StorageError(
                    .migration,
                    message: "the database's schema version \(version) is newer than this program knows (\(latest)); "
                        + "refusing to use it")
            }
            return version
        }
        let current = try handle.inTransaction(begin: "BEGIN DEFERRED", userVersion)
        for migration in migrations where migration.version > current {
            try handle.inTransaction(begin: "BEGIN IMMEDIATE") { connection in
                guard try userVersion(connection) < migration.version else { return }  // another process did it
                do {
                    try migration.apply(connection)
                    try connection.execute("PRAGMA user_version = \(migration.version)")
                } catch {
                    let cause = error as? StorageError
                    throw StorageError(
                        .migration, code: cause?.code ?? 0,
                        message: "migration \(migration.version) \"\(migration.name)\" failed: "
                            + (cause.map { "\($0.kind): \($0.message)" } ?? "\(error)"),
                        sql: cause?.sql)
                }
            }
        }
    }

    private static func validate(_ migrations: [Migration]) throws {
        var previous: Int32 = 0
        for migration in migrations {
            guard migration.version > previous else {
                throw StorageError(
                    .misuse,
                    message: "migration versions must be positive and strictly increasing; "
                        + "\(migration.version) \"\(migration.name)\" follows \(previous)")
            }
            previous = migration.version
        }
    }
}
