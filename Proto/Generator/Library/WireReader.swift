/// A minimal protobuf wire-format reader: just enough to walk a `FileDescriptorSet`.
struct WireReader {
    /// One field record: its number, its value and the exact bytes it occupied (tag included).
    struct Record {
        enum Value {
            case varint(UInt64)
            case fixed64(UInt64)
            case lengthDelimited(ArraySlice<UInt8>)
            case fixed32(UInt32)
        }

        let number: Int
        let value: Value
        let raw: ArraySlice<UInt8>

        /// The varint payload, or a `GeneratorError` naming `context` when the record has another wire type.
        func varint(_ context: String) throws -> UInt64 {
            guard case .varint(let value) = value else { throw GeneratorError.malformedDescriptor(context) }
            return value
        }

        /// The length-delimited payload, or a `GeneratorError` naming `context`.
        func bytes(_ context: String) throws -> ArraySlice<UInt8> {
            guard case .lengthDelimited(let bytes) = value else { throw GeneratorError.malformedDescriptor(context) }
            return bytes
        }

        /// The payload decoded as UTF-8 text.
        func string(_ context: String) throws -> String {
            String(decoding: try bytes(context), as: UTF8.self)
        }
    }

    private let bytes: ArraySlice<UInt8>
    private var index: Int

    init(_ bytes: ArraySlice<UInt8>) {
        self.bytes = bytes
        self.index = bytes.startIndex
    }

    /// Reads every record of the message.
    static func records(_ bytes: ArraySlice<UInt8>) throws -> [Record] {
        var reader = WireReader(bytes)
        var records: [Record] = []
        while let record = try reader.next() { records.append(record) }
        return records
    }

    /// Decodes the payload of a packed repeated varint field.
    static func packedVarints(_ bytes: ArraySlice<UInt8>) throws -> [UInt64] {
        var reader = WireReader(bytes)
        var values: [UInt64] = []
        while reader.index < bytes.endIndex { values.append(try reader.readVarint()) }
        return values
    }

    /// The next record, or nil at the end of the message.
    mutating func next() throws -> Record? {
        guard index < bytes.endIndex else { return nil }
        let start = index
        let tag = try readVarint()
        guard tag >> 3 > 0, tag >> 3 <= UInt64(Int32.max) else {
            throw GeneratorError.malformedDescriptor("field number out of range")
        }
        let value: Record.Value
        switch tag & 7 {
        case 0: value = .varint(try readVarint())
        case 1: value = .fixed64(try readLittleEndian(8))
        case 2:
            let length = try readVarint()
            guard length <= UInt64(bytes.endIndex - index) else {
                throw GeneratorError.malformedDescriptor("length-delimited field overruns its message")
            }
            let end = index + Int(length)
            value = .lengthDelimited(bytes[index..<end])
            index = end
        case 5: value = .fixed32(UInt32(try readLittleEndian(4)))
        default: throw GeneratorError.malformedDescriptor("unsupported wire type \(tag & 7)")
        }
        return Record(number: Int(tag >> 3), value: value, raw: bytes[start..<index])
    }

    private mutating func readVarint() throws -> UInt64 {
        var result: UInt64 = 0
        var shift: UInt64 = 0
        while index < bytes.endIndex, shift < 64 {
            let byte = bytes[index]
            index += 1
            result |= UInt64(byte & 0x7f) << shift
            if byte & 0x80 == 0 { return result }
            shift += 7
        }
        throw GeneratorError.malformedDescriptor("truncated or overlong varint")
    }

    private mutating func readLittleEndian(_ count: Int) throws -> UInt64 {
        guard bytes.endIndex - index >= count else {
            throw GeneratorError.malformedDescriptor("truncated fixed-width field")
        }
        var result: UInt64 = 0
        for offset in 0..<count { result |= UInt64(bytes[index + offset]) << (8 * UInt64(offset)) }
        index += count
        return result
    }
}

/// Appends `value` as a protobuf varint.
func appendVarint(_ value: UInt64, to output: inout [UInt8]) {
    var value = value
    while value >= 0x80 {
        output.append(UInt8(truncatingIfNeeded: value) | 0x80)
        value >>= 7
    }
    output.append(UInt8(value))
}
