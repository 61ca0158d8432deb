/// gRPC's length-prefixed message framing: 1 flag byte (0: uncompressed, the only kind we speak),
/// a 4-byte big-endian length, then that many bytes of envelope.
public enum FrameCodec {
    public static let headerSize = 5
    /// Default largest envelope a peer may send: 16 MiB.
    public static let defaultMaxFrameSize = 16 << 20

    /// Prefixes `envelope` with its frame header.
    public static func encode(_ envelope: [UInt8]) -> [UInt8] {
        var frame = [UInt8](repeating: 0, count: headerSize)
        frame.withUnsafeMutableBytes { writeHeader(length: envelope.count, to: $0.baseAddress!) }
        frame.append(contentsOf: envelope)
        return frame
    }

    /// Writes the 5 header bytes for an envelope of `length` bytes at `destination`.
    static func writeHeader(length: Int, to destination: UnsafeMutableRawPointer) {
        let length = UInt32(length)
        destination.storeBytes(of: 0, as: UInt8.self)
        destination.storeBytes(of: length.bigEndian, toByteOffset: 1, as: UInt32.self)
    }
}

/// Why a byte stream cannot be read as frames; the connection is closed with this reason.
public enum FrameError: Error, Equatable, CustomStringConvertible {
    case unsupportedFlags(UInt8)
    case tooLarge(length: Int, limit: Int)

    public var description: String {
        switch self {
        case .unsupportedFlags(let flags): "frame flag byte 0x\(String(flags, radix: 16)) is not supported (only 0: uncompressed)"
        case .tooLarge(let length, let limit): "frame of \(length) bytes exceeds the limit of \(limit) bytes"
        }
    }
}

/// Cuts a byte stream into frames, however the bytes arrive (one at a time or many frames at once).
public struct FrameDecoder {
    public let maxFrameSize: Int
    private var buffer: [UInt8] = []
    private var start = 0

    public init(maxFrameSize: Int = FrameCodec.defaultMaxFrameSize) {
        self.maxFrameSize = maxFrameSize
    }

    /// Whether bytes of an unfinished frame are waiting for the rest.
    public var hasPartialFrame: Bool { buffer.count > start }

    /// Bytes received but not yet returned as frames.
    public var bufferedByteCount: Int { buffer.count - start }

    public mutating func append(_ bytes: UnsafeRawBufferPointer) {
        if start > 0, start == buffer.count {
            buffer.removeAll(keepingCapacity: true)
            start = 0
        } else if start > 65_536, start * 2 > buffer.count {
            buffer.removeSubrange(0..<start)
            start = 0
        }
        buffer.append(contentsOf: bytes)
    }

    public mutating func append(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { append($0) }
    }

    /// The next complete frame's envelope bytes, nil until one is complete; throws as soon as a
    /// header is invalid (before its body arrives).
    public mutating func next() throws(FrameError) -> [UInt8]? {
        guard buffer.count - start >= FrameCodec.headerSize else { return nil }
        let flags = buffer[start]
        guard flags == 0 else { throw .unsupportedFlags(flags) }
        let length = Int(buffer[start + 1]) << 24 | Int(buffer[start + 2]) << 16
            | Int(buffer[start + 3]) << 8 | Int(buffer[start + 4])
        guard length <= maxFrameSize else { throw .tooLarge(length: length, limit: maxFrameSize) }
        let bodyStart = start + FrameCodec.headerSize
        guard buffer.count - bodyStart >= length else {
            buffer.reserveCapacity(bodyStart + length)
            return nil
        }
        start = bodyStart + length
        return Array(buffer[bodyStart..<start])
    }
}
