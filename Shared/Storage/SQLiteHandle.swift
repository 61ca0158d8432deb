import CSQLite

/// Tells SQLite to copy bound text and blobs before the bind call returns.
private let transientDestructor = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

/// One open `sqlite3*` and its statement cache.
///
/// Not thread-safe on its own: a `ConnectionPool` (or a mutex) hands it to one thread at a time,
/// which is what makes the `Sendable` conformance sound.
final class SQLiteHandle: StorageHandle, @unchecked Sendable {
    private let db: OpaquePointer
    private var cache: [String: PreparedStatement] = [:]
    /// Past this many distinct SQL strings the cache starts over, so generated SQL cannot grow it forever.
    private static let cacheCapacity = 128

    /// Opens `location` (a path, or a URI when `uri` is set) read-write, creating it when missing.
    init(location: String, uri: Bool, busyTimeout: Duration) throws {
        var handle: OpaquePointer?
        var flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE
        if uri { flags |= SQLITE_OPEN_URI }
        let code = sqlite3_open_v2(location, &handle, flags, nil)
        guard let handle else {
            throw StorageError(.open, code: code, message: "cannot allocate a connection to \(location)")
        }
        guard code == SQLITE_OK else {
            let error = StorageError(
                sqliteCode: code, message: "\(String(cString: sqlite3_errmsg(handle))): \(location)", sql: nil,
                context: .open)
            sqlite3_close_v2(handle)
            throw error
        }
        db = handle
        sqlite3_extended_result_codes(db, 1)
        let milliseconds = busyTimeout / .milliseconds(1)
        sqlite3_busy_timeout(db, Int32(min(max(milliseconds.rounded(.up), 0), Double(Int32.max))))
    }

    deinit {
        cache.removeAll()  // finalizes the statements nobody else holds; close_v2 waits for the rest
        sqlite3_close_v2(db)
    }

    var isInTransaction: Bool { sqlite3_get_autocommit(db) == 0 }
    /// A handle stuck in a transaction (its ROLLBACK failed) is dropped; closing it rolls back.
    var isReusable: Bool { !isInTransaction }
    var lastInsertRowID: Int64 { sqlite3_last_insert_rowid(db) }
    var changes: Int { Int(sqlite3_changes64(db)) }

    /// The cached prepared statement for `sql` (exactly one statement), preparing it on first use.
    func statement(_ sql: String) throws -> any StorageStatement { try prepared(sql) }

    func prepared(_ sql: String) throws -> PreparedStatement {
        if let cached = cache[sql] { return cached }
        let statement = try PreparedStatement(db: db, sql: sql)
        if cache.count >= Self.cacheCapacity { cache.removeAll() }
        cache[sql] = statement
        return statement
    }

    /// Runs any number of `;`-separated statements without arguments.
    func executeScript(_ sql: String) throws {
        var errorMessage: UnsafeMutablePointer<CChar>?
        let code = sqlite3_exec(db, sql, nil, nil, &errorMessage)
        defer { sqlite3_free(errorMessage) }
        guard code == SQLITE_OK else {
            let message = errorMessage.map { String(cString: $0) } ?? String(cString: sqlite3_errstr(code))
            throw StorageError(sqliteCode: code, message: message, sql: sql, context: .step)
        }
    }

    func begin(_ sql: String) throws { try prepared(sql).run([], rows: .none) }

    func commit() throws { try prepared("COMMIT").run([], rows: .none) }

    func rollback() {
        if isInTransaction { _ = try? prepared("ROLLBACK").run([], rows: .none) }
    }
}

/// How many result rows a run collects.
enum RowLimit {
    /// Steps to completion and keeps none (for statements run for their effect).
    case none
    /// Stops after the first row.
    case one
    case all
}

/// One compiled statement; finalized when the last reference goes away.
final class PreparedStatement: StorageStatement {
    let sql: String
    private let statement: OpaquePointer

    init(db: OpaquePointer, sql: String) throws {
        var compiled: OpaquePointer?
        try sql.withCString { text in
            var tail: UnsafePointer<CChar>?
            let code = sqlite3_prepare_v3(db, text, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &compiled, &tail)
            guard code == SQLITE_OK else {
                throw StorageError(
                    sqliteCode: code, message: String(cString: sqlite3_errmsg(db)), sql: sql, context: .prepare)
            }
            guard let tail, tail.pointee != 0 else { return }
            // Trailing text is fine when it is only whitespace or comments.
            var next: OpaquePointer?
            let tailCode = sqlite3_prepare_v2(db, tail, -1, &next, nil)
            sqlite3_finalize(next)
            guard tailCode == SQLITE_OK, next == nil else {
                sqlite3_finalize(compiled)
                throw StorageError(.misuse, message: "expected one statement; use executeScript for several", sql: sql)
            }
        }
        guard let compiled else {
            throw StorageError(.misuse, message: "no statement in the SQL text", sql: sql)
        }
        self.sql = sql
        statement = compiled
    }

    deinit { sqlite3_finalize(statement) }

    /// Binds `arguments` by position, steps, and returns the rows `limit` asks for.
    @discardableResult
    func run(_ arguments: [(any SQLConvertible)?], rows limit: RowLimit) throws -> [Row] {
        try bind(arguments)
        defer {
            sqlite3_reset(statement)
            sqlite3_clear_bindings(statement)
        }
        var rows: [Row] = []
        var columnNames: [String] = []
        while true {
            let code = sqlite3_step(statement)
            switch code {
            case SQLITE_DONE:
                return rows
            case SQLITE_ROW:
                if limit == .none { continue }
                let count = sqlite3_column_count(statement)
                if rows.isEmpty {  // names are read after the first step: a schema change may re-prepare
                    columnNames = (0..<count).map { String(cString: sqlite3_column_name(statement, $0)) }
                }
                rows.append(Row(columnNames: columnNames, values: (0..<count).map(value(at:))))
                if limit == .one { return rows }
            default:
                throw failure(code)
            }
        }
    }

    private func bind(_ arguments: [(any SQLConvertible)?]) throws {
        let expected = Int(sqlite3_bind_parameter_count(statement))
        guard arguments.count == expected else {
            throw StorageError(
                .misuse, message: "the statement takes \(expected) arguments, \(arguments.count) given", sql: sql)
        }
        for (offset, argument) in arguments.enumerated() {
            let index = Int32(offset + 1)
            let code: Int32 =
                switch argument?.sqlValue ?? .null {
                case .null:
                    sqlite3_bind_null(statement, index)
                case .integer(let value):
                    sqlite3_bind_int64(statement, index, value)
                case .real(let value):
                    sqlite3_bind_double(statement, index, value)
                case .text(let value):
                    sqlite3_bind_text64(
                        statement, index, value, UInt64(value.utf8.count), transientDestructor, UInt8(SQLITE_UTF8))
                case .blob(let value) where value.isEmpty:
                    sqlite3_bind_zeroblob(statement, index, 0)  // a NULL pointer would bind NULL, not an empty blob
                case .blob(let value):
                    value.withUnsafeBytes {
                        sqlite3_bind_blob64(statement, index, $0.baseAddress, UInt64($0.count), transientDestructor)
                    }
                }
            guard code == SQLITE_OK else { throw failure(code) }
        }
    }

    private func value(at column: Int32) -> SQLValue {
        switch sqlite3_column_type(statement, column) {
        case SQLITE_INTEGER:
            return .integer(sqlite3_column_int64(statement, column))
        case SQLITE_FLOAT:
            return .real(sqlite3_column_double(statement, column))
        case SQLITE_TEXT:
            guard let text = sqlite3_column_text(statement, column) else { return .text("") }
            let count = Int(sqlite3_column_bytes(statement, column))
            return .text(String(decoding: UnsafeBufferPointer(start: text, count: count), as: UTF8.self))
        case SQLITE_BLOB:
            guard let bytes = sqlite3_column_blob(statement, column) else { return .blob([]) }
            let count = Int(sqlite3_column_bytes(statement, column))
            return .blob(Array(UnsafeRawBufferPointer(start: bytes, count: count)))
        default:
            return .null
        }
    }

    private func failure(_ code: Int32) -> StorageError {
        let message = String(cString: sqlite3_errmsg(sqlite3_db_handle(statement)))
        return StorageError(sqliteCode: code, message: message, sql: sql, context: .step)
    }
}
