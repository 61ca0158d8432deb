/// Opens the private databases that stores' `inMemory` constructors keep their data in: in-memory SQLite unless the
/// caller passes another factory. This is the seam through which tests choose a store's backend (StorageTestSupport's
/// `testBackend` follows the suite's configuration and may open a database of a one-node dqlite cluster), so that the
/// Storage module itself holds no test support and reads no environment.
public struct DatabaseFactory: Sendable {
    private let make: @Sendable ([Migration]) throws -> Database

    /// A factory that opens each database with `make`, which applies the migrations it is given.
    public init(_ make: @escaping @Sendable (_ migrations: [Migration]) throws -> Database) { self.make = make }

    /// A new database of its own, `migrations` applied.
    public func open(migrations: [Migration]) throws -> Database { try make(migrations) }

    /// `Database.inMemory`: a private in-memory SQLite database.
    public static let inMemory = DatabaseFactory { try Database.inMemory(migrations: $0) }
}
