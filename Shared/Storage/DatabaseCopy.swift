import Base
import Dqlite
import Foundation

/// Where a service's database lives: its SQLite file, or a dqlite cluster's database (named after the service).
public enum DatabaseLocation: Sendable, CustomStringConvertible {
    case file(String)
    case cluster(DqliteClient)

    public var description: String {
        switch self {
        case .file(let path): path
        case .cluster(let client):
            "the cluster's database \(client.database) (\(client.addresses.joined(separator: ",")))"
        }
    }
}

/// Why a copy was refused or failed, with the category an operator's command exits with: bad input is
/// INVALID_ARGUMENT, a destination that is not ready for it FAILED_PRECONDITION, a copy that does not match its
/// source DATA_LOSS.
public struct DatabaseCopyError: Error, Sendable, CategorizedError, CustomStringConvertible {
    public let category: ErrorCategory
    public let message: String

    public init(_ category: ErrorCategory, _ message: String) {
        self.category = category
        self.message = message
    }

    public var description: String { message }
}

/// Copies a Menagerie database, schema and rows, between the storage backends: a single machine's SQLite file into
/// a cluster (import), a cluster into a file (backup), a file back into a cluster (restore).
///
/// The source is read in one transaction, so the copy is one consistent snapshot even while the services write.
/// The destination is written table by table, each in its own transaction (a cluster replicates each commit
/// whole, and one transaction of a large database would hold the leader's memory and the followers' logs at
/// once), and each table's count is checked against the source's afterwards. The migrations' versions
/// (`PRAGMA user_version` and the shared code's tracks) are copied last, so the services do not run migrations
/// again on the copy, and a copy cut short is never taken for a finished one.
///
/// A destination that holds rows is refused unless `replacing`. One whose services already made the schema (a
/// running cluster) must have the source's schema versions: its rows are replaced, its schema is kept.
public enum DatabaseCopy {
    /// One table as copied: its name and rows.
    public struct TableCount: Sendable, Hashable {
        public let table: String
        public let rows: Int
    }

    /// What a copy did.
    public struct Report: Sendable {
        /// The source's `PRAGMA user_version`, now the destination's.
        public let schemaVersion: Int32
        public let tables: [TableCount]
        public var rows: Int { tables.reduce(0) { $0 + $1.rows } }
    }

    /// Copies `source` into `destination`; `progress` hears of each table once its rows are committed.
    ///
    /// A file destination is written beside its final path and renamed into place when complete; an existing
    /// file is replaced only when `replacing`.
    @discardableResult
    public static func copy(
        from source: DatabaseLocation, to destination: DatabaseLocation, replacing: Bool = false,
        progress: (TableCount) -> Void = { _ in }
    ) throws -> Report {
        let reader = try open(source, forWriting: false)
        return try reader.inTransaction(begin: "BEGIN DEFERRED") { sourceConnection in
            let snapshot = try Snapshot.read(sourceConnection, location: source)
            guard snapshot.schemaVersion > 0 else {
                throw DatabaseCopyError(
                    .failedPrecondition,
                    "\(source) is not a Menagerie database: its schema version is 0 (no service's migrations ran on it)"
                )
            }
            switch destination {
            case .file(let path):
                return try copyToFile(
                    snapshot, from: sourceConnection, path: path, replacing: replacing, progress: progress)
            case .cluster:
                let writer = try open(destination, forWriting: true)
                return try copy(
                    snapshot, from: sourceConnection, to: writer, location: destination, replacing: replacing,
                    progress: progress)
            }
        }
    }

    // MARK: Opening

    /// A handle on `location`. A file must exist and be an SQLite database (the source); a cluster must answer.
    private static func open(_ location: DatabaseLocation, forWriting: Bool) throws -> any StorageHandle {
        switch location {
        case .file(let path):
            try checkIsSQLiteFile(path)
            // Read-write where allowed, though nothing is written: a read-only connection cannot open a WAL file
            // whose -shm is gone (a service stopped cleanly) in a directory it may not write.
            let mode = forWriting ? "rwc" : FileManager.default.isWritableFile(atPath: path) ? "rw" : "ro"
            return try SQLiteHandle(
                location: "file:\(uriEscaped(path))?mode=\(mode)", uri: true, busyTimeout: .seconds(5))
        case .cluster(let client):
            let handle = try DqliteHandle(client: client, busyTimeout: .seconds(5), readOnly: !forWriting)
            // Rows arrive table by table, so a child table may come before its parent: foreign keys are checked
            // once, at the end (`PRAGMA foreign_key_check`).
            if forWriting { try handle.executeScript("PRAGMA foreign_keys = OFF") }
            return handle
        }
    }

    /// Refuses a path that is missing, not a regular file, or does not start with SQLite's header, so an
    /// operator's typo gets a sentence rather than SQLite's "file is not a database" from deep inside a copy.
    static func checkIsSQLiteFile(_ path: String) throws {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
            throw DatabaseCopyError(.notFound, "no such file: \(path)")
        }
        guard !isDirectory.boolValue else {
            throw DatabaseCopyError(.invalidArgument, "\(path) is a directory, not a database file")
        }
        guard let handle = FileHandle(forReadingAtPath: path) else {
            throw DatabaseCopyError(.permissionDenied, "cannot read \(path)")
        }
        defer { try? handle.close() }
        let header = (try? handle.read(upToCount: 16)) ?? Data()
        guard header == Data("SQLite format 3\0".utf8) else {
            throw DatabaseCopyError(
                .invalidArgument, "\(path) is not an SQLite database (it does not start with SQLite's header)")
        }
    }

    private static func uriEscaped(_ path: String) -> String {
        var escaped = ""
        for character in path.unicodeScalars {
            switch character {
            case "%", "?", "#": escaped += String(format: "%%%02X", character.value)
            default: escaped.unicodeScalars.append(character)
            }
        }
        return escaped
    }

    // MARK: The source

    /// The source's schema and row counts, read inside the copy's read transaction.
    struct Snapshot {
        /// `CREATE` statements by kind, in the order SQLite recorded them.
        var tables: [(name: String, sql: String)] = []
        /// Indexes, triggers and views: made after the rows (an index built once is quicker than kept up per row).
        var otherObjects: [(type: String, name: String, sql: String)] = []
        var schemaVersion: Int32 = 0
        /// The shared code's migration tracks (`storage_migration_tracks`), by name.
        var tracks: [String: Int32] = [:]
        var counts: [String: Int] = [:]
        /// AUTOINCREMENT's high-water marks, which can lie above the largest id left in a table.
        var sequences: [(name: String, seq: Int64)] = []

        var tableNames: Set<String> { Set(tables.map(\.name)) }

        static func read(_ connection: Connection, location: DatabaseLocation) throws -> Snapshot {
            var snapshot = Snapshot()
            snapshot.schemaVersion = try connection.queryOne("PRAGMA user_version")?.value(at: 0, as: Int32.self) ?? 0
            let objects = try connection.query(
                "SELECT type, name, sql FROM sqlite_master WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY rowid"
            )
            for object in objects {
                let type = object.string(0) ?? "", name = object.string(1) ?? "", sql = object.string(2) ?? ""
                if type == "table" {
                    guard !sql.uppercased().hasPrefix("CREATE VIRTUAL") else {
                        throw DatabaseCopyError(
                            .failedPrecondition,
                            "\(location) has a virtual table (\(name)), which the copy cannot carry")
                    }
                    snapshot.tables.append((name, sql))
                } else {
                    snapshot.otherObjects.append((type, name, sql))
                }
            }
            for table in snapshot.tables {
                let hidden = try connection.query(
                    "SELECT name FROM pragma_table_xinfo(?) WHERE hidden != 0", [table.name])
                guard hidden.isEmpty else {
                    throw DatabaseCopyError(
                        .failedPrecondition,
                        "\(location)'s table \(table.name) has generated columns, which the copy cannot carry")
                }
                snapshot.counts[table.name] =
                    try connection.queryOne("SELECT count(*) FROM \(quoted(table.name))")?.int(0) ?? 0
            }
            if snapshot.tableNames.contains("storage_migration_tracks") {
                for row in try connection.query("SELECT track, version FROM storage_migration_tracks") {
                    snapshot.tracks[row.string(0) ?? ""] = Int32(row.int64(1) ?? 0)
                }
            }
            if try connection.queryOne("SELECT 1 FROM sqlite_master WHERE name = 'sqlite_sequence'") != nil {
                snapshot.sequences = try connection.query("SELECT name, seq FROM sqlite_sequence").map {
                    ($0.string(0) ?? "", $0.int64(1) ?? 0)
                }
            }
            return snapshot
        }

        /// The schema versions as one sentence: `user_version` and each track.
        var versionDescription: String {
            (["\(schemaVersion)"] + tracks.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }).joined(
                separator: ", ")
        }

        /// Tables holding rows, besides the migrations' bookkeeping.
        var tablesWithRows: [String] {
            tables.map(\.name).filter { $0 != "storage_migration_tracks" && counts[$0, default: 0] > 0 }
        }
    }

    // MARK: The destination

    private static func copyToFile(
        _ snapshot: Snapshot, from source: Connection, path: String, replacing: Bool, progress: (TableCount) -> Void
    ) throws -> Report {
        let url = URL(fileURLWithPath: path)
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) {
            guard !isDirectory.boolValue else { throw DatabaseCopyError(.invalidArgument, "\(path) is a directory") }
            guard replacing else {
                throw DatabaseCopyError(
                    .alreadyExists, "\(path) exists: choose another file, or overwrite it with --replace")
            }
        }
        let directory = url.deletingLastPathComponent()
        guard FileManager.default.isWritableFile(atPath: directory.path) else {
            throw DatabaseCopyError(.permissionDenied, "cannot write in \(directory.path)")
        }
        let partial = directory.appendingPathComponent(".\(url.lastPathComponent).partial-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: partial) }
        let report: Report
        do {
            let writer = try SQLiteHandle(location: partial.path, uri: false, busyTimeout: .seconds(5))
            try writer.executeScript("PRAGMA foreign_keys = OFF")
            report = try copy(
                snapshot, from: source, to: writer, location: .file(path), replacing: false, progress: progress)
        }
        guard rename(partial.path, path) == 0 else {
            throw DatabaseCopyError(
                .permissionDenied, "cannot move the copy into place at \(path): \(String(cString: strerror(errno)))")
        }
        return report
    }

    private static func copy(
        _ snapshot: Snapshot, from source: Connection, to writer: any StorageHandle, location: DatabaseLocation,
        replacing: Bool,
        progress: (TableCount) -> Void
    ) throws -> Report {
        let existing = try writer.inTransaction(begin: "BEGIN DEFERRED") { try Snapshot.read($0, location: location) }
        let keepsSchema = !existing.tables.isEmpty
        if !existing.tablesWithRows.isEmpty && !replacing {
            let rows = existing.tablesWithRows.reduce(0) { $0 + existing.counts[$1, default: 0] }
            throw DatabaseCopyError(
                .failedPrecondition,
                "\(location) holds data (\(rows) rows in \(existing.tablesWithRows.joined(separator: ", "))): "
                    + "refusing to overwrite it (--replace does)")
        }
        if keepsSchema {
            // The services on the destination made its schema and run against it: only the same versions fit.
            guard existing.schemaVersion == snapshot.schemaVersion && existing.tracks == snapshot.tracks else {
                let advice =
                    existing.schemaVersion > snapshot.schemaVersion
                    ? "run the current service once on the source file (it migrates it), then copy again"
                    : "upgrade the destination's service first"
                throw DatabaseCopyError(
                    .failedPrecondition,
                    "the schema versions differ: the source's are \(snapshot.versionDescription), \(location)'s "
                        + "\(existing.versionDescription); \(advice)")
            }
            guard existing.tableNames == snapshot.tableNames else {
                throw DatabaseCopyError(
                    .failedPrecondition,
                    "the source's tables (\(snapshot.tableNames.sorted().joined(separator: ", "))) are not \(location)'s "
                        + "(\(existing.tableNames.sorted().joined(separator: ", "))): a database of another service?")
            }
        }
        // Triggers would fire on the copied rows and add rows of their own: they are made again at the end.
        let triggers = existing.otherObjects.filter { $0.type == "trigger" }
        try writer.inTransaction(begin: "BEGIN IMMEDIATE") { connection in
            if keepsSchema {
                for trigger in triggers { try connection.execute("DROP TRIGGER \(quoted(trigger.name))") }
            } else {
                for table in snapshot.tables { try connection.execute(table.sql) }
            }
        }
        var copied: [TableCount] = []
        for table in snapshot.tables where table.name != "storage_migration_tracks" {
            let rows = try copyRows(of: table.name, from: source, to: writer, clearingFirst: keepsSchema)
            let expected = snapshot.counts[table.name, default: 0]
            guard rows == expected else {
                throw DatabaseCopyError(
                    .dataLoss, "table \(table.name): \(rows) rows arrived in \(location) of \(expected) read")
            }
            copied.append(TableCount(table: table.name, rows: rows))
            progress(copied.last!)
        }
        // Last, in one transaction: what makes the copy complete in the services' eyes.
        try writer.inTransaction(begin: "BEGIN IMMEDIATE") { connection in
            for object in snapshot.otherObjects where !keepsSchema || object.type == "trigger" {
                try connection.execute(object.sql)
            }
            if try connection.queryOne("SELECT 1 FROM sqlite_master WHERE name = 'sqlite_sequence'") != nil {
                try connection.execute("DELETE FROM sqlite_sequence")
                for sequence in snapshot.sequences {
                    try connection.execute(
                        "INSERT INTO sqlite_sequence (name, seq) VALUES (?, ?)", [sequence.name, sequence.seq])
                }
            }
            if snapshot.tableNames.contains("storage_migration_tracks") {
                try connection.execute("DELETE FROM storage_migration_tracks")
                for (track, version) in snapshot.tracks {
                    try connection.execute(
                        "INSERT INTO storage_migration_tracks (track, version) VALUES (?, ?)", [track, version])
                }
            }
            try connection.execute("PRAGMA user_version = \(snapshot.schemaVersion)")
        }
        let violations = try writer.inTransaction(begin: "BEGIN DEFERRED") { try $0.query("PRAGMA foreign_key_check") }
        guard violations.isEmpty else {
            let tables = Set(violations.compactMap { $0.string(0) }).sorted()
            throw DatabaseCopyError(
                .dataLoss,
                "\(location) has \(violations.count) rows whose foreign keys point nowhere (in \(tables.joined(separator: ", ")))"
            )
        }
        return Report(schemaVersion: snapshot.schemaVersion, tables: copied)
    }

    /// Copies one table's rows in one transaction on `writer` and returns the count it then holds. Rows go in
    /// several to a statement: on a cluster every statement is a round trip to the leader, and dqlite takes at
    /// most 255 parameters.
    private static func copyRows(
        of table: String, from source: Connection, to writer: any StorageHandle, clearingFirst: Bool
    ) throws -> Int {
        let rows = try source.query("SELECT * FROM \(quoted(table))")
        return try writer.inTransaction(begin: "BEGIN IMMEDIATE") { connection in
            if clearingFirst { try connection.execute("DELETE FROM \(quoted(table))") }
            if let columns = rows.first?.values.count, columns > 0 {
                let perStatement = max(1, 255 / columns)
                let tuple = "(" + Array(repeating: "?", count: columns).joined(separator: ", ") + ")"
                var start = 0
                while start < rows.count {
                    let batch = rows[start..<min(start + perStatement, rows.count)]
                    let sql =
                        "INSERT INTO \(quoted(table)) VALUES "
                        + Array(repeating: tuple, count: batch.count).joined(separator: ", ")
                    try connection.execute(sql, batch.flatMap { $0.values.map { $0 as (any SQLConvertible)? } })
                    start += batch.count
                }
            }
            return try connection.queryOne("SELECT count(*) FROM \(quoted(table))")?.int(0) ?? 0
        }
    }

    /// An SQL identifier in double quotes, its own quotes doubled.
    static func quoted(_ name: String) -> String { "\"" + name.replacingOccurrences(of: "\"", with: "\"\"") + "\"" }
}
