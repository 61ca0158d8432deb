import Schema

#if canImport(Glibc)
    import Glibc
#endif

/// The envelope's own codec: `RpcV1.Frame` written and read by hand, in the wire format protobuf-c writes (fields in
/// number order, proto3 defaults left out, `timeout_micros` by presence), so peers see the same bytes.
///
/// Every frame of every call passes through here, and the envelope is the one message whose payload is already
/// encoded: through protobuf-c it was copied into an arena and packed again on sending, and unpacked into an arena
/// and copied out again on receipt. By hand the payload is copied once each way — into the outbox, and out of the
/// decoder's buffer — with no arena and no C message (docs/performance.md counts the copies). Domain messages stay
/// protobuf-c's; a test holds this codec to protobuf-c's bytes both ways.
package enum FrameEnvelope {
    /// The envelope does not decode: the connection is broken, as when protobuf-c refused it.
    package struct DecodeError: Error, CustomStringConvertible {
        package let reason: String
        package var description: String { "menagerie.rpc.v1.Frame does not decode (\(reason))" }
    }

    // MARK: Encoding

    /// The encoded size of `frame`.
    package static func size(of frame: RpcV1.Frame) -> Int {
        headSize(of: frame) + frame.payload.count + tailSize(of: frame)
    }

    /// The size of the fields before the payload's bytes: fields 1–7, the payload's tag and length included (the
    /// fields are written in number order, and the payload is field 7).
    package static func headSize(of frame: RpcV1.Frame) -> Int {
        var size = 0
        if frame.callID != 0 { size += 1 + varintSize(frame.callID) }
        if frame.kind.rawValue != 0 { size += 1 + varintSize(UInt64(bitPattern: Int64(frame.kind.rawValue))) }
        if !frame.method.isEmpty { size += lengthDelimitedSize(frame.method.utf8.count) }
        if let timeout = frame.timeoutMicros { size += 1 + varintSize(timeout) }
        for entry in frame.metadata { size += lengthDelimitedSize(entrySize(entry)) }
        if frame.hasPayload { size += 2 }
        if !frame.payload.isEmpty { size += 1 + varintSize(UInt64(frame.payload.count)) }
        return size
    }

    /// The size of the fields after the payload's bytes (8–12).
    package static func tailSize(of frame: RpcV1.Frame) -> Int {
        var size = 0
        if frame.statusCode != 0 { size += 1 + varintSize(UInt64(frame.statusCode)) }
        if !frame.statusMessage.isEmpty { size += lengthDelimitedSize(frame.statusMessage.utf8.count) }
        if frame.clientStream { size += 2 }
        if frame.continues { size += 2 }
        if frame.windowIncrement != 0 { size += 1 + varintSize(UInt64(frame.windowIncrement)) }
        return size
    }

    /// Writes `frame` into `buffer`, which holds exactly `size(of: frame)` bytes.
    package static func encode(_ frame: RpcV1.Frame, into buffer: UnsafeMutableRawBufferPointer) {
        let head = headSize(of: frame)
        let tail = buffer.count - frame.payload.count - head
        encodeHead(frame, into: UnsafeMutableRawBufferPointer(rebasing: buffer[..<head]))
        frame.payload.withUnsafeBytes { payload in
            if let source = payload.baseAddress {
                (buffer.baseAddress! + head).copyMemory(from: source, byteCount: payload.count)
            }
        }
        encodeTail(frame, into: UnsafeMutableRawBufferPointer(rebasing: buffer[(buffer.count - tail)...]))
    }

    /// Writes the fields before the payload's bytes into `buffer`, which holds exactly `headSize(of: frame)` bytes:
    /// with `encodeTail`, for a writer that sends the payload's own bytes between them instead of copying them.
    package static func encodeHead(_ frame: RpcV1.Frame, into buffer: UnsafeMutableRawBufferPointer) {
        guard let base = buffer.baseAddress else { return }
        var writer = Writer(cursor: base, end: base + buffer.count)
        if frame.callID != 0 {
            writer.tag(1, .varint)
            writer.varint(frame.callID)
        }
        if frame.kind.rawValue != 0 {
            writer.tag(2, .varint)
            writer.varint(UInt64(bitPattern: Int64(frame.kind.rawValue)))
        }
        if !frame.method.isEmpty { writer.string(3, frame.method) }
        if let timeout = frame.timeoutMicros {
            writer.tag(4, .varint)
            writer.varint(timeout)
        }
        for entry in frame.metadata {
            writer.tag(5, .lengthDelimited)
            writer.varint(UInt64(entrySize(entry)))
            if !entry.key.isEmpty { writer.string(1, entry.key) }
            if !entry.value.isEmpty { writer.string(2, entry.value) }
        }
        if frame.hasPayload {
            writer.tag(6, .varint)
            writer.varint(1)
        }
        if !frame.payload.isEmpty {
            writer.tag(7, .lengthDelimited)
            writer.varint(UInt64(frame.payload.count))
        }
        precondition(
            writer.cursor == writer.end,
            "the envelope's head was sized \(buffer.count) bytes, \(writer.end - writer.cursor) left")
    }

    /// Writes the fields after the payload's bytes into `buffer`, which holds exactly `tailSize(of: frame)` bytes.
    package static func encodeTail(_ frame: RpcV1.Frame, into buffer: UnsafeMutableRawBufferPointer) {
        guard let base = buffer.baseAddress else { return }
        var writer = Writer(cursor: base, end: base + buffer.count)
        if frame.statusCode != 0 {
            writer.tag(8, .varint)
            writer.varint(UInt64(frame.statusCode))
        }
        if !frame.statusMessage.isEmpty { writer.string(9, frame.statusMessage) }
        if frame.clientStream {
            writer.tag(10, .varint)
            writer.varint(1)
        }
        if frame.continues {
            writer.tag(11, .varint)
            writer.varint(1)
        }
        if frame.windowIncrement != 0 {
            writer.tag(12, .varint)
            writer.varint(UInt64(frame.windowIncrement))
        }
        precondition(
            writer.cursor == writer.end,
            "the envelope's tail was sized \(buffer.count) bytes, \(writer.end - writer.cursor) left")
    }

    /// `frame` as bytes (frames held until a connection exists).
    package static func bytes(of frame: RpcV1.Frame) -> [UInt8] {
        let size = size(of: frame)
        return [UInt8](unsafeUninitializedCapacity: size) { buffer, count in
            if size > 0 { encode(frame, into: UnsafeMutableRawBufferPointer(buffer)) }
            count = size
        }
    }

    private static func entrySize(_ entry: RpcV1.MetadataEntry) -> Int {
        (entry.key.isEmpty ? 0 : lengthDelimitedSize(entry.key.utf8.count))
            + (entry.value.isEmpty ? 0 : lengthDelimitedSize(entry.value.utf8.count))
    }

    /// A one-byte tag (every field number here is under 16), the length and the bytes.
    private static func lengthDelimitedSize(_ count: Int) -> Int { 1 + varintSize(UInt64(count)) + count }

    private static func varintSize(_ value: UInt64) -> Int {
        // 7 bits a byte; 0 still takes one.
        (64 - (value | 1).leadingZeroBitCount + 6) / 7
    }

    enum WireType: UInt8 {
        case varint = 0, fixed64 = 1, lengthDelimited = 2, startGroup = 3, endGroup = 4, fixed32 = 5
    }

    private struct Writer {
        var cursor: UnsafeMutableRawPointer
        let end: UnsafeMutableRawPointer

        mutating func tag(_ field: UInt8, _ type: WireType) { byte(field << 3 | type.rawValue) }

        mutating func byte(_ value: UInt8) {
            precondition(cursor < end, "envelope overrun")
            cursor.storeBytes(of: value, as: UInt8.self)
            cursor += 1
        }

        mutating func varint(_ value: UInt64) {
            var value = value
            while value >= 0x80 {
                byte(UInt8(truncatingIfNeeded: value) | 0x80)
                value >>= 7
            }
            byte(UInt8(value))
        }

        mutating func bytes(_ source: UnsafeRawBufferPointer) {
            guard let base = source.baseAddress, !source.isEmpty else { return }
            precondition(end - cursor >= source.count, "envelope overrun")
            cursor.copyMemory(from: base, byteCount: source.count)
            cursor += source.count
        }

        mutating func string(_ field: UInt8, _ text: String) {
            tag(field, .lengthDelimited)
            var text = text
            text.withUTF8 { utf8 in
                varint(UInt64(utf8.count))
                bytes(UnsafeRawBufferPointer(utf8))
            }
        }
    }

    // MARK: Decoding

    /// Whether `bytes` hold a NUL: one `memchr`, where `Sequence.contains` stepped through them one generic element at
    /// a time (2 % of a small call's instructions on the server, for the method name alone).
    package static func containsNUL(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard let base = bytes.baseAddress, !bytes.isEmpty else { return false }
        return memchr(base, 0, bytes.count) != nil
    }

    /// Whether `text` holds a NUL (see `containsNUL(_:)`).
    package static func containsNUL(_ text: String) -> Bool {
        var text = text
        return text.withUTF8 { containsNUL(UnsafeRawBufferPointer($0)) }
    }

    /// Reads an envelope. A string with a NUL inside is refused (C code after us would cut the text there) unless
    /// `allowingNUL`, for a server that answers such a call itself with INVALID_ARGUMENT under its id. What protobuf-c
    /// accepts is accepted (unknown fields skipped, a repeated scalar's last value kept, an enum value this version
    /// does not know kept as such, a uint32 field's higher bits dropped) and what it refuses is refused.
    package static func decode(_ bytes: UnsafeRawBufferPointer, allowingNUL: Bool = false) throws(DecodeError)
        -> RpcV1.Frame
    {
        var frame = RpcV1.Frame()
        guard let base = bytes.baseAddress, !bytes.isEmpty else { return frame }
        var reader = Reader(cursor: base, end: base + bytes.count, allowingNUL: allowingNUL)
        while !reader.atEnd {
            let (field, type) = try reader.tag()
            switch (field, type) {
            case (1, .varint): frame.callID = try reader.varint()
            case (2, .varint): frame.kind = RpcV1.FrameKind(rawValue: Int32(truncatingIfNeeded: try reader.varint()))
            case (3, .lengthDelimited): frame.method = try reader.string()
            case (4, .varint): frame.timeoutMicros = try reader.varint()
            case (5, .lengthDelimited): frame.metadata.append(try reader.metadataEntry())
            case (6, .varint): frame.hasPayload = try reader.varint() != 0
            case (7, .lengthDelimited):
                let payload = try reader.lengthDelimited()
                frame.payload = [UInt8](payload)
            case (8, .varint): frame.statusCode = UInt32(truncatingIfNeeded: try reader.varint())
            case (9, .lengthDelimited): frame.statusMessage = try reader.string()
            case (10, .varint): frame.clientStream = try reader.varint() != 0
            case (11, .varint): frame.continues = try reader.varint() != 0
            case (12, .varint): frame.windowIncrement = UInt32(truncatingIfNeeded: try reader.varint())
            case (1...12, _): throw DecodeError(reason: "field \(field) has wire type \(type.rawValue)")
            default: try reader.skip(type)
            }
        }
        return frame
    }

    private struct Reader {
        var cursor: UnsafeRawPointer
        let end: UnsafeRawPointer
        let allowingNUL: Bool

        var atEnd: Bool { cursor >= end }

        /// A field's key as protobuf-c reads it: at most 5 bytes, kept to 32 bits (a field number past 2²⁹ − 1 wraps
        /// round to an unknown field, skipped, rather than failing the frame).
        mutating func tag() throws(DecodeError) -> (field: UInt64, type: WireType) {
            var key: UInt32 = 0
            for shift in stride(from: UInt32(0), to: 35, by: 7) {
                guard cursor < end else { throw DecodeError(reason: "a field's key runs past the end") }
                let byte = cursor.load(as: UInt8.self)
                cursor += 1
                key |= UInt32(byte & 0x7F) << shift
                if byte < 0x80 { break }
                if shift == 28 { throw DecodeError(reason: "a field's key longer than 5 bytes") }
            }
            let field = UInt64(key >> 3)
            guard field != 0 else { throw DecodeError(reason: "field number 0") }
            guard let type = WireType(rawValue: UInt8(key & 7)), type != .startGroup, type != .endGroup else {
                throw DecodeError(reason: "field \(field) has wire type \(key & 7)")
            }
            return (field, type)
        }

        mutating func varint() throws(DecodeError) -> UInt64 {
            var value: UInt64 = 0
            for shift in stride(from: UInt64(0), to: 70, by: 7) {
                guard cursor < end else { throw DecodeError(reason: "a varint runs past the end") }
                let byte = cursor.load(as: UInt8.self)
                cursor += 1
                value |= UInt64(byte & 0x7F) << shift
                if byte < 0x80 { return value }
            }
            throw DecodeError(reason: "a varint longer than 10 bytes")
        }

        mutating func lengthDelimited() throws(DecodeError) -> UnsafeRawBufferPointer {
            let length = try varint()
            guard length <= UInt64(end - cursor) else {
                throw DecodeError(reason: "a field of \(length) bytes runs past the end")
            }
            let field = UnsafeRawBufferPointer(start: cursor, count: Int(length))
            cursor += Int(length)
            return field
        }

        mutating func string() throws(DecodeError) -> String {
            let bytes = try lengthDelimited()
            if !allowingNUL, FrameEnvelope.containsNUL(bytes) {
                throw DecodeError(reason: "a string field contains a NUL character")
            }
            return String(decoding: bytes, as: UTF8.self)
        }

        mutating func skip(_ type: WireType) throws(DecodeError) {
            switch type {
            case .varint: _ = try varint()
            case .lengthDelimited: _ = try lengthDelimited()
            case .fixed64, .fixed32:
                let width = type == .fixed64 ? 8 : 4
                guard end - cursor >= width else { throw DecodeError(reason: "a fixed field runs past the end") }
                cursor += width
            case .startGroup, .endGroup: throw DecodeError(reason: "groups are not proto3")
            }
        }

        mutating func metadataEntry() throws(DecodeError) -> RpcV1.MetadataEntry {
            let bytes = try lengthDelimited()
            var entry = RpcV1.MetadataEntry()
            guard let base = bytes.baseAddress, !bytes.isEmpty else { return entry }
            var inner = Reader(cursor: base, end: base + bytes.count, allowingNUL: allowingNUL)
            while !inner.atEnd {
                let (field, type) = try inner.tag()
                switch (field, type) {
                case (1, .lengthDelimited): entry.key = try inner.string()
                case (2, .lengthDelimited): entry.value = try inner.string()
                case (1...2, _): throw DecodeError(reason: "metadata field \(field) has wire type \(type.rawValue)")
                default: try inner.skip(type)
                }
            }
            return entry
        }
    }
}

extension RpcV1.Frame {
    /// Decodes a frame's envelope keeping NULs inside its strings, so that a server can answer a call whose method
    /// or metadata has one with INVALID_ARGUMENT under its id instead of failing the whole connection.
    package init(envelopeKeepingNUL bytes: UnsafeRawBufferPointer) throws {
        self = try FrameEnvelope.decode(bytes, allowingNUL: true)
    }

    /// Decodes a frame's envelope (see `FrameEnvelope`).
    package init(envelope bytes: UnsafeRawBufferPointer) throws {
        self = try FrameEnvelope.decode(bytes)
    }
}
