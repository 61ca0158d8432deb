/// Protobuf's canonical JSON mapping (https://protobuf.dev/programming-guides/json/) for the generated
/// messages: `schema-gen` writes each message's field table and a conformance that calls the encoder and
/// decoder below, so the rules live here once. Output matches protobuf's own `json_format` (the SchemaTests
/// compare with Python's on a sample of every message).

/// How a message is mapped to and from JSON.
public struct ProtoJSONOptions: Sendable, Equatable {
    /// Print fields without presence at their defaults (protobuf's "always print fields with no presence",
    /// called `including_default_value_fields` in protobuf 3.21's Python): scalars at 0/""/false, enums at
    /// their zero value, repeated fields as `[]`. An unset `optional` field or message field stays omitted
    /// either way: absence is its value.
    public var emitDefaults: Bool
    /// Skip members that name no field (and enum names the schema does not know) instead of failing.
    public var ignoreUnknownFields: Bool
    /// Name members by the `.proto` field name (`box_px`) instead of its JSON name (`boxPx`).
    public var preserveProtoFieldNames: Bool

    public init(emitDefaults: Bool = false, ignoreUnknownFields: Bool = false, preserveProtoFieldNames: Bool = false) {
        self.emitDefaults = emitDefaults
        self.ignoreUnknownFields = ignoreUnknownFields
        self.preserveProtoFieldNames = preserveProtoFieldNames
    }
}

/// JSON that does not map to the expected message, with the path of the offending field.
public struct ProtoJSONError: Error, Equatable, CustomStringConvertible {
    /// Field names from the outer message in, with `[i]` for array elements: `["observations", "[2]", "box", "x"]`.
    public var path: [String]
    public var reason: String

    public init(path: [String] = [], reason: String) {
        self.path = path
        self.reason = reason
    }

    /// `box.x: expected a number`, `observations[2].box: ...`; just the reason at the top level.
    public var description: String {
        guard !path.isEmpty else { return reason }
        var text = ""
        for component in path {
            if !text.isEmpty, !component.hasPrefix("[") { text += "." }
            text += component
        }
        return "\(text): \(reason)"
    }
}

/// One field as the JSON mapping sees it; generated per message in field-number order.
public struct ProtoJSONField: Sendable, Equatable {
    /// The field's `.proto` type (`FieldDescriptorProto.Type`), for readers that map other text to fields.
    public enum Kind: Sendable, Equatable {
        case double, float, int64, uint64, int32, fixed64, fixed32, bool, string, message, bytes, uint32, `enum`,
            sfixed32, sfixed64, sint32, sint64
    }

    /// Whether the field has presence and how many values it holds.
    public enum Cardinality: Sendable, Equatable {
        /// proto3 without presence: omitted at its default.
        case singular
        /// `optional` or a message field: omitted exactly when unset.
        case optional
        case repeated
    }

    public let number: Int32
    /// As written in the `.proto` file, e.g. `box_px`.
    public let protoName: String
    /// The descriptor's `json_name` (protoc's lowerCamelCase unless the field sets one), e.g. `boxPx`.
    public let jsonName: String
    public let kind: Kind
    public let cardinality: Cardinality

    public init(number: Int32, protoName: String, jsonName: String, kind: Kind, cardinality: Cardinality) {
        self.number = number
        self.protoName = protoName
        self.jsonName = jsonName
        self.kind = kind
        self.cardinality = cardinality
    }
}

/// Every message type one `.proto` file declares (nested ones included, in declaration order); generated
/// per file, so tests and registries can walk all of them without a hand-kept list.
public struct ProtoFileMessages: Sendable {
    /// As protoc names the file, e.g. `menagerie/zoo/v1/zoo.proto`.
    public let path: String
    public let messages: [any ProtoJSONMessage.Type]

    public init(path: String, messages: [any ProtoJSONMessage.Type]) {
        self.path = path
        self.messages = messages
    }
}

/// A message with protobuf's JSON mapping; generated for every message.
public protocol ProtoJSONMessage: ProtoMessage, ProtoJSONFieldValue {
    /// Every field, in field-number order.
    static var protoJSONFields: [ProtoJSONField] { get }
    /// The JSON object for this message.
    func jsonValue(options: ProtoJSONOptions) -> JSONValue
    /// Reads a message from its JSON object; throws `ProtoJSONError` naming the bad field.
    init(jsonValue: JSONValue, options: ProtoJSONOptions) throws(ProtoJSONError)
}

extension ProtoJSONMessage {
    /// The message as JSON text (compact unless `layout` says otherwise).
    public func jsonString(options: ProtoJSONOptions = ProtoJSONOptions(), layout: JSONValue.Layout = .compact)
        -> String
    {
        jsonValue(options: options).serialized(layout)
    }

    /// Parses `jsonString` strictly (RFC 8259, see `JSONParser`) and maps it; a syntax error is a
    /// `ProtoJSONError` too, so callers handle one error type.
    public init(jsonString: String, options: ProtoJSONOptions = ProtoJSONOptions()) throws(ProtoJSONError) {
        let value: JSONValue
        do {
            value = try JSONParser.parse(jsonString)
        } catch {
            throw ProtoJSONError(reason: error.description)
        }
        try self.init(jsonValue: value, options: options)
    }

    public func protoJSON(options: ProtoJSONOptions) -> JSONValue { jsonValue(options: options) }

    public init(protoJSON value: JSONValue, options: ProtoJSONOptions) throws(ProtoJSONError) {
        try self.init(jsonValue: value, options: options)
    }

    public var isProtoJSONDefault: Bool { false }
}

/// A protobuf enum with its value names; generated for every enum.
public protocol ProtoJSONEnum: ProtoEnum, ProtoJSONFieldValue {
    /// Every value: its name in the `.proto` file and its number, in declaration order.
    static var protoJSONValues: [(name: String, number: Int32)] { get }
}

extension ProtoJSONEnum {
    /// The value's name, or nil for a number the schema does not define.
    public var protoName: String? {
        let number = rawValue
        return Self.protoJSONValues.first { $0.number == number }?.name
    }

    /// By name (`FILE_KIND_LEXICON_CSV`); an unknown number prints as that number, as protobuf does.
    public func protoJSON(options: ProtoJSONOptions) -> JSONValue {
        protoName.map(JSONValue.string) ?? .number(rawValue)
    }

    /// From a name or a number (any 32-bit number, known or not). An unknown name is an error, or,
    /// under `ignoreUnknownFields`, reported as `ProtoJSONUnknownEnumName` so the field is skipped.
    public init(protoJSON value: JSONValue, options: ProtoJSONOptions) throws(ProtoJSONError) {
        if case .string(let name) = value {
            guard let entry = Self.protoJSONValues.first(where: { $0.name == name }) else {
                throw ProtoJSONError(reason: "unknown enum value name \"\(name)\"")
            }
            self.init(rawValue: entry.number)
            return
        }
        self.init(rawValue: try Int32(protoJSON: value, options: options))
    }

    public var isProtoJSONDefault: Bool { rawValue == 0 }
}

/// A value a field can hold: how it is written and read. Integers, floats, bools, strings, bytes, enums, messages.
public protocol ProtoJSONFieldValue {
    func protoJSON(options: ProtoJSONOptions) -> JSONValue
    init(protoJSON value: JSONValue, options: ProtoJSONOptions) throws(ProtoJSONError)
    /// Whether this is the field's default (omitted unless `emitDefaults`).
    var isProtoJSONDefault: Bool { get }
}

// MARK: Encoding and decoding a message's fields (called by generated code)

/// Builds a message's JSON object field by field, in field-number order.
public struct ProtoJSONObjectEncoder {
    private let fields: [ProtoJSONField]
    private let options: ProtoJSONOptions
    private var members: [JSONMember] = []

    public init(_ fields: [ProtoJSONField], options: ProtoJSONOptions) {
        self.fields = fields
        self.options = options
    }

    public var result: JSONValue { .object(members) }

    private mutating func add(_ index: Int, _ value: JSONValue) {
        let field = fields[index]
        members.append(JSONMember(options.preserveProtoFieldNames ? field.protoName : field.jsonName, value))
    }

    /// A field without presence: omitted at its default unless `emitDefaults`.
    public mutating func value<Value: ProtoJSONFieldValue>(_ index: Int, _ value: Value) {
        guard options.emitDefaults || !value.isProtoJSONDefault else { return }
        add(index, value.protoJSON(options: options))
    }

    /// An `optional` or message field: present exactly when set, whatever its value.
    public mutating func optional<Value: ProtoJSONFieldValue>(_ index: Int, _ value: Value?) {
        guard let value else { return }
        add(index, value.protoJSON(options: options))
    }

    /// A repeated field: an array, omitted when empty unless `emitDefaults`.
    public mutating func repeated<Value: ProtoJSONFieldValue>(_ index: Int, _ values: [Value]) {
        guard options.emitDefaults || !values.isEmpty else { return }
        add(index, .array(values.map { $0.protoJSON(options: options) }))
    }
}

/// Reads a message's JSON object: finds each member's field (by JSON name or proto name), refuses duplicates
/// (a field given under both names too) and unknown members (unless ignored), and decodes fields on request.
public struct ProtoJSONObjectDecoder {
    private let options: ProtoJSONOptions
    private let fields: [ProtoJSONField]
    /// Per field index, its member's value; nil when absent.
    private var values: [JSONValue?]

    public init(_ value: JSONValue, _ fields: [ProtoJSONField], options: ProtoJSONOptions) throws(ProtoJSONError) {
        guard case .object(let members) = value else {
            throw ProtoJSONError(reason: "expected an object, found \(value.kindDescription)")
        }
        self.options = options
        self.fields = fields
        values = Array(repeating: nil, count: fields.count)
        var seen = Array(repeating: false, count: fields.count)
        for member in members {
            guard let index = fields.firstIndex(where: { $0.jsonName == member.key || $0.protoName == member.key })
            else {
                if options.ignoreUnknownFields { continue }
                throw ProtoJSONError(path: [member.key], reason: "unknown field")
            }
            guard !seen[index] else {
                throw ProtoJSONError(
                    path: [member.key], reason: "field \(fields[index].protoName) given more than once")
            }
            seen[index] = true
            values[index] = member.value
        }
    }

    private func name(_ index: Int) -> String {
        options.preserveProtoFieldNames ? fields[index].protoName : fields[index].jsonName
    }

    private func decode<Value: ProtoJSONFieldValue>(_ json: JSONValue, path: [String]) throws(ProtoJSONError) -> Value {
        do {
            return try Value(protoJSON: json, options: options)
        } catch {
            var error = error
            error.path.insert(contentsOf: path, at: 0)
            throw error
        }
    }

    /// Whether an unknown enum name should skip the value rather than fail.
    private func skipsUnknownEnumName<Value>(_ type: Value.Type, _ json: JSONValue) -> Bool {
        guard options.ignoreUnknownFields, let enumType = type as? any ProtoJSONEnum.Type, case .string(let name) = json
        else {
            return false
        }
        return !enumType.protoJSONValues.contains { $0.name == name }
    }

    /// A field without presence; `null` leaves the default.
    public func value<Value: ProtoJSONFieldValue>(_ index: Int, into target: inout Value) throws(ProtoJSONError) {
        guard let json = values[index], json != .null, !skipsUnknownEnumName(Value.self, json) else { return }
        target = try decode(json, path: [name(index)])
    }

    /// An `optional` or message field; `null` leaves it unset.
    public func optional<Value: ProtoJSONFieldValue>(_ index: Int, into target: inout Value?) throws(ProtoJSONError) {
        guard let json = values[index], json != .null, !skipsUnknownEnumName(Value.self, json) else { return }
        target = try decode(json, path: [name(index)]) as Value
    }

    /// A repeated field: an array (`null` for empty); elements must not be `null`.
    public func repeated<Value: ProtoJSONFieldValue>(_ index: Int, into target: inout [Value]) throws(ProtoJSONError) {
        guard let json = values[index], json != .null else { return }
        guard case .array(let elements) = json else {
            throw ProtoJSONError(path: [name(index)], reason: "expected an array, found \(json.kindDescription)")
        }
        var decoded: [Value] = []
        decoded.reserveCapacity(elements.count)
        for (position, element) in elements.enumerated() {
            if element == .null {
                throw ProtoJSONError(
                    path: [name(index), "[\(position)]"], reason: "null is not allowed in a repeated field")
            }
            if skipsUnknownEnumName(Value.self, element) { continue }
            decoded.append(try decode(element, path: [name(index), "[\(position)]"]))
        }
        target = decoded
    }
}

extension JSONValue {
    /// "a number", "a string", ... for error messages.
    var kindDescription: String {
        switch self {
        case .null: "null"
        case .bool: "a boolean"
        case .number: "a number"
        case .string: "a string"
        case .array: "an array"
        case .object: "an object"
        }
    }
}

// MARK: Scalars

/// Integers: 32-bit ones print as numbers, 64-bit ones as decimal strings (JavaScript's numbers lose
/// precision beyond 2^53). Both read from a number or a string holding one, if it is integral and in range.
public protocol ProtoJSONInteger: FixedWidthInteger, ProtoJSONFieldValue {
    static var printsAsString: Bool { get }
}

extension ProtoJSONInteger {
    public func protoJSON(options: ProtoJSONOptions) -> JSONValue {
        Self.printsAsString ? .string(String(self)) : .number(self)
    }

    public init(protoJSON value: JSONValue, options: ProtoJSONOptions) throws(ProtoJSONError) {
        let number: JSONNumber
        switch value {
        case .number(let literal): number = literal
        case .string(let text):
            guard let literal = JSONNumber(literal: text) else {
                throw ProtoJSONError(reason: "expected an integer, found the string \"\(text)\"")
            }
            number = literal
        default: throw ProtoJSONError(reason: "expected an integer, found \(value.kindDescription)")
        }
        guard let digits = number.exactInteger() else {
            throw ProtoJSONError(reason: "expected an integer, found \(number.text)")
        }
        guard let integer = Self(digits) else {
            throw ProtoJSONError(reason: "\(number.text) is out of range for \(Self.self)")
        }
        self = integer
    }

    public var isProtoJSONDefault: Bool { self == 0 }
}

extension Int32: ProtoJSONInteger { public static var printsAsString: Bool { false } }
extension UInt32: ProtoJSONInteger { public static var printsAsString: Bool { false } }
extension Int64: ProtoJSONInteger { public static var printsAsString: Bool { true } }
extension UInt64: ProtoJSONInteger { public static var printsAsString: Bool { true } }

/// Floats: numbers, and the strings "NaN", "Infinity", "-Infinity" JSON has no number for.
public protocol ProtoJSONFloatingPoint: BinaryFloatingPoint, LosslessStringConvertible, ProtoJSONFieldValue {
    static func jsonNumber(_ value: Self) -> JSONNumber?
}

extension ProtoJSONFloatingPoint {
    public func protoJSON(options: ProtoJSONOptions) -> JSONValue {
        if isNaN { return .string("NaN") }
        if isInfinite { return .string(self < 0 ? "-Infinity" : "Infinity") }
        return .number(Self.jsonNumber(self)!)
    }

    public init(protoJSON value: JSONValue, options: ProtoJSONOptions) throws(ProtoJSONError) {
        let text: String
        switch value {
        case .number(let number): text = number.text
        case .string("NaN"):
            self = .nan
            return
        case .string("Infinity"):
            self = .infinity
            return
        case .string("-Infinity"):
            self = -.infinity
            return
        case .string(let string):
            guard JSONNumber(literal: string) != nil else {
                throw ProtoJSONError(reason: "expected a number, found the string \"\(string)\"")
            }
            text = string
        default: throw ProtoJSONError(reason: "expected a number, found \(value.kindDescription)")
        }
        guard let parsed = Self(text), parsed.isFinite else {
            throw ProtoJSONError(reason: "\(text) is out of range for \(Self.self)")
        }
        self = parsed
    }

    /// Only +0 is the default: -0 is printed, as protobuf does (its bits differ from the default's).
    public var isProtoJSONDefault: Bool { self == 0 && sign == .plus }
}

extension Float: ProtoJSONFloatingPoint {
    public static func jsonNumber(_ value: Float) -> JSONNumber? { JSONNumber(value) }
}

extension Double: ProtoJSONFloatingPoint {
    public static func jsonNumber(_ value: Double) -> JSONNumber? { JSONNumber(value) }
}

extension Bool: ProtoJSONFieldValue {
    public func protoJSON(options: ProtoJSONOptions) -> JSONValue { .bool(self) }

    public init(protoJSON value: JSONValue, options: ProtoJSONOptions) throws(ProtoJSONError) {
        guard case .bool(let bool) = value else {
            throw ProtoJSONError(reason: "expected true or false, found \(value.kindDescription)")
        }
        self = bool
    }

    public var isProtoJSONDefault: Bool { !self }
}

extension String: ProtoJSONFieldValue {
    public func protoJSON(options: ProtoJSONOptions) -> JSONValue { .string(self) }

    public init(protoJSON value: JSONValue, options: ProtoJSONOptions) throws(ProtoJSONError) {
        guard case .string(let string) = value else {
            throw ProtoJSONError(reason: "expected a string, found \(value.kindDescription)")
        }
        // protobuf-c keeps strings as C strings, so everything after a NUL would be dropped on the way in: the
        // value is refused here, where every door's JSON enters protobuf, as the binary protocol refuses it.
        guard !string.utf8.contains(0) else {
            throw ProtoJSONError(reason: "a string may not contain a NUL character (\\u0000)")
        }
        self = string
    }

    public var isProtoJSONDefault: Bool { isEmpty }
}

/// Bytes: standard base64 with padding out; standard or URL-safe, padded or not, in.
extension [UInt8]: ProtoJSONFieldValue {
    public func protoJSON(options: ProtoJSONOptions) -> JSONValue { .string(Base64.encode(self)) }

    public init(protoJSON value: JSONValue, options: ProtoJSONOptions) throws(ProtoJSONError) {
        guard case .string(let text) = value else {
            throw ProtoJSONError(reason: "expected a base64 string, found \(value.kindDescription)")
        }
        guard let bytes = Base64.decode(text) else { throw ProtoJSONError(reason: "invalid base64") }
        self = bytes
    }

    public var isProtoJSONDefault: Bool { isEmpty }
}

/// RFC 4648 base64, both alphabets.
public enum Base64 {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    /// Standard alphabet, padded.
    public static func encode(_ bytes: [UInt8]) -> String {
        var output: [UInt8] = []
        output.reserveCapacity((bytes.count + 2) / 3 * 4)
        var index = 0
        while index < bytes.count {
            let remaining = bytes.count - index
            let b0 = UInt32(bytes[index])
            let b1 = remaining > 1 ? UInt32(bytes[index + 1]) : 0
            let b2 = remaining > 2 ? UInt32(bytes[index + 2]) : 0
            let group = b0 << 16 | b1 << 8 | b2
            output.append(alphabet[Int(group >> 18 & 63)])
            output.append(alphabet[Int(group >> 12 & 63)])
            output.append(remaining > 1 ? alphabet[Int(group >> 6 & 63)] : UInt8(ascii: "="))
            output.append(remaining > 2 ? alphabet[Int(group & 63)] : UInt8(ascii: "="))
            index += 3
        }
        return String(decoding: output, as: UTF8.self)
    }

    /// Standard (`+/`) or URL-safe (`-_`) alphabet, with or without `=` padding; nil for anything else
    /// (other characters, a length no encoding produces, padding in the middle, nonzero unused bits).
    public static func decode(_ text: String) -> [UInt8]? {
        var text = text
        return text.withUTF8 { decode($0) }
    }

    /// Each byte's digit: 0–63, or 0xFF for a byte no alphabet has (`=` included: padding is only
    /// taken off the end).
    private static let digits: [UInt8] = {
        var table = [UInt8](repeating: 0xFF, count: 256)
        for (digit, byte) in alphabet.enumerated() { table[Int(byte)] = UInt8(digit) }
        table[Int(UInt8(ascii: "-"))] = 62
        table[Int(UInt8(ascii: "_"))] = 63
        return table
    }()

    /// Decodes straight from the text's bytes through a table: a 64 KiB `bytes` field is 87 KB of base64, and a
    /// switch and an array of digits per character made it cost a millisecond.
    static func decode(_ bytes: UnsafeBufferPointer<UInt8>) -> [UInt8]? {
        var end = bytes.count, padding = 0
        while end > 0, bytes[end - 1] == UInt8(ascii: "=") {
            end -= 1
            padding += 1
        }
        let tail = end % 4
        guard tail != 1 else { return nil }
        if padding > 0 { guard (end + padding) % 4 == 0, padding <= 2 else { return nil } }
        var output: [UInt8] = []
        output.reserveCapacity(end / 4 * 3 + 2)
        return digits.withUnsafeBufferPointer { table -> [UInt8]? in
            func digit(_ index: Int) -> UInt8 { table[Int(bytes[index])] }
            var index = 0
            while index + 4 <= end {
                let a = digit(index), b = digit(index + 1), c = digit(index + 2), d = digit(index + 3)
                guard (a | b | c | d) & 0xC0 == 0 else { return nil }
                let group = UInt32(a) << 18 | UInt32(b) << 12 | UInt32(c) << 6 | UInt32(d)
                output.append(UInt8(truncatingIfNeeded: group >> 16))
                output.append(UInt8(truncatingIfNeeded: group >> 8))
                output.append(UInt8(truncatingIfNeeded: group))
                index += 4
            }
            if tail == 2 {
                let a = digit(index), b = digit(index + 1)
                guard (a | b) & 0xC0 == 0, b & 0x0F == 0 else { return nil }
                output.append(a << 2 | b >> 4)
            } else if tail == 3 {
                let a = digit(index), b = digit(index + 1), c = digit(index + 2)
                guard (a | b | c) & 0xC0 == 0, c & 0x03 == 0 else { return nil }
                output.append(a << 2 | b >> 4)
                output.append((b & 0x0F) << 4 | c >> 2)
            }
            return output
        }
    }
}
