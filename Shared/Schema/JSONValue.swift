internal import Glibc

/// A JSON value as RFC 8259 defines it, small enough to build by hand and exact enough for protobuf's JSON
/// mapping: a number keeps its literal text, so a 64-bit integer or a double survives a round trip unrounded,
/// and an object keeps its members in order, so output is deterministic (field-number order).
public enum JSONValue: Sendable, Equatable {
    case null
    case bool(Bool)
    /// The number's JSON literal, e.g. `-12`, `0.5`, `1e+20`; always valid RFC 8259 number syntax.
    case number(JSONNumber)
    case string(String)
    case array([JSONValue])
    /// Members in order; the parser refuses duplicate keys, so each key occurs once.
    case object([JSONMember])

    /// The member named `key` of an object, nil for a missing key or a value that is no object.
    public subscript(key: String) -> JSONValue? {
        guard case .object(let members) = self else { return nil }
        return members.first { $0.key == key }?.value
    }

    /// The element at `index` of an array, nil when out of range or not an array.
    public subscript(index: Int) -> JSONValue? {
        guard case .array(let elements) = self, elements.indices.contains(index) else { return nil }
        return elements[index]
    }

    public var stringValue: String? {
        if case .string(let string) = self { return string }
        return nil
    }

    public var arrayValue: [JSONValue]? {
        if case .array(let elements) = self { return elements }
        return nil
    }

    public var objectValue: [JSONMember]? {
        if case .object(let members) = self { return members }
        return nil
    }

    /// A number's value as a Double (rounded as any JSON reader would), nil for anything else.
    public var doubleValue: Double? {
        if case .number(let number) = self { return number.doubleValue }
        return nil
    }

    /// Equality as JSON means it: objects compare as unordered sets of members, numbers by value
    /// (`1`, `1.0` and `1e0` are one number). `==` compares literally (member order, number spelling).
    public func isSemanticallyEqual(to other: JSONValue) -> Bool {
        switch (self, other) {
        case (.null, .null): return true
        case (.bool(let a), .bool(let b)): return a == b
        case (.string(let a), .string(let b)): return a == b
        case (.number(let a), .number(let b)): return a.text == b.text || a.doubleValue == b.doubleValue
        case (.array(let a), .array(let b)):
            return a.count == b.count && zip(a, b).allSatisfy { $0.isSemanticallyEqual(to: $1) }
        case (.object(let a), .object(let b)):
            guard a.count == b.count else { return false }
            return a.allSatisfy { member in
                b.first { $0.key == member.key }.map { member.value.isSemanticallyEqual(to: $0.value) } ?? false
            }
        default: return false
        }
    }
}

/// One member of a JSON object.
public struct JSONMember: Sendable, Equatable {
    public var key: String
    public var value: JSONValue

    public init(_ key: String, _ value: JSONValue) {
        self.key = key
        self.value = value
    }
}

/// A JSON number, kept as its literal so nothing is lost before the reader decides what type it wants.
public struct JSONNumber: Sendable, Equatable, CustomStringConvertible {
    /// Valid RFC 8259 number syntax (checked by every initializer).
    public let text: String

    /// Nil unless `text` is a JSON number literal (`-0`, `12.5e-3`; not `+1`, `01`, `.5`, `NaN`).
    public init?(literal text: String) {
        guard JSONNumber.isLiteral(text.utf8) else { return nil }
        self.text = text
    }

    init(unchecked text: String) { self.text = text }

    public init<Integer: BinaryInteger>(_ value: Integer) { text = String(value) }

    /// Nil for NaN and the infinities, which JSON cannot spell as numbers.
    public init?(_ value: Double) {
        guard value.isFinite else { return nil }
        text = value.description  // shortest text that reads back as the same Double; valid JSON syntax
    }

    /// Nil for NaN and the infinities. As protobuf's C++ and Python write a float: `%.6g`, or `%.7g`, `%.8g`,
    /// `%.9g`, the first that reads back as the same Float; so `1.1` stays `1.1` (not `1.100000023841858`) and
    /// the JSON equals theirs even for subnormals, where the shortest text (`1e-45`) is a different double.
    public init?(_ value: Float) {
        guard value.isFinite else { return nil }
        var chosen = value.description
        for precision in 6...9 {
            let candidate = JSONNumber.format(Double(value), precision: precision)
            if Float(candidate) == value {
                chosen = candidate
                break
            }
        }
        text = chosen
    }

    /// `printf("%.*g")`.
    private static func format(_ value: Double, precision: Int) -> String {
        var buffer = [CChar](repeating: 0, count: 40)
        let count = withVaList([Int32(precision), value]) { arguments in
            buffer.withUnsafeMutableBufferPointer { vsnprintf($0.baseAddress, $0.count, "%.*g", arguments) }
        }
        return String(decoding: buffer.prefix(Int(max(count, 0))).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    public var doubleValue: Double { Double(text) ?? .nan }

    public var description: String { text }

    /// RFC 8259: `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`.
    static func isLiteral<Bytes: Collection<UInt8>>(_ bytes: Bytes) -> Bool {
        var index = bytes.startIndex
        func digits() -> Int {
            var count = 0
            while index != bytes.endIndex, (0x30...0x39).contains(bytes[index]) {
                bytes.formIndex(after: &index)
                count += 1
            }
            return count
        }
        if index != bytes.endIndex, bytes[index] == UInt8(ascii: "-") { bytes.formIndex(after: &index) }
        guard index != bytes.endIndex else { return false }
        if bytes[index] == UInt8(ascii: "0") {
            bytes.formIndex(after: &index)
        } else if digits() == 0 {
            return false
        }
        if index != bytes.endIndex, bytes[index] == UInt8(ascii: ".") {
            bytes.formIndex(after: &index)
            guard digits() > 0 else { return false }
        }
        if index != bytes.endIndex, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
            bytes.formIndex(after: &index)
            if index != bytes.endIndex, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") {
                bytes.formIndex(after: &index)
            }
            guard digits() > 0 else { return false }
        }
        return index == bytes.endIndex
    }

    /// The number as an exact integer in decimal (`-`? digits, no leading zeros), or nil when it has a
    /// fractional part: `1.0`, `1e2` and `2.5e1` are integers, `1.5` and `1e-1` are not. Exponents that would
    /// make more than `maxDigits` digits are refused rather than expanded.
    func exactInteger(maxDigits: Int = 40) -> String? {
        var text = Substring(self.text)
        var negative = false
        if text.first == "-" {
            negative = true
            text = text.dropFirst()
        }
        var exponent = 0
        if let e = text.firstIndex(where: { $0 == "e" || $0 == "E" }) {
            guard let value = Int(text[text.index(after: e)...].drop { $0 == "+" }), abs(value) < 10_000 else {
                return nil
            }
            exponent = value
            text = text[..<e]
        }
        var digits = Array(text.utf8)
        if let point = digits.firstIndex(of: UInt8(ascii: ".")) {
            exponent -= digits.count - point - 1
            digits.remove(at: point)
        }
        // value = digits × 10^exponent
        if exponent < 0 {
            let dropped = digits.suffix(min(-exponent, digits.count))
            guard dropped.allSatisfy({ $0 == UInt8(ascii: "0") }) else { return nil }
            digits.removeLast(dropped.count)
        } else {
            guard digits.count + exponent <= maxDigits + 1 else { return nil }
            digits += repeatElement(UInt8(ascii: "0"), count: exponent)
        }
        let significant = digits.drop { $0 == UInt8(ascii: "0") }
        guard significant.count <= maxDigits else { return nil }
        if significant.isEmpty { return "0" }
        return (negative ? "-" : "") + String(decoding: significant, as: UTF8.self)
    }
}

extension JSONValue {
    public static func number<Integer: BinaryInteger>(_ value: Integer) -> JSONValue { .number(JSONNumber(value)) }
}
