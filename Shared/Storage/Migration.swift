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
    static func run(_ migrations: [Migration], on handle: any StorageHandle) throws {
        try run(migrations, on: handle, track: .userVersion)
    }

    /// Where a list of migrations records how far it got.
    enum Track {
        /// `PRAGMA user_version`: the database's own schema (the list given to `Database`).
        case userVersion
        /// A row of `storage_migration_tracks`: a schema that shared code keeps in the service's database
        /// beside the service's own (the jobs tables), versioned independently of it.
        case named(String)
    }

    /// Applies `migrations` newer than `track`'s version, each once, as `run(_:on:)` does.
    static func run(_ migrations: [Migration], on handle: any StorageHandle, track: Track) throws {
        try validate(migrations)
        let latest = migrations.last?.version ?? 0
        func version(_ connection: Connection) throws -> Int32 {
            let version: Int32
            switch track {
            case .userVersion:
                version = try connection.queryOne("PRAGMA user_version")?.value(at: 0, as: Int32.self) ?? 0
            case .named(let name):
                let exists =
                    try connection.queryOne(
                        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'storage_migration_tracks'") != nil
                version =
                    exists
                    ? try connection.queryOne(
                        "SELECT version FROM storage_migration_tracks WHERE track = ?", [name])?.value(
                            at: 0, as: Int32.self) ?? 0
                    : 0
            }
            guard version <= latest else {
                throw StorageError(
                    .migration,
                    message: "the database's schema version \(version)\(track.label) is newer than this program knows "
                        + "(\(latest)); refusing to use it")
            }
            return version
        }
        func record(_ version: Int32, _ connection: Connection) throws {
            switch track {
            case .userVersion:
                try connection.execute("PRAGMA user_version = \(version)")
            case .named(let name):
                try connection.execute(
                    "CREATE TABLE IF NOT EXISTS storage_migration_tracks (track TEXT PRIMARY KEY, version INTEGER NOT NULL)"
                )
                try connection.execute(
                    "INSERT INTO storage_migration_tracks (track, version) VALUES (?, ?) "
                        + "ON CONFLICT (track) DO UPDATE SET version = excluded.version", [name, version])
            }
        }
        let current = try handle.inTransaction(begin: "BEGIN DEFERRED", version)
        for migration in migrations where migration.version > current {
            try handle.inTransaction(begin: "BEGIN IMMEDIATE") { connection in
                guard try version(connection) < migration.version else { return }  // another process did it
                do {
                    try migration.apply(connection)
                    try record(migration.version, connection)
                } catch {
                    let cause = error as? StorageError
                    throw StorageError(
                        .migration, code: cause?.code ?? 0,
                        message: "migration \(migration.version) \"\(migration.name)\"\(track.label) failed: "
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

extension Migration.Track {
    /// How errors name the track: nothing for the database's own.
    fileprivate var label: String {
        switch self {
        case .userVersion: ""
        case .named(let name): " of \(name)"
        }
    }
}
