import CSQLite
import Dqlite

#if canImport(Glibc)
    import Glibc
#endif

/// A session on a dqlite cluster's leader behind the `StorageHandle` API, with its statements prepared on the
/// leader and cached per SQL text, as `SQLiteHandle` caches its own.
///
/// When the leader goes away the session breaks: the transaction on it is gone (dqlite rolls it back), the
/// pool drops the handle and the next lease connects to the new leader.
final class DqliteHandle: StorageHandle, @unchecked Sendable {  // one thread at a time, as the pool lends it
    let session: DqliteSession
    private var cache: [String: DqliteStatement] = [:]
    private static let cacheCapacity = 128
    private let busyTimeout: Duration
    private(set) var isInTransaction = false
    var lastInsertRowID: Int64 = 0
    var changes = 0

    /// A session on the leader set up as `SQLiteHandle`s are: foreign keys on, and readers unable to write.
    init(client: DqliteClient, busyTimeout: Duration, readOnly: Bool) throws {
        session = try StorageError.translating { () throws(DqliteError) in try client.connect() }
        self.busyTimeout = busyTimeout
        try executeScript("PRAGMA foreign_keys = ON")
        if readOnly { try executeScript("PRAGMA query_only = ON") }
    }

    deinit { session.close() }

    var isReusable: Bool { !isInTransaction && !session.isBroken }

    func statement(_ sql: String) throws -> any StorageStatement {
        if let cached = cache[sql] { return cached }
        // dqlite prepares the first statement and drops the rest without a word; SQLite's own tokenizer finds it.
        guard Self.isOneStatement(sql) else {
            throw StorageError(.misuse, message: "expected one statement; use executeScript for several", sql: sql)
        }
        let prepared = try StorageError.translating(sql: sql, context: .prepare) { () throws(DqliteError) in
            try session.prepare(sql)
        }
        if cache.count >= Self.cacheCapacity {
            // Statements a caller still holds (`Connection.prepare`) stay, as `SQLiteHandle`'s do: finalized, their id
            // went to the next statement dqlite prepared, which they then ran.
            for key in Array(cache.keys) {
                var old = cache.removeValue(forKey: key)!
                if isKnownUniquelyReferenced(&old) { try? session.finalize(old.prepared) } else { cache[key] = old }
            }
        }
        let statement = DqliteStatement(prepared, sql: sql, handle: self)
        cache[sql] = statement
        return statement
    }

    /// Whether `sql` holds at most one statement followed only by whitespace and comments: the text after the
    /// first complete statement (as `sqlite3_complete` sees it) must compile to nothing on a scratch connection.
    static func isOneStatement(_ sql: String) -> Bool {
        let bytes = Array(sql.utf8)
        guard let firstSemicolon = bytes.firstIndex(of: UInt8(ascii: ";")) else { return true }
        for end in bytes[firstSemicolon...].indices where bytes[end] == UInt8(ascii: ";") {
            let head = String(decoding: bytes[...end], as: UTF8.self)
            guard sqlite3_complete(head) != 0 else { continue }  // a ';' inside a string, identifier or comment
            let rest = String(decoding: bytes[(end + 1)...], as: UTF8.self)
            var scratch: OpaquePointer?
            guard sqlite3_open_v2(":memory:", &scratch, SQLITE_OPEN_READWRITE, nil) == SQLITE_OK else {
                sqlite3_close_v2(scratch)
                return false
            }
            defer { sqlite3_close_v2(scratch) }
            var statement: OpaquePointer?
            let code = sqlite3_prepare_v2(scratch, rest, -1, &statement, nil)
            sqlite3_finalize(statement)
            return code == SQLITE_OK && statement == nil
        }
        return true
    }

    /// Notes a COMMIT, END or ROLLBACK run by the closure itself, so that `inTransaction` reports the misuse as
    /// it does on SQLite (where the connection tells).
    func noteTransactionControl(_ sql: String) {
        let word = sql.drop { $0.isWhitespace }.prefix { $0.isLetter }.uppercased()
        if word == "COMMIT" || word == "END" || word == "ROLLBACK" { isInTransaction = false }
    }

    func executeScript(_ sql: String) throws {
        let result = try StorageError.translating(sql: sql, context: .step) { () throws(DqliteError) in
            try session.execute(sql, mayCommit: !isInTransaction)
        }
        lastInsertRowID = result.lastInsertID
        changes = result.rowsAffected
    }

    /// Another replica's writer holding the leader's write lock answers BUSY at once: nothing was written, so
    /// BEGIN is tried again, with a growing pause, for up to the busy timeout (as SQLite's busy handler does).
    func begin(_ sql: String) throws {
        let giveUp = ContinuousClock.now + busyTimeout
        var pause = Duration.milliseconds(1)
        while true {
            do {
                try StorageError.translating(sql: sql, context: .step) { () throws(DqliteError) in
                    _ = try session.execute(sql, mayCommit: false)
                }
                isInTransaction = true
                return
            } catch let error as StorageError where error.kind == .busy && ContinuousClock.now + pause < giveUp {
                usleep(UInt32(pause / .microseconds(1)))
                pause = min(pause * 2, .milliseconds(50))
            }
        }
    }

    /// A COMMIT whose answer is lost may have committed: that is `.outcomeUnknown`, never retried here.
    func commit() throws {
        defer { isInTransaction = false }
        try StorageError.translating(sql: "COMMIT", context: .step) { () throws(DqliteError) in
            _ = try session.execute("COMMIT", mayCommit: true)
        }
    }

    func rollback() {
        guard isInTransaction else { return }
        isInTransaction = false
        if !session.isBroken { _ = try? session.execute("ROLLBACK", mayCommit: false) }
    }
}

/// A statement prepared on the leader. Run for its effect (`.none`) it is dqlite's EXEC, which reports the
/// rowid and the count of changed rows; asked for rows, it is QUERY.
final class DqliteStatement: StorageStatement {
    let prepared: DqliteSession.Prepared
    let sql: String
    private unowned let handle: DqliteHandle

    init(_ prepared: DqliteSession.Prepared, sql: String, handle: DqliteHandle) {
        self.prepared = prepared
        self.sql = sql
        self.handle = handle
    }

    @discardableResult
    func run(_ arguments: [(any SQLConvertible)?], rows limit: RowLimit) throws -> [Row] {
        guard arguments.count == prepared.parameterCount else {
            throw StorageError(
                .misuse, message: "the statement takes \(prepared.parameterCount) arguments, \(arguments.count) given",
                sql: sql)
        }
        let values = arguments.map { DqliteValue($0?.sqlValue ?? .null) }
        let session = handle.session
        let handle = handle
        let prepared = prepared
        switch limit {
        case .none:
            let result = try StorageError.translating(sql: sql, context: .step) { () throws(DqliteError) in
                try session.execute(prepared, values, mayCommit: !handle.isInTransaction)
            }
            handle.lastInsertRowID = result.lastInsertID
            handle.changes = result.rowsAffected
            handle.noteTransactionControl(sql)
            return []
        case .one, .all:
            let result = try StorageError.translating(sql: sql, context: .step) { () throws(DqliteError) in
                try session.query(prepared, values)
            }
            let rows = limit == .one ? Array(result.rows.prefix(1)) : result.rows
            return rows.map { Row(columnNames: result.columns, values: $0.map(SQLValue.init)) }
        }
    }
}

extension DqliteValue {
    init(_ value: SQLValue) {
        switch value {
        case .null: self = .null
        case .integer(let integer): self = .integer(integer)
        case .real(let real): self = .real(real)
        case .text(let text): self = .text(text)
        case .blob(let bytes): self = .blob(bytes)
        }
    }
}

extension SQLValue {
    init(_ value: DqliteValue) {
        switch value {
        case .null: self = .null
        case .integer(let integer): self = .integer(integer)
        case .real(let real): self = .real(real)
        case .text(let text): self = .text(text)
        case .blob(let bytes): self = .blob(bytes)
        }
    }
}

extension StorageError {
    /// Runs `body`, turning a `DqliteError` into the storage error a service already handles: SQLite's own
    /// errors keep their codes (a constraint is still `.constraint`), a lost leader is `.unavailable`, a commit
    /// without an answer `.outcomeUnknown`.
    static func translating<T>(sql: String? = nil, context: Kind = .step, _ body: () throws(DqliteError) -> T) throws
        -> T
    {
        do {
            return try body()
        } catch {
            switch error.kind {
            case .sqlite:
                throw StorageError(
                    sqliteCode: Int32(truncatingIfNeeded: error.code), message: error.message, sql: sql,
                    context: context)
            case .noLeader, .notCommitted:
                throw StorageError(
                    .unavailable, message: "the replicated database: \(error.message); nothing was written", sql: sql)
            case .outcomeUnknown:
                throw StorageError(
                    .outcomeUnknown,
                    message:
                        "the replicated database lost its leader before answering a commit; the write may or may not "
                        + "have happened: \(error.message)", sql: sql)
            case .misuse:
                throw StorageError(.misuse, message: error.message, sql: sql)
            case .protocolViolation, .node:
                throw StorageError(context, message: error.description, sql: sql)
            }
        }
    }
}
