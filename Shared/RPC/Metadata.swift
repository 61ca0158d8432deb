/// Ordered key/value string pairs sent with a call (like gRPC metadata): `authorization`, `request-id`, ...
///
/// Keys are compared case-insensitively and stored lower-cased.
public struct Metadata: Sendable, Hashable, Sequence, ExpressibleByDictionaryLiteral {
    public private(set) var entries: [(key: String, value: String)]

    public init() { entries = [] }

    public init(_ pairs: [(String, String)]) {
        entries = pairs.map { (key: $0.0.lowercased(), value: $0.1) }
    }

    public init(dictionaryLiteral elements: (String, String)...) { self.init(elements) }

    /// The first value stored under `key`; setting replaces every value under it (nil removes them).
    public subscript(key: String) -> String? {
        get {
            let key = key.lowercased()
            return entries.first { $0.key == key }?.value
        }
        set {
            let key = key.lowercased()
            entries.removeAll { $0.key == key }
            if let newValue { entries.append((key: key, value: newValue)) }
        }
    }

    /// Adds a value under `key`, keeping any existing ones.
    public mutating func add(_ key: String, _ value: String) {
        entries.append((key: key.lowercased(), value: value))
    }

    public var isEmpty: Bool { entries.isEmpty }

    public func makeIterator() -> some IteratorProtocol<(key: String, value: String)> { entries.makeIterator() }

    public static func == (lhs: Metadata, rhs: Metadata) -> Bool {
        lhs.entries.elementsEqual(rhs.entries) { $0.key == $1.key && $0.value == $1.value }
    }

    public func hash(into hasher: inout Hasher) {
        for entry in entries {
            hasher.combine(entry.key)
            hasher.combine(entry.value)
        }
    }
}
