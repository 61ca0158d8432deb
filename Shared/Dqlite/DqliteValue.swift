/// A value as dqlite carries it: SQLite's five storage classes. (dqlite's time and boolean column types arrive
/// as `.text` and `.integer`, which is how SQLite stores them.)
public enum DqliteValue: Sendable, Hashable {
    case null
    case integer(Int64)
    case real(Double)
    case text(String)
    case blob([UInt8])
}

/// What a statement run for its effect reports.
public struct DqliteExecResult: Sendable, Hashable {
    public var lastInsertID: Int64
    public var rowsAffected: Int
}

/// A statement's rows, all of them (dqlite sends them in parts; the client joins them).
public struct DqliteRows: Sendable, Hashable {
    public var columns: [String]
    public var rows: [[DqliteValue]]
}

/// A member of the cluster as the leader knows it.
public struct DqliteMember: Sendable, Hashable {
    public enum Role: UInt64, Sendable { case voter = 0, standBy = 1, spare = 2 }
    public var id: UInt64
    public var address: String
    public var role: Role?
}
