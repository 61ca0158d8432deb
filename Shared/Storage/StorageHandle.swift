/// One connection of a storage backend, lent to one thread at a time by a `ConnectionPool`: an SQLite
/// connection to the file (`SQLiteHandle`), or a session on a dqlite cluster's leader (`DqliteHandle`).
/// `Connection`, `Statement`, the pools and the migrations see only this, so the services' code is the same
/// on both backends.
protocol StorageHandle: AnyObject, Sendable {
    /// The compiled statement for `sql` (exactly one statement), from the handle's cache.
    func statement(_ sql: String) throws -> any StorageStatement
    /// Runs several `;`-separated statements without arguments.
    func executeScript(_ sql: String) throws
    var lastInsertRowID: Int64 { get }
    var changes: Int { get }
    /// Whether a transaction is open on the handle (as far as the handle can tell).
    var isInTransaction: Bool { get }
    /// Whether a pool may lend the handle again: no transaction left open, the connection still good.
    var isReusable: Bool { get }
    /// Opens a transaction with `sql` (`BEGIN DEFERRED`, `BEGIN IMMEDIATE`).
    func begin(_ sql: String) throws
    func commit() throws
    /// Rolls back the open transaction, if any; failures are ignored (the pool drops a handle left in one).
    func rollback()
}

/// A compiled statement of a `StorageHandle`.
protocol StorageStatement: AnyObject {
    var sql: String { get }
    /// Binds `arguments` by position, runs the statement, and returns the rows `limit` asks for.
    @discardableResult
    func run(_ arguments: [(any SQLConvertible)?], rows limit: RowLimit) throws -> [Row]
}

extension StorageHandle {
    /// Runs `body` inside a transaction opened with `begin`: commits when it returns, rolls back when it throws.
    func inTransaction<T>(begin: String, _ body: (Connection) throws -> T) throws -> T {
        try self.begin(begin)
        let connection = Connection(self)
        defer { connection.close() }
        do {
            let result = try body(connection)
            guard isInTransaction else {
                throw StorageError(
                    .misuse, message: "the transaction was ended inside the closure; read/write manage BEGIN/COMMIT")
            }
            try commit()
            return result
        } catch {
            rollback()
            throw error
        }
    }
}
