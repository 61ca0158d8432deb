/// dqlite's wire format (protocol version 1), as go-dqlite speaks it: every message is an 8-byte header
/// (body length in 8-byte words: UInt32; type: UInt8; schema: UInt8; two unused bytes) and a body of 8-byte
/// words. Integers are little-endian; a string is its bytes, a NUL and zeros up to the next word; a blob is its
/// length (UInt64) and its bytes padded to a word.
enum WireType {
    // Requests.
    static let leader: UInt8 = 0
    static let client: UInt8 = 1
    static let open: UInt8 = 3
    static let prepare: UInt8 = 4
    static let exec: UInt8 = 5
    static let query: UInt8 = 6
    static let finalize: UInt8 = 7
    static let execSQL: UInt8 = 8
    static let querySQL: UInt8 = 9
    static let add: UInt8 = 12
    static let assign: UInt8 = 13
    static let remove: UInt8 = 14
    static let cluster: UInt8 = 16
    static let transfer: UInt8 = 17
    // Responses.
    static let failure: UInt8 = 0
    static let node: UInt8 = 1
    static let welcome: UInt8 = 2
    static let nodes: UInt8 = 3
    static let db: UInt8 = 4
    static let stmt: UInt8 = 5
    static let result: UInt8 = 6
    static let rows: UInt8 = 7
    static let empty: UInt8 = 8

    static func name(ofResponse type: UInt8) -> String {
        switch type {
        case failure: "FAILURE"
        case node: "NODE"
        case welcome: "WELCOME"
        case nodes: "NODES"
        case db: "DB"
        case stmt: "STMT"
        case result: "RESULT"
        case rows: "ROWS"
        case empty: "EMPTY"
        default: "type \(type)"
        }
    }
}

/// The column type codes of a row header and of bound parameters.
enum WireValueType {
    static let integer: UInt8 = 1
    static let float: UInt8 = 2
    static let text: UInt8 = 3
    static let blob: UInt8 = 4
    static let null: UInt8 = 5
    static let unixTime: UInt8 = 9
    static let iso8601: UInt8 = 10
    static let boolean: UInt8 = 11
}

let wordSize = 8

/// Builds one request body, word-aligned.
struct WireEncoder {
    private(set) var body: [UInt8] = []

    mutating func uint8(_ value: UInt8) { body.append(value) }

    mutating func uint32(_ value: UInt32) { withUnsafeBytes(of: value.littleEndian) { body += $0 } }

    mutating func uint64(_ value: UInt64) { withUnsafeBytes(of: value.littleEndian) { body += $0 } }

    mutating func int64(_ value: Int64) { uint64(UInt64(bitPattern: value)) }

    mutating func double(_ value: Double) { uint64(value.bitPattern) }

    mutating func string(_ value: String) {
        body += value.utf8
        body.append(0)
        pad()
    }

    mutating func blob(_ value: [UInt8]) {
        uint64(UInt64(value.count))
        body += value
        pad()
    }

    /// Zeros up to the next word boundary.
    mutating func pad() {
        let trailing = body.count % wordSize
        if trailing != 0 { body += repeatElement(0, count: wordSize - trailing) }
    }

    /// Parameters in schema 0: nothing when there are none, else a count byte, a type byte each, padding, and
    /// the values. A string with a NUL inside would be cut by the server, so it is refused here.
    mutating func parameters(_ values: [DqliteValue]) throws(DqliteError) {
        guard !values.isEmpty else { return }
        guard values.count <= 255 else {
            throw DqliteError(.misuse, "dqlite takes at most 255 parameters per statement, \(values.count) given")
        }
        uint8(UInt8(values.count))
        for value in values {
            switch value {
            case .null: uint8(WireValueType.null)
            case .integer: uint8(WireValueType.integer)
            case .real: uint8(WireValueType.float)
            case .text: uint8(WireValueType.text)
            case .blob: uint8(WireValueType.blob)
            }
        }
        pad()
        for value in values {
            switch value {
            case .null: uint64(0)
            case .integer(let integer): int64(integer)
            case .real(let real): double(real)
            case .text(let text):
                guard !text.utf8.contains(0) else {
                    throw DqliteError(.misuse, "dqlite cannot carry text with a NUL character; bind it as a blob")
                }
                string(text)
            case .blob(let bytes): blob(bytes)
            }
        }
    }

    /// Header and body, ready to send.
    func message(type: UInt8, schema: UInt8 = 0) -> [UInt8] {
        precondition(body.count % wordSize == 0 && !body.isEmpty, "a dqlite request body is whole, non-empty words")
        var header = WireEncoder()
        header.uint32(UInt32(body.count / wordSize))
        header.uint8(type)
        header.uint8(schema)
        header.uint8(0)
        header.uint8(0)
        return header.body + body
    }
}

/// Reads one response body; running past its end is a protocol violation, not a crash.
struct WireDecoder {
    let type: UInt8
    let body: [UInt8]
    private(set) var offset = 0

    init(type: UInt8, body: [UInt8]) {
        self.type = type
        self.body = body
    }

    var isAtEnd: Bool { offset >= body.count }

    private mutating func take(_ count: Int) throws(DqliteError) -> ArraySlice<UInt8> {
        guard count >= 0, body.count - offset >= count else {
            throw DqliteError(.protocolViolation, "a \(WireType.name(ofResponse: type)) response ended early")
        }
        defer { offset += count }
        return body[offset..<offset + count]
    }

    mutating func uint8() throws(DqliteError) -> UInt8 { try take(1).first! }

    mutating func peekUInt8() throws(DqliteError) -> UInt8 {
        guard offset < body.count else {
            throw DqliteError(.protocolViolation, "a \(WireType.name(ofResponse: type)) response ended early")
        }
        return body[offset]
    }

    mutating func uint32() throws(DqliteError) -> UInt32 {
        try take(4).reversed().reduce(0) { $0 << 8 | UInt32($1) }
    }

    mutating func uint64() throws(DqliteError) -> UInt64 {
        try take(8).reversed().reduce(0) { $0 << 8 | UInt64($1) }
    }

    mutating func int64() throws(DqliteError) -> Int64 { Int64(bitPattern: try uint64()) }

    mutating func double() throws(DqliteError) -> Double { Double(bitPattern: try uint64()) }

    mutating func string() throws(DqliteError) -> String {
        guard let end = body[offset...].firstIndex(of: 0) else {
            throw DqliteError(
                .protocolViolation, "a string in a \(WireType.name(ofResponse: type)) response has no end")
        }
        let text = String(decoding: body[offset..<end], as: UTF8.self)
        offset = end + 1
        skipPadding()
        return text
    }

    mutating func blob() throws(DqliteError) -> [UInt8] {
        let count = try uint64()
        guard count <= UInt64(body.count - offset) else {
            throw DqliteError(.protocolViolation, "a blob of \(count) bytes in a response of \(body.count)")
        }
        let bytes = Array(try take(Int(count)))
        skipPadding()
        return bytes
    }

    mutating func skipPadding() {
        let trailing = offset % wordSize
        if trailing != 0 { offset = min(body.count, offset + wordSize - trailing) }
    }
}
