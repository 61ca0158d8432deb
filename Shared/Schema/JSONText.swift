/// Why a text is not the JSON we accept: where (a byte offset into the UTF-8 text) and what.
public struct JSONParseError: Error, Equatable, CustomStringConvertible {
    /// Byte offset into the input where the problem was found.
    public let offset: Int
    public let reason: String

    public var description: String { "invalid JSON at byte \(offset): \(reason)" }
}

/// A strict RFC 8259 parser: one value, optionally surrounded by whitespace, nothing else. No comments, no
/// trailing commas, no single quotes, no NaN literals, no lone surrogates, no invalid UTF-8, no duplicate keys
/// (RFC 8259 leaves them unspecified; protobuf's mapping treats them as an error, and so does every reader
/// here). Depth and size are bounded so hostile input costs bounded stack and memory.
public struct JSONParser {
    public struct Limits: Sendable {
        /// Arrays and objects nested deeper than this are refused (the stack is the recursion).
        public var maxDepth: Int
        /// Texts longer than this many bytes are refused before parsing.
        public var maxBytes: Int

        public init(maxDepth: Int = 100, maxBytes: Int = 64 << 20) {
            self.maxDepth = maxDepth
            self.maxBytes = maxBytes
        }
    }

    public static func parse(_ text: String, limits: Limits = Limits()) throws(JSONParseError) -> JSONValue {
        try parse(Array(text.utf8), limits: limits)
    }

    public static func parse(_ bytes: [UInt8], limits: Limits = Limits()) throws(JSONParseError) -> JSONValue {
        try bytes.withUnsafeBufferPointer { buffer throws(JSONParseError) in try parse(buffer, limits: limits) }
    }

    public static func parse(_ bytes: UnsafeBufferPointer<UInt8>, limits: Limits = Limits()) throws(JSONParseError)
        -> JSONValue
    {
        guard bytes.count <= limits.maxBytes else {
            throw JSONParseError(
                offset: 0, reason: "text of \(bytes.count) bytes exceeds the limit of \(limits.maxBytes)")
        }
        var parser = Cursor(bytes: bytes, maxDepth: limits.maxDepth)
        parser.skipWhitespace()
        let value = try parser.value(depth: 0)
        parser.skipWhitespace()
        guard parser.index == bytes.count else { throw parser.error("unexpected data after the value") }
        return value
    }

    private struct Cursor {
        let bytes: UnsafeBufferPointer<UInt8>
        let maxDepth: Int
        var index = 0

        init(bytes: UnsafeBufferPointer<UInt8>, maxDepth: Int) {
            self.bytes = bytes
            self.maxDepth = maxDepth
        }

        func error(_ reason: String, at offset: Int? = nil) -> JSONParseError {
            JSONParseError(offset: offset ?? index, reason: reason)
        }

        var atEnd: Bool { index >= bytes.count }

        mutating func skipWhitespace() {
            while index < bytes.count {
                switch bytes[index] {
                case 0x20, 0x09, 0x0A, 0x0D: index += 1
                default: return
                }
            }
        }

        func describeNext() -> String {
            guard !atEnd else { return "end of text" }
            let byte = bytes[index]
            return (0x21...0x7E).contains(byte)
                ? "'\(Character(Unicode.Scalar(byte)))'" : "byte 0x\(String(byte, radix: 16))"
        }

        mutating func value(depth: Int) throws(JSONParseError) -> JSONValue {
            guard !atEnd else { throw error("unexpected end of text, expected a value") }
            switch bytes[index] {
            case UInt8(ascii: "{"): return try object(depth: depth + 1)
            case UInt8(ascii: "["): return try array(depth: depth + 1)
            case UInt8(ascii: "\""): return .string(try string())
            case UInt8(ascii: "t"):
                try literal("true")
                return .bool(true)
            case UInt8(ascii: "f"):
                try literal("false")
                return .bool(false)
            case UInt8(ascii: "n"):
                try literal("null")
                return .null
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number(try number())
            default: throw error("unexpected \(describeNext()), expected a value")
            }
        }

        mutating func literal(_ word: StaticString) throws(JSONParseError) {
            let start = index
            let count = word.utf8CodeUnitCount
            guard bytes.count - index >= count,
                UnsafeBufferPointer(rebasing: bytes[index..<index + count]).elementsEqual(
                    UnsafeBufferPointer(start: word.utf8Start, count: count))
            else { throw error("invalid literal, expected \(word)", at: start) }
            index += count
        }

        mutating func number() throws(JSONParseError) -> JSONNumber {
            let start = index
            while index < bytes.count, Self.isNumberByte(bytes[index]) { index += 1 }
            let slice = UnsafeBufferPointer(rebasing: bytes[start..<index])
            guard JSONNumber.isLiteral(slice) else { throw error("invalid number", at: start) }
            return JSONNumber(unchecked: String(decoding: slice, as: UTF8.self))
        }

        static func isNumberByte(_ byte: UInt8) -> Bool {
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "+"), UInt8(ascii: "."),
                UInt8(ascii: "e"), UInt8(ascii: "E"):
                true
            default: false
            }
        }

        mutating func string() throws(JSONParseError) -> String {
            let start = index
            index += 1  // the opening quote
            var utf8: [UInt8] = []
            var runStart = index
            while true {
                guard index < bytes.count else { throw error("unterminated string", at: start) }
                let byte = bytes[index]
                if byte == UInt8(ascii: "\"") {
                    utf8 += UnsafeBufferPointer(rebasing: bytes[runStart..<index])
                    index += 1
                    break
                }
                if byte < 0x20 {
                    throw error("control character 0x\(String(byte, radix: 16)) in a string must be escaped")
                }
                if byte != UInt8(ascii: "\\") {
                    index += 1
                    continue
                }
                utf8 += UnsafeBufferPointer(rebasing: bytes[runStart..<index])
                let escape = index
                index += 1
                guard index < bytes.count else { throw error("unterminated string", at: start) }
                let letter = bytes[index]
                index += 1
                switch letter {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): utf8.append(letter)
                case UInt8(ascii: "b"): utf8.append(0x08)
                case UInt8(ascii: "f"): utf8.append(0x0C)
                case UInt8(ascii: "n"): utf8.append(0x0A)
                case UInt8(ascii: "r"): utf8.append(0x0D)
                case UInt8(ascii: "t"): utf8.append(0x09)
                case UInt8(ascii: "u"):
                    var scalar = try hex4(escapeAt: escape)
                    if (0xD800...0xDBFF).contains(scalar) {
                        guard bytes.count - index >= 6, bytes[index] == UInt8(ascii: "\\"),
                            bytes[index + 1] == UInt8(ascii: "u")
                        else {
                            throw error(
                                "unpaired high surrogate \\u\(String(scalar, radix: 16, uppercase: true))", at: escape)
                        }
                        let low = index
                        index += 2
                        let second = try hex4(escapeAt: low)
                        guard (0xDC00...0xDFFF).contains(second) else {
                            throw error("high surrogate not followed by a low surrogate", at: escape)
                        }
                        scalar = 0x10000 + ((scalar - 0xD800) << 10) + (second - 0xDC00)
                    } else if (0xDC00...0xDFFF).contains(scalar) {
                        throw error(
                            "unpaired low surrogate \\u\(String(scalar, radix: 16, uppercase: true))", at: escape)
                    }
                    utf8 += Array(String(Character(Unicode.Scalar(scalar)!)).utf8)
                default:
                    throw error("invalid escape \\\(Character(Unicode.Scalar(letter)))", at: escape)
                }
                runStart = index
            }
            guard let string = String(validating: utf8, as: UTF8.self) else {
                throw error("string is not valid UTF-8", at: start)
            }
            return string
        }

        mutating func hex4(escapeAt escape: Int) throws(JSONParseError) -> UInt32 {
            guard bytes.count - index >= 4 else { throw error("truncated \\u escape", at: escape) }
            var value: UInt32 = 0
            for _ in 0..<4 {
                let byte = bytes[index]
                let digit: UInt8
                switch byte {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
                case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
                case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
                default: throw error("invalid hex digit in \\u escape", at: escape)
                }
                value = value << 4 | UInt32(digit)
                index += 1
            }
            return value
        }

        mutating func array(depth: Int) throws(JSONParseError) -> JSONValue {
            guard depth <= maxDepth else { throw error("nesting deeper than \(maxDepth)") }
            index += 1
            var elements: [JSONValue] = []
            skipWhitespace()
            if !atEnd, bytes[index] == UInt8(ascii: "]") {
                index += 1
                return .array(elements)
            }
            while true {
                skipWhitespace()
                elements.append(try value(depth: depth))
                skipWhitespace()
                guard !atEnd else { throw error("unexpected end of text in an array") }
                switch bytes[index] {
                case UInt8(ascii: ","): index += 1
                case UInt8(ascii: "]"):
                    index += 1
                    return .array(elements)
                default: throw error("unexpected \(describeNext()) in an array, expected ',' or ']'")
                }
            }
        }

        mutating func object(depth: Int) throws(JSONParseError) -> JSONValue {
            guard depth <= maxDepth else { throw error("nesting deeper than \(maxDepth)") }
            index += 1
            var members: [JSONMember] = []
            var keys: Set<String> = []
            skipWhitespace()
            if !atEnd, bytes[index] == UInt8(ascii: "}") {
                index += 1
                return .object(members)
            }
            while true {
                skipWhitespace()
                guard !atEnd, bytes[index] == UInt8(ascii: "\"") else {
                    throw error(
                        atEnd
                            ? "unexpected end of text in an object"
                            : "unexpected \(describeNext()), expected a member name in quotes")
                }
                let keyStart = index
                let key = try string()
                guard keys.insert(key).inserted else { throw error("duplicate key \"\(key)\"", at: keyStart) }
                skipWhitespace()
                guard !atEnd, bytes[index] == UInt8(ascii: ":") else {
                    throw error("unexpected \(describeNext()) after a member name, expected ':'")
                }
                index += 1
                skipWhitespace()
                members.append(JSONMember(key, try value(depth: depth)))
                skipWhitespace()
                guard !atEnd else { throw error("unexpected end of text in an object") }
                switch bytes[index] {
                case UInt8(ascii: ","): index += 1
                case UInt8(ascii: "}"):
                    index += 1
                    return .object(members)
                default: throw error("unexpected \(describeNext()) in an object, expected ',' or '}'")
                }
            }
        }
    }
}

extension JSONValue {
    /// Parses `text` strictly (see `JSONParser`).
    public init(parsing text: String, limits: JSONParser.Limits = JSONParser.Limits()) throws(JSONParseError) {
        self = try JSONParser.parse(text, limits: limits)
    }

    /// How `serialized` lays text out.
    public enum Layout: Sendable {
        /// No whitespace at all.
        case compact
        /// Two-space indentation, one member or element per line, `"key": value`.
        case pretty
    }

    /// The value as JSON text. Strings escape `"`, `\` and every control character (U+0000–U+001F, as `\n` or
    /// `\u00XX`) and U+2028/U+2029 (so the text is also a JavaScript literal); `asciiOnly` escapes every other
    /// non-ASCII character too, outside the BMP as a surrogate pair.
    public func serialized(_ layout: Layout = .compact, asciiOnly: Bool = false) -> String {
        var output = ""
        write(to: &output, layout: layout, asciiOnly: asciiOnly, indent: 0)
        return output
    }

    private func write(to output: inout String, layout: Layout, asciiOnly: Bool, indent: Int) {
        switch self {
        case .null: output += "null"
        case .bool(let value): output += value ? "true" : "false"
        case .number(let number): output += number.text
        case .string(let string): JSONValue.writeString(string, to: &output, asciiOnly: asciiOnly)
        case .array(let elements):
            guard !elements.isEmpty else {
                output += "[]"
                return
            }
            output += "["
            for (position, element) in elements.enumerated() {
                if position > 0 { output += "," }
                if layout == .pretty { JSONValue.newline(&output, indent + 1) }
                element.write(to: &output, layout: layout, asciiOnly: asciiOnly, indent: indent + 1)
            }
            if layout == .pretty { JSONValue.newline(&output, indent) }
            output += "]"
        case .object(let members):
            guard !members.isEmpty else {
                output += "{}"
                return
            }
            output += "{"
            for (position, member) in members.enumerated() {
                if position > 0 { output += "," }
                if layout == .pretty { JSONValue.newline(&output, indent + 1) }
                JSONValue.writeString(member.key, to: &output, asciiOnly: asciiOnly)
                output += layout == .pretty ? ": " : ":"
                member.value.write(to: &output, layout: layout, asciiOnly: asciiOnly, indent: indent + 1)
            }
            if layout == .pretty { JSONValue.newline(&output, indent) }
            output += "}"
        }
    }

    private static func newline(_ output: inout String, _ indent: Int) {
        output += "\n"
        output += String(repeating: "  ", count: indent)
    }

    private static let hexDigits = Array("0123456789abcdef")

    private static func writeUnicodeEscape(_ unit: UInt16, to output: inout String) {
        output += "\\u"
        for shift in stride(from: 12, through: 0, by: -4) { output.append(hexDigits[Int(unit >> UInt16(shift)) & 0xF]) }
    }

    /// Whether any byte of `string` must be escaped: a quote, a backslash, a control character, U+2028 or U+2029
    /// (E2 80 A8/A9), or under `asciiOnly` anything not ASCII. One pass over the bytes, so that the common
    /// string (a name, base64) is appended whole.
    static func needsEscaping(_ string: String, asciiOnly: Bool) -> Bool {
        var string = string
        return string.withUTF8 { bytes in
            var index = 0
            while index < bytes.count {
                let byte = bytes[index]
                if byte < 0x20 || byte == 0x22 || byte == 0x5C { return true }
                if byte >= 0x80 {
                    if asciiOnly { return true }
                    if byte == 0xE2, index + 2 < bytes.count, bytes[index + 1] == 0x80, bytes[index + 2] & 0xFE == 0xA8
                    {
                        return true
                    }
                }
                index += 1
            }
            return false
        }
    }

    static func writeString(_ string: String, to output: inout String, asciiOnly: Bool) {
        // Runs of characters that need no escape are appended whole: appending scalar by scalar made
        // a 64 KiB bytes field (87 KB of base64) cost milliseconds.
        output.reserveCapacity(output.utf8.count + string.utf8.count + 2)
        output += "\""
        if !needsEscaping(string, asciiOnly: asciiOnly) {
            output += string
            output += "\""
            return
        }
        let scalars = string.unicodeScalars
        var runStart = scalars.startIndex
        var index = runStart
        while index != scalars.endIndex {
            let scalar = scalars[index]
            let escape: String?
            switch scalar.value {
            case 0x22: escape = "\\\""
            case 0x5C: escape = "\\\\"
            case 0x08: escape = "\\b"
            case 0x0C: escape = "\\f"
            case 0x0A: escape = "\\n"
            case 0x0D: escape = "\\r"
            case 0x09: escape = "\\t"
            case 0x00..<0x20, 0x2028, 0x2029: escape = ""
            case 0x80... where asciiOnly: escape = ""
            default: escape = nil
            }
            guard let escape else {
                index = scalars.index(after: index)
                continue
            }
            output += string[runStart..<index]
            if !escape.isEmpty {
                output += escape
            } else if scalar.value < 0x80 || scalar.value == 0x2028 || scalar.value == 0x2029 {
                writeUnicodeEscape(UInt16(scalar.value), to: &output)
            } else {
                for unit in String(scalar).utf16 { writeUnicodeEscape(unit, to: &output) }
            }
            index = scalars.index(after: index)
            runStart = index
        }
        output += string[runStart..<index]
        output += "\""
    }
}
