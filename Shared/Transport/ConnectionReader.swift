import Base

/// The protocol layer of a connection: what reads the bytes its `ByteStream` receives. Our binary
/// framing is one (`FrameReader`); the server's first reader picks the protocol (`ProtocolSniffer`),
/// so HTTP later is one more reader on the same connections and port. A stream that transforms
/// bytes (TLS) is its inner stream's reader and forwards these to its own. Loop thread only.
package protocol ConnectionReader: AnyObject {
    /// Bytes arrived; they are valid only during the call.
    func received(_ bytes: UnsafeRawBufferPointer)
    /// Whether reads feed one large message (a large frame): such reads share the loop's bulk budget.
    var readsInBulk: Bool { get }
    /// Bytes of the server's memory budget this reader holds (a large frame arriving).
    var budgetedBytes: Int { get }
    /// The connection lingers or closes: what it holds of the memory budget goes back.
    func releaseBudget()
    /// Memory the next read may fill directly, when this reader would only copy what arrives there (the rest of a
    /// large frame); the read then ends in `receivedInPlace` instead of `received`. Nil: read into the loop's buffer.
    func readDestination() -> UnsafeMutableRawBufferPointer?
    /// `count` bytes were read into the memory `readDestination` gave.
    func receivedInPlace(_ count: Int)
}

extension ConnectionReader {
    package func readDestination() -> UnsafeMutableRawBufferPointer? { nil }
    package func receivedInPlace(_ count: Int) { preconditionFailure("\(Self.self) gives no read destination") }
}

/// Our binary framing on a byte stream: cuts it into frames (`FrameDecoder`), asks the server's
/// memory budget before making room for a large one, and remembers when frames came, which the
/// server's sweeper reads to tell a stalled or idle client. Generic over its stream, so that
/// checking the stream between frames is a direct call.
package final class FrameReader<Stream: ByteStream>: ConnectionReader {
    private unowned let connection: Stream
    private let decoder: FrameDecoder
    /// A complete frame's envelope bytes arrived; they are valid only during the call.
    package var onFrame: ((UnsafeRawBufferPointer) -> Void)?
    /// The frames of one read were handed to `onFrame`.
    var onFramesEnd: (() -> Void)?
    /// The byte stream broke framing; the connection closes right after, unless this has it close
    /// once flushed (`close(afterFlushing:)`).
    var onFrameError: ((FrameError) -> Void)?
    /// When the last complete frame arrived, and since when bytes of an unfinished one have waited.
    private(set) var lastFrameAt: ContinuousClock.Instant?
    private(set) var partialFrameSince: ContinuousClock.Instant?
    package private(set) var budgetedBytes = 0

    /// A reader of `connection`'s frames; it reads once it is the connection's `reader`. A
    /// connection with a memory budget (a server's) must have it before this is made.
    init(_ connection: Stream, maxFrameSize: Int) {
        self.connection = connection
        decoder = FrameDecoder(maxFrameSize: maxFrameSize)
        if let budget = connection.budget {
            decoder.admitLargeFrame = { [unowned self] length in
                guard budget.reserve(length) else { return false }
                budgetedBytes = length
                return true
            }
        }
    }

    package var readsInBulk: Bool { decoder.isReceivingLargeFrame }

    package func releaseBudget() {
        guard budgetedBytes > 0 else { return }
        connection.budget?.release(budgetedBytes)
        budgetedBytes = 0
    }

    package func received(_ bytes: UnsafeRawBufferPointer) {
        decoder.append(bytes)
        cutFrames()
    }

    /// The rest of a large frame is read straight into the decoder's buffer, where it was reserved: one copy of a
    /// 64 KiB payload less on its way in (from the loop's read buffer into the decoder's).
    package func readDestination() -> UnsafeMutableRawBufferPointer? {
        decoder.roomForRestOfFrame(atLeast: Self.smallestDirectRead)
    }

    package func receivedInPlace(_ count: Int) {
        decoder.didAppendInPlace(count)
        cutFrames()
    }

    /// Below this many bytes of a frame still to come, reads go to the loop's buffer: one read may then carry this
    /// frame's end and many small frames after it, and copying a few KiB costs less than a second read.
    static var smallestDirectRead: Int { 16 * 1024 }

    private func cutFrames() {
        var frames = 0
        defer { if frames > 0 { onFramesEnd?() } }
        do {
            defer { if frames > 0 { lastFrameAt = .now } }
            while !connection.isClosed, !connection.isClosing, let envelope = try decoder.nextEnvelope() {
                frames += 1
                releaseBudget()
                onFrame?(envelope)
            }
        } catch {
            onFrameError?(error)
            if !connection.isClosing { connection.close(reason: error.description) }
            return
        }
        if decoder.hasPartialFrame {
            // After a complete frame, what waits is the beginning of the next one.
            if partialFrameSince == nil || frames > 0 { partialFrameSince = .now }
        } else {
            partialFrameSince = nil
        }
    }
}

extension ByteStream {
    /// Reads this stream as our frames from now on (clients, and the raw benchmark floor);
    /// returns the reader, whose `onFrame` gets them.
    package func readFrames(maxFrameSize: Int = FrameCodec.defaultMaxFrameSize) -> FrameReader<Self> {
        let frames = FrameReader(self, maxFrameSize: maxFrameSize)
        reader = frames
        return frames
    }
}

/// The server's first reader on every connection: picks the protocol from the first byte, hands
/// the connection to it, and gives it that byte and the rest.
///
/// One byte tells them apart: our frames begin with their flag byte, 0x00; a TLS connection with a
/// handshake record, 0x16; HTTP/1.1 with a method name, and HTTP/2 with its preface (`PRI * HTTP/2.0`),
/// both ASCII capitals. Our frames and HTTP/1.1 (the Connect protocol, `ConnectServerConnection`) are
/// served, and TLS when the server has certificates (`TLSStream`); without them a TLS client gets a
/// fatal alert and a clean close, so it neither waits for a frame timeout nor reads garbage. Any other
/// byte is handed to our framing, which answers it as the protocol error it is.
final class ProtocolSniffer: ConnectionReader {
    /// What a connection's first byte says it speaks.
    enum Kind: Equatable {
        case frames, http, tls

        init(firstByte: UInt8) {
            switch firstByte {
            case 0x16: self = .tls
            case UInt8(ascii: "A")...UInt8(ascii: "Z"): self = .http
            default: self = .frames
            }
        }
    }

    /// Made once per connection, so the stream's type is erased here without cost to any frame.
    private unowned let connection: any ByteStream
    /// Gives the connection to the protocol of `kind`: makes it the connection's `reader`, or answers
    /// and closes it. Bytes go to the new reader, if any, when it returns.
    private let pick: (Kind) -> Void

    init(_ connection: any ByteStream, pick: @escaping (Kind) -> Void) {
        self.connection = connection
        self.pick = pick
    }

    var readsInBulk: Bool { false }
    var budgetedBytes: Int { 0 }
    func releaseBudget() {}

    func received(_ bytes: UnsafeRawBufferPointer) {
        guard let first = bytes.first else { return }
        // `pick` replaces this reader, whose last reference the connection held.
        withExtendedLifetime(self) { pick(Kind(firstByte: first)) }
        guard let next = connection.reader, next !== self, !connection.isClosing, !connection.isClosed else { return }
        next.received(bytes)
    }

    /// What a TLS client gets: a fatal `handshake_failure` alert (RFC 8446 §6) in a TLS 1.0 record,
    /// which every TLS version reads before a handshake, so the client reports a failed handshake.
    static let tlsNotServed: [UInt8] = [0x15, 0x03, 0x01, 0x00, 0x02, 0x02, 0x28]
}
