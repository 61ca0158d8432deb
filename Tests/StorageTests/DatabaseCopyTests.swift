import Base
import Dqlite
import Foundation
import Storage
import Testing

/// `DatabaseCopy` between a file and a real three-node dqlite cluster in this process: import, backup and restore
/// carry every table, value and schema object, keep the migrations' versions (nothing migrates twice), and refuse
/// what would lose data or is not a Menagerie database.
@Suite(.serialized) struct DatabaseCopyTests {
    /// A schema with what a service's can have: foreign keys, AUTOINCREMENT, WITHOUT ROWID, an index, a trigger, a
    /// view, and a shared track's migrations beside it. `runs` counts how often the first migration ran.
    static func schema(_ runs: Counter) -> [Migration] {
        [
            Migration(1, "owners and items") { connection in
                runs.increment()
                try connection.executeScript(
                    """
                    CREATE TABLE owners (id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL UNIQUE);
                    CREATE TABLE items (
                        owner_id INTEGER NOT NULL REFERENCES owners (id) ON DELETE CASCADE, uuid BLOB NOT NULL,
                        value REAL, label TEXT, count INTEGER, PRIMARY KEY (owner_id, uuid)) WITHOUT ROWID;
                    CREATE INDEX items_by_label ON items (label);
                    CREATE TABLE audit (id INTEGER PRIMARY KEY, what TEXT NOT NULL);
                    CREATE TRIGGER owners_audit AFTER INSERT ON owners BEGIN INSERT INTO audit (what) VALUES ('owner ' || new.name); END;
                    CREATE VIEW item_labels AS SELECT label FROM items;
                    """)
            },
            Migration(2, "a column more") { try $0.execute("ALTER TABLE owners ADD COLUMN note TEXT") },
        ]
    }

    static let track = [
        Migration(1, "jobs") { try $0.execute("CREATE TABLE jobs (id INTEGER PRIMARY KEY, state TEXT)") }
    ]

    /// A file database with 3 owners (the highest deleted, so AUTOINCREMENT's mark lies above the ids left) and
    /// 700 items of every storage class: more rows than one statement carries.
    static func makeSource(at path: String, runs: Counter) throws {
        let database = try Database(path: path, migrations: schema(runs))
        try database.migrate(track, track: "jobs")
        try database.write { connection in
            for name in ["jana", "petr", "gone"] {
                try connection.execute("INSERT INTO owners (name) VALUES (?)", [name])
            }
            try connection.execute("DELETE FROM owners WHERE name = 'gone'")
            for index in 0..<700 {
                let value: SQLValue = index % 7 == 0 ? .null : .real(Double(index) / 3)
                try connection.execute(
                    "INSERT INTO items (owner_id, uuid, value, label, count) VALUES (?, ?, ?, ?, ?)",
                    [
                        index % 2 + 1, [UInt8(index & 0xff), UInt8(index >> 8), 0, 255], value, "žluť \(index % 10)",
                        Int64(index) << 33,
                    ])
            }
            try connection.execute("INSERT INTO jobs (state) VALUES ('done')")
        }
    }

    /// Every table's rows in order, the schema objects and versions: equal dumps are equal databases.
    static func dump(_ database: Database) throws -> [String] {
        try database.read { connection in
            var lines = try connection.query("SELECT type, name, sql FROM sqlite_master ORDER BY name").map {
                "\($0.values)"
            }
            lines.append("user_version \(try connection.queryOne("PRAGMA user_version")?.int(0) ?? -1)")
            lines += try connection.query("SELECT * FROM storage_migration_tracks ORDER BY track").map {
                "track \($0.values)"
            }
            lines += try connection.query("SELECT * FROM sqlite_sequence ORDER BY name").map { "sequence \($0.values)" }
            for table in ["owners", "items", "audit", "jobs"] {
                lines += try connection.query("SELECT * FROM \(table) ORDER BY 1, 2").map { "\(table) \($0.values)" }
            }
            return lines
        }
    }

    @Test func importBackupAndRestoreCarryEverythingAndMigrationsDoNotRunAgain() async throws {
        let cluster = try ClusterDatabaseTests.Cluster()
        try await withTemporaryDatabasePath { path in
            let runs = Counter()
            try Self.makeSource(at: path, runs: runs)
            let original = try Self.dump(try Database(path: path, migrations: Self.schema(runs)))
            #expect(original.contains { $0.hasPrefix("audit") } && original.count > 700)

            var reported: [DatabaseCopy.TableCount] = []
            let imported = try DatabaseCopy.copy(from: .file(path), to: .cluster(try cluster.client())) {
                reported.append($0)
            }
            #expect(imported.schemaVersion == 2 && imported.rows == 2 + 700 + 3 + 1)
            #expect(reported.map(\.table) == ["owners", "items", "audit", "jobs"])
            let onCluster = try Database(cluster: try cluster.client(), migrations: Self.schema(runs))
            try onCluster.migrate(Self.track, track: "jobs")
            #expect(runs.count == 1)  // the file's first run only
            #expect(try Self.dump(onCluster) == original)
            // The index and the trigger work on the copy, and AUTOINCREMENT goes on above the deleted owner.
            try onCluster.write { try $0.execute("INSERT INTO owners (name) VALUES ('nova')") }
            #expect(try onCluster.read { try $0.queryOne("SELECT id FROM owners WHERE name = 'nova'")?.int(0) } == 4)
            #expect(try onCluster.read { try $0.query("SELECT what FROM audit").count } == 4)

            let backup = path + ".backup"
            let backedUp = try DatabaseCopy.copy(from: .cluster(try cluster.client()), to: .file(backup))
            #expect(backedUp.rows == imported.rows + 2)
            let backupDump = try Self.dump(try Database(path: backup, migrations: Self.schema(runs)))
            #expect(try backupDump == Self.dump(onCluster))
            #expect(runs.count == 1)

            // Restore the file as it was before 'nova': the cluster's rows are replaced, its schema kept.
            #expect(throws: DatabaseCopyError.self) {
                try DatabaseCopy.copy(from: .file(path), to: .cluster(try cluster.client()))
            }
            try DatabaseCopy.copy(from: .file(path), to: .cluster(try cluster.client()), replacing: true)
            #expect(try Self.dump(onCluster) == original)
            #expect(runs.count == 1)
        }
    }

    @Test func refusesToOverwriteDataUnlessReplacingAndLeavesNoPartialFile() async throws {
        let cluster = try ClusterDatabaseTests.Cluster()
        try await withTemporaryDatabasePath { path in
            try Self.makeSource(at: path, runs: Counter())
            try DatabaseCopy.copy(from: .file(path), to: .cluster(try cluster.client()))
            #expect { try DatabaseCopy.copy(from: .file(path), to: .cluster(try cluster.client())) } throws: { error in
                let error = error as? DatabaseCopyError
                return error?.category == .failedPrecondition && error?.message.contains("holds data") == true
            }
            // A backup never overwrites a file by accident, and a refused or failed one leaves nothing behind.
            let directory = URL(fileURLWithPath: path).deletingLastPathComponent().path
            let before = try FileManager.default.contentsOfDirectory(atPath: directory).sorted()
            #expect { try DatabaseCopy.copy(from: .cluster(try cluster.client()), to: .file(path)) } throws: { error in
                (error as? DatabaseCopyError)?.category == .alreadyExists
            }
            #expect(try FileManager.default.contentsOfDirectory(atPath: directory).sorted() == before)
            try DatabaseCopy.copy(from: .cluster(try cluster.client()), to: .file(path), replacing: true)
            #expect(try Self.dump(try Database(path: path, migrations: Self.schema(Counter()))).count > 700)
        }
    }

    @Test func refusesWhatIsNotAMenagerieDatabaseOrNotThisSchema() async throws {
        let cluster = try ClusterDatabaseTests.Cluster()
        try await withTemporaryDatabasePath { path in
            let client = try cluster.client()
            func category(_ source: DatabaseLocation) -> ErrorCategory? {
                do {
                    try DatabaseCopy.copy(from: source, to: .cluster(client))
                    return nil
                } catch {
                    return (error as? DatabaseCopyError)?.category
                }
            }
            #expect(category(.file(path)) == .notFound)
            try Data("name,value\nlion,1\n".utf8).write(to: URL(fileURLWithPath: path))
            #expect(category(.file(path)) == .invalidArgument)
            try FileManager.default.removeItem(atPath: path)
            _ = try Database(path: path, migrations: [])  // an SQLite file no migration ran on
            #expect(category(.file(path)) == .failedPrecondition)
            try FileManager.default.removeItem(atPath: path)

            // The cluster's services run a newer schema than the file's: importing would break them.
            _ = try Database(
                cluster: client,
                migrations: Self.schema(Counter()) + [Migration(3, "more") { try $0.execute("CREATE TABLE more (x)") }])
            try Self.makeSource(at: path, runs: Counter())
            #expect { try DatabaseCopy.copy(from: .file(path), to: .cluster(client), replacing: true) } throws: {
                error in
                let error = error as? DatabaseCopyError
                return error?.category == .failedPrecondition
                    && error?.message.contains("schema versions differ") == true
            }
        }
    }

    @Test func aClusterWithNoLeaderIsUnavailable() async throws {
        try await withTemporaryDatabasePath { path in
            try Self.makeSource(at: path, runs: Counter())
            let client = try DqliteClient(
                addresses: ["127.0.0.1:1"], database: "test", callTimeout: .milliseconds(200),
                leaderWait: .milliseconds(300))
            #expect { try DatabaseCopy.copy(from: .file(path), to: .cluster(client)) } throws: { error in
                (error as? StorageError)?.category == .unavailable
            }
        }
    }
}
