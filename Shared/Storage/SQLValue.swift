/// A value as SQLite stores it: one of its five storage classes.
public enum SQLValue: Sendable, Hashable {
    case null
    case integer(Int64)
    case real(Double)
    case text(String)
    case blob([UInt8])
}

extension SQLValue {
    /// SQLite's name for the storage class, as `typeof()` reports it.
    var storageClass: String {
        switch self {
        case .null: "null"
        case .integer: "integer"
        case .real: "real"
        case .text: "text"
        case .blob: "blob"
        }
    }
}

extension SQLValue: ExpressibleByNilLiteral, ExpressibleByIntegerLiteral, ExpressibleByFloatLiteral,
    ExpressibleByStringLiteral
{
    public init(nilLiteral: ()) { self = .null }
    public init(integerLiteral value: Int64) { self = .integer(value) }
    public init(floatLiteral value: Double) { self = .real(value) }
    public init(stringLiteral value: String) { self = .text(value) }
}

/// A Swift type that binds to a statement argument and decodes from a column value.
///
/// Call sites pass plain Swift values as arguments: `try db.execute(sql, [name, 42, nil])`.
public protocol SQLConvertible: Sendable {
    /// The value bound to a statement argument.
    var sqlValue: SQLValue { get }
    /// Decodes a column value; `nil` when the value is NULL or cannot represent `Self` exactly.
    init?(sqlValue: SQLValue)
}

extension SQLValue: SQLConvertible {
    public var sqlValue: SQLValue { self }
    public init?(sqlValue: SQLValue) { self = sqlValue }
}

extension Int64: SQLConvertible {
    public var sqlValue: SQLValue { .integer(self) }
    /// Accepts integers, and reals that hold an integral value exactly.
    public init?(sqlValue: SQLValue) {
        switch sqlValue {
        case .integer(let value): self = value
        case .real(let value):
            guard let exact = Int64(exactly: value) else { return nil }
            self = exact
        default: return nil
        }
    }
}

extension Int: SQLConvertible {
    public var sqlValue: SQLValue { .integer(Int64(self)) }
    public init?(sqlValue: SQLValue) {
        guard let value = Int64(sqlValue: sqlValue), let exact = Int(exactly: value) else { return nil }
        self = exact
    }
}

extension Int32: SQLConvertible {
    public var sqlValue: SQLValue { .integer(Int64(self)) }
    public init?(sqlValue: SQLValue) {
        guard let value = Int64(sqlValue: sqlValue), let exact = Int32(exactly: value) else { return nil }
        self = exact
    }
}

extension Double: SQLConvertible {
    public var sqlValue: SQLValue { .real(self) }
    /// Accepts reals and integers (as SQLite does).
    public init?(sqlValue: SQLValue) {
        switch sqlValue {
        case .real(let value): self = value
        case .integer(let value): self = Double(value)
        default: return nil
        }
    }
}

extension Bool: SQLConvertible {
    /// Stored as 0 or 1.
    public var sqlValue: SQLValue { .integer(self ? 1 : 0) }
    /// Any non-zero integer is `true`.
    public init?(sqlValue: SQLValue) {
        guard case .integer(let value) = sqlValue else { return nil }
        self = value != 0
    }
}

extension String: SQLConvertible {
    public var sqlValue: SQLValue { .text(self) }
    public init?(sqlValue: SQLValue) {
        guard case .text(let value) = sqlValue else { return nil }
        self = value
    }
}

extension Array: SQLConvertible where Element == UInt8 {
    public var sqlValue: SQLValue { .blob(self) }
    public init?(sqlValue: SQLValue) {
        guard case .blob(let value) = sqlValue else { return nil }
        self = value
    }
}

extension Optional: SQLConvertible where Wrapped: SQLConvertible {
    public var sqlValue: SQLValue { self?.sqlValue ?? .null }
    /// NULL decodes to `nil`; a value of another type fails the initializer.
    public init?(sqlValue: SQLValue) {
        if case .null = sqlValue {
            self = .none
        } else if let value = Wrapped(sqlValue: sqlValue) {
            self = .some(value)
        } else {
            return nil
        }
    }
}
