import Base

/// The byte-stream layer of a connection: ordered bytes both ways, with back-pressure, under the
/// protocol that reads them (its `reader`: our frames or HTTP, picked by `ProtocolSniffer`).
/// `TCPConnection` is one; `TLSStream` wraps one (OpenSSL memory BIOs under the same libuv reads and
/// writes): the TCP connection's reader, it decrypts what arrives and hands the plaintext to its own
/// reader, and encrypts what it is sent, so the same readers and the same `ServerCallTable` serve it
/// unchanged.
///
/// Readers and protocol connections are generic over their stream, so each stream's code is
/// specialised and reading a frame makes no dynamic call; the server core's call table holds its
/// connection's stream as `any ByteStream` (it knows no protocol and no stream type), and the
/// listener and the sniffer see one so, once per connection.
///
/// Everything but `send` and `unwrittenBytes` runs on the loop thread.
package protocol ByteStream: AnyObject, Sendable {
    /// The loop whose thread reads and writes this stream.
    var loop: EventLoop { get }
    /// `host:port` of the other side.
    var peer: String { get }
    /// The protocol reading this stream's bytes; they go to whichever reader is current when they
    /// arrive, and the stream drops its reader when it closes.
    var reader: (any ConnectionReader)? { get set }
    /// The server's budget for bytes its clients make it hold; nil on client connections.
    var budget: MemoryBudget? { get }
    var isClosed: Bool { get }
    /// Being closed once flushed (`close(afterFlushing:)`): a reader takes no more from it.
    var isClosing: Bool { get }

    /// Queues `size` bytes, which `write` puts straight where they wait to be written (no copy in
    /// between); safe from any thread. `write` may run under a lock: keep it to copying or packing
    /// bytes. A `sealing` write is the last: nothing queued after it is sent (a connection-level
    /// error). Dropped once the stream closed.
    func send(bytesOfSize size: Int, sealing: Bool, _ write: (UnsafeMutableRawBufferPointer) -> Void)
    /// Queues `headSize` bytes that `writeHead` fills in, then `body`, then `tailSize` bytes that `writeTail` fills in, as
    /// one write (see `send(bytesOfSize:sealing:_:)`). A stream that can hands a large `body` to the socket as it is,
    /// holding a reference until it is written, instead of copying it into its outbox (a vectored write): a message's
    /// payload or a cached HTTP body is then not copied at all on its way out. Safe from any thread.
    func send(
        headOfSize headSize: Int, body: [UInt8], tailOfSize tailSize: Int, sealing: Bool,
        _ writeHead: (UnsafeMutableRawBufferPointer) -> Void, _ writeTail: (UnsafeMutableRawBufferPointer) -> Void)
    /// Bytes handed to `send` and not yet written; any thread.
    var unwrittenBytes: Int { get }
    /// Unwritten bytes above which the protocol stops reading and makes streaming handlers wait, and
    /// below which `onDrain` tells it to go on.
    var highWater: Int { get }
    var lowWater: Int { get }
    /// Unwritten bytes fell below `lowWater`.
    var onDrain: (() -> Void)? { get set }

    /// Stops delivering bytes (back-pressure: the peer's bytes wait in its socket buffer), until
    /// `resumeReading`.
    func pauseReading()
    func resumeReading()
    /// Closes once everything queued has been written, lingering so that the peer reads it (see
    /// `TCPConnection.lingerTime`).
    func close(afterFlushing reason: String)
    /// Closes now; writes still queued are dropped. Idempotent.
    func close(reason: String)
}

extension ByteStream {
    /// Copies `body` between head and tail into one contiguous write: streams that transform their bytes (TLS seals
    /// them into records) have nothing to gain from a reference.
    package func send(
        headOfSize headSize: Int, body: [UInt8], tailOfSize tailSize: Int, sealing: Bool,
        _ writeHead: (UnsafeMutableRawBufferPointer) -> Void, _ writeTail: (UnsafeMutableRawBufferPointer) -> Void
    ) {
        sendCopying(headOfSize: headSize, body: body, tailOfSize: tailSize, sealing: sealing, writeHead, writeTail)
    }

    /// `send(headOfSize:body:tailOfSize:sealing:_:_:)` by copying the body into the outbox.
    package func sendCopying(
        headOfSize headSize: Int, body: [UInt8], tailOfSize tailSize: Int, sealing: Bool,
        _ writeHead: (UnsafeMutableRawBufferPointer) -> Void, _ writeTail: (UnsafeMutableRawBufferPointer) -> Void
    ) {
        body.withUnsafeBytes { body in
            send(bytesOfSize: headSize + body.count + tailSize, sealing: sealing) { destination in
                writeHead(UnsafeMutableRawBufferPointer(rebasing: destination[..<headSize]))
                if let base = body.baseAddress {
                    (destination.baseAddress! + headSize).copyMemory(from: base, byteCount: body.count)
                }
                writeTail(UnsafeMutableRawBufferPointer(rebasing: destination[(headSize + body.count)...]))
            }
        }
    }

    /// Queues `size` bytes that `write` fills in (see the requirement); safe from any thread.
    package func send(bytesOfSize size: Int, _ write: (UnsafeMutableRawBufferPointer) -> Void) {
        send(bytesOfSize: size, sealing: false, write)
    }

    /// Queues `bytes` as they are (another protocol's bytes: HTTP); safe from any thread.
    package func send(bytes: [UInt8], sealing: Bool = false) {
        bytes.withUnsafeBytes { source in
            send(bytesOfSize: source.count, sealing: sealing) { destination in
                if let base = source.baseAddress {
                    destination.baseAddress!.copyMemory(from: base, byteCount: source.count)
                }
            }
        }
    }

    /// Whether more is waiting to be written than the high-water mark (back-pressure); any thread.
    package var isBackedUp: Bool { unwrittenBytes > highWater }
}
