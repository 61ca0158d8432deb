import Base
import TCP

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
    package static func writeHeader(length: Int, to destination: UnsafeMutableRawPointer) {
        let length = UInt32(length)
        destination.storeBytes(of: 0, as: UInt8.self)
        destination.storeBytes(of: length.bigEndian, toByteOffset: 1, as: UInt32.self)
    }
}

/// Why a byte stream cannot be read as frames; the connection is closed with this reason.
public enum FrameError: Error, Equatable, CustomStringConvertible {
    case unsupportedFlags(UInt8)
    case tooLarge(length: Int, limit: Int)
    /// A large frame that the server's memory budget cannot hold now.
    case overBudget(length: Int)

    public var description: String {
        switch self {
        case .unsupportedFlags(let flags):
            "frame flag byte 0x\(String(flags, radix: 16)) is not supported (only 0: uncompressed)"
        case .tooLarge(let length, let limit): "frame of \(length) bytes exceeds the limit of \(limit) bytes"
        case .overBudget(let length):
            "frame of \(length) bytes refused: the server's memory budget for buffered frames and answers is exhausted"
        }
    }
}

/// Cuts a byte stream into frames, however the bytes arrive (one at a time or many frames at once).
/// Frames are handed out as views into its own buffer, so a frame is copied once on its way in.
public final class FrameDecoder {
    public let maxFrameSize: Int
    /// An empty buffer larger than this is given back.
    private static let largestKept = 256 * 1024
    private var base: UnsafeMutableRawPointer?
    private var capacity = 0
    /// Bytes `start..<end` of the buffer are received and not yet handed out.
    private var start = 0
    private var end = 0

    /// Asked once per frame of `MemoryBudget.largeFrame` bytes or more, when its header arrived and
    /// before any room is made for it: false refuses it (`FrameError.overBudget`).
    package var admitLargeFrame: ((Int) -> Bool)?
    /// The frame being received was admitted already.
    private var admitted = false

    public init(maxFrameSize: Int = FrameCodec.defaultMaxFrameSize) {
        self.maxFrameSize = maxFrameSize
    }

    deinit { if let base { LargeBuffers.deallocate(base, capacity: capacity) } }

    /// Whether bytes of an unfinished frame are waiting for the rest.
    public var hasPartialFrame: Bool { end > start }

    /// A frame of `MemoryBudget.largeFrame` bytes or more has begun and is not complete.
    package var isReceivingLargeFrame: Bool {
        guard let (_, length) = nextHeader else { return false }
        return length >= MemoryBudget.largeFrame && end - start < FrameCodec.headerSize + length
    }

    /// The flag byte and envelope length of the next frame, once its header arrived.
    private var nextHeader: (flags: UInt8, length: Int)? {
        guard end - start >= FrameCodec.headerSize, let base else { return nil }
        let header = UnsafeRawPointer(base + start)
        return (
            header.load(as: UInt8.self),
            Int(UInt32(bigEndian: header.loadUnaligned(fromByteOffset: 1, as: UInt32.self)))
        )
    }

    /// Bytes received but not yet returned as frames.
    public var bufferedByteCount: Int { end - start }

    public func append(_ bytes: UnsafeRawBufferPointer) {
        guard let source = bytes.baseAddress, !bytes.isEmpty else { return }
        reserve(bytes.count)
        (base! + end).copyMemory(from: source, byteCount: bytes.count)
        end += bytes.count
    }

    public func append(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { append($0) }
    }

    /// The memory where the rest of the frame being received goes, when its header arrived, `minimum` bytes or more
    /// of it are still to come and room for them is reserved (`nextEnvelope` reserves it once the header is read): a
    /// reader may read them straight into it and call `didAppendInPlace`. No more than the frame's rest, so that what
    /// follows it arrives by `append` and a read never runs past the frame's end in this buffer.
    public func roomForRestOfFrame(atLeast minimum: Int) -> UnsafeMutableRawBufferPointer? {
        guard let (_, length) = nextHeader, let base else { return nil }
        let rest = FrameCodec.headerSize + length - (end - start)
        guard rest >= minimum, capacity - end >= rest else { return nil }
        return UnsafeMutableRawBufferPointer(start: base + end, count: rest)
    }

    /// `count` bytes were written at the start of `roomForRestOfFrame`'s memory.
    public func didAppendInPlace(_ count: Int) {
        precondition(count >= 0 && end + count <= capacity, "read past the decoder's buffer")
        end += count
    }

    /// The next complete frame's envelope, viewed in place: valid until the next `append`. Nil until
    /// one is complete; throws as soon as a header is invalid (before its body arrives).
    public func nextEnvelope() throws(FrameError) -> UnsafeRawBufferPointer? {
        guard let (flags, length) = nextHeader else { return nil }
        guard flags == 0 else { throw .unsupportedFlags(flags) }
        guard length <= maxFrameSize else { throw .tooLarge(length: length, limit: maxFrameSize) }
        let frameSize = FrameCodec.headerSize + length
        guard end - start >= frameSize else {
            if !admitted, length >= MemoryBudget.largeFrame, let admit = admitLargeFrame {
                guard admit(length) else { throw .overBudget(length: length) }
                admitted = true
            }
            // Make room for the whole frame now, so its body arrives without regrowing.
            reserve(frameSize - (end - start))
            return nil
        }
        let envelope = UnsafeRawBufferPointer(start: base! + start + FrameCodec.headerSize, count: length)
        start += frameSize
        admitted = false
        return envelope
    }

    /// The next complete frame's envelope as an array (a copy); see `nextEnvelope()`.
    public func next() throws(FrameError) -> [UInt8]? {
        try nextEnvelope().map { Array($0) }
    }

    /// Ensures `extra` more bytes fit after `end`, moving unread bytes to the front or growing.
    private func reserve(_ extra: Int) {
        if start == end {
            start = 0
            end = 0
            if capacity > Self.largestKept, extra <= Self.largestKept {
                // A big frame went through; don't hold on to its buffer.
                if let base { LargeBuffers.deallocate(base, capacity: capacity) }
                base = nil
                capacity = 0
            }
        }
        guard end + extra > capacity else { return }
        let unread = end - start
        if unread + extra <= capacity, let base {
            base.copyMemory(from: base + start, byteCount: unread)
        } else {
            let newCapacity = max(unread + extra, capacity * 2, 16 * 1024)
            let newBase = UnsafeMutableRawPointer.allocate(byteCount: newCapacity, alignment: 16)
            if let base {
                newBase.copyMemory(from: base + start, byteCount: unread)
                LargeBuffers.deallocate(base, capacity: capacity)
            }
            base = newBase
            capacity = newCapacity
        }
        start = 0
        end = unread
    }
}
