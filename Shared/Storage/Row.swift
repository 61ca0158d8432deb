/// One result row: column names and values, detached from the statement that produced it.
public struct Row: Sendable, Hashable {
    /// Column names as SQLite reports them (the `AS` alias when there is one).
    public let columnNames: [String]
    public let values: [SQLValue]

    init(columnNames: [String], values: [SQLValue]) {
        self.columnNames = columnNames
        self.values = values
    }

    /// The value at a column position; traps when out of range, like an array.
    public subscript(index: Int) -> SQLValue { values[index] }

    /// The value of a named column (exact match first, then case-insensitive); `.null` when there is no such column.
    public subscript(column: String) -> SQLValue {
        position(of: column).map { values[$0] } ?? .null
    }

    /// Decodes the value at a column position; throws `.typeMismatch` when it cannot be represented as `T`.
    /// Decode optionals (`as: Int?.self`) to accept NULL.
    public func value<T: SQLConvertible>(at index: Int, as type: T.Type = T.self) throws -> T {
        guard values.indices.contains(index) else {
            throw StorageError(.misuse, message: "no column at index \(index); the row has \(values.count)")
        }
        return try decode(values[index], column: columnNames[index])
    }

    /// Decodes a named column; throws `.misuse` when there is no such column and `.typeMismatch` when the value
    /// cannot be represented as `T`. Decode optionals (`as: Int?.self`) to accept NULL.
    public func value<T: SQLConvertible>(_ column: String, as type: T.Type = T.self) throws -> T {
        guard let index = position(of: column) else {
            throw StorageError(.misuse, message: "no column named \"\(column)\" in \(columnNames)")
        }
        return try decode(values[index], column: column)
    }

    /// The integer at `index`; `nil` on NULL or a value that is not an integer.
    public func int(_ index: Int) -> Int? { Int(sqlValue: self[index]) }
    /// The 64-bit integer at `index`; `nil` on NULL or a value that is not an integer.
    public func int64(_ index: Int) -> Int64? { Int64(sqlValue: self[index]) }
    /// The number at `index`; `nil` on NULL or a value that is not a number.
    public func double(_ index: Int) -> Double? { Double(sqlValue: self[index]) }
    /// The text at `index`; `nil` on NULL or a value that is not text.
    public func string(_ index: Int) -> String? { String(sqlValue: self[index]) }
    /// The integer at `index` as a flag (non-zero is `true`); `nil` on NULL or a value that is not an integer.
    public func bool(_ index: Int) -> Bool? { Bool(sqlValue: self[index]) }
    /// The blob at `index`; `nil` on NULL or a value that is not a blob.
    public func blob(_ index: Int) -> [UInt8]? { [UInt8](sqlValue: self[index]) }
    /// The integer in `column`; `nil` on NULL, a value that is not an integer, or no such column.
    public func int(_ column: String) -> Int? { Int(sqlValue: self[column]) }
    /// The 64-bit integer in `column`; `nil` on NULL, a value that is not an integer, or no such column.
    public func int64(_ column: String) -> Int64? { Int64(sqlValue: self[column]) }
    /// The number in `column`; `nil` on NULL, a value that is not a number, or no such column.
    public func double(_ column: String) -> Double? { Double(sqlValue: self[column]) }
    /// The text in `column`; `nil` on NULL, a value that is not text, or no such column.
    public func string(_ column: String) -> String? { String(sqlValue: self[column]) }
    /// The flag in `column` (non-zero is `true`); `nil` on NULL, a value that is not an integer, or no such column.
    public func bool(_ column: String) -> Bool? { Bool(sqlValue: self[column]) }
    /// The blob in `column`; `nil` on NULL, a value that is not a blob, or no such column.
    public func blob(_ column: String) -> [UInt8]? { [UInt8](sqlValue: self[column]) }

    private func position(of column: String) -> Int? {
        if let exact = columnNames.firstIndex(of: column) { return exact }
        let folded = column.lowercased()
        return columnNames.firstIndex { $0.lowercased() == folded }
    }

    private func decode<T: SQLConvertible>(_ value: SQLValue, column: String) throws -> T {
        guard let decoded = T(sqlValue: value) else {
            throw StorageError(
                .typeMismatch, message: "column \"\(column)\" holds \(value.storageClass), not \(T.self)")
        }
        return decoded
    }
}
