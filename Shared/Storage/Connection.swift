/// A database connection lent to one `Database.read` or `Database.write` closure (or a migration).
///
/// Valid only inside that closure: using it after the closure returned throws `.misuse`.
/// Arguments bind by position (`?`), e.g. `try db.execute("INSERT INTO t(a, b) VALUES (?, ?)", [name, nil])`.
public final class Connection {
    private let handle: any StorageHandle
    private var isOpen = true

    init(_ handle: any StorageHandle) { self.handle = handle }

    /// Ends the lease: the closure that received this connection has returned.
    func close() { isOpen = false }

    /// Runs one statement for its effect (result rows, if any, are discarded).
    public func execute(_ sql: String, _ arguments: [(any SQLConvertible)?] = []) throws {
        try liveHandle().statement(sql).run(arguments, rows: .none)
    }

    /// Runs several `;`-separated statements without arguments (schema scripts in migrations).
    public func executeScript(_ sql: String) throws {
        try liveHandle().executeScript(sql)
    }

    /// Runs one statement and returns all its rows.
    public func query(_ sql: String, _ arguments: [(any SQLConvertible)?] = []) throws -> [Row] {
        try liveHandle().statement(sql).run(arguments, rows: .all)
    }

    /// Runs one statement and returns its first row, if any.
    public func queryOne(_ sql: String, _ arguments: [(any SQLConvertible)?] = []) throws -> Row? {
        try liveHandle().statement(sql).run(arguments, rows: .one).first
    }

    /// The compiled statement for `sql`, from this connection's cache; reuse it in loops.
    public func prepare(_ sql: String) throws -> Statement {
        Statement(try liveHandle().statement(sql), connection: self)
    }

    /// The rowid of the most recent successful INSERT on this connection.
    public var lastInsertRowID: Int64 { checkedHandle().lastInsertRowID }

    /// Rows changed by the most recent INSERT, UPDATE or DELETE on this connection.
    public var changes: Int { checkedHandle().changes }

    /// Throws `.misuse` once the closure that received this connection has returned.
    func ensureOpen() throws {
        guard isOpen else {
            throw StorageError(.misuse, message: "a Connection was used after its read/write closure returned")
        }
    }

    private func liveHandle() throws -> any StorageHandle {
        try ensureOpen()
        return handle
    }

    private func checkedHandle() -> any StorageHandle {
        precondition(isOpen, "a Connection was used after its read/write closure returned")
        return handle
    }
}

/// A compiled statement from a connection's cache, valid while that connection is.
public final class Statement {
    private let prepared: any StorageStatement
    private let connection: Connection

    init(_ prepared: any StorageStatement, connection: Connection) {
        self.prepared = prepared
        self.connection = connection
    }

    /// The SQL this statement was compiled from.
    public var sql: String { prepared.sql }

    /// Runs the statement for its effect with `arguments` bound by position.
    public func execute(_ arguments: [(any SQLConvertible)?] = []) throws {
        try connection.ensureOpen()
        try prepared.run(arguments, rows: .none)
    }

    /// Runs the statement with `arguments` bound by position and returns all its rows.
    public func query(_ arguments: [(any SQLConvertible)?] = []) throws -> [Row] {
        try connection.ensureOpen()
        return try prepared.run(arguments, rows: .all)
    }

    /// Runs the statement with `arguments` bound by position and returns its first row, if any.
    public func queryOne(_ arguments: [(any SQLConvertible)?] = []) throws -> Row? {
        try connection.ensureOpen()
        return try prepared.run(arguments, rows: .one).first
    }
}
