import Base
import CLibUV
import Foundation
import RPC
import Synchronization

/// One TCP connection on an event loop: a `ByteStream`. It hands the bytes it reads to the
/// protocol spoken on it (its `reader`: our frames or HTTP, picked per connection by the server's
/// `ProtocolSniffer`, or a `TLSStream`), and writes bytes handed to it from any thread, batching
/// whatever piled up into one write; it pauses, lingers and closes whatever the protocol. A
/// `TLSStream` wraps it, as its reader, under the same protocol readers.
///
/// Everything but `send` and `pendingBytes` runs on the loop thread. The connection keeps itself
/// alive (through its libuv handle) until it is closed.
package final class TCPConnection: ByteStream, @unchecked Sendable {
    package let loop: EventLoop
    package let handle: UnsafeMutablePointer<uv_tcp_t>
    /// `host:port` of the other side.
    package private(set) var peer = "unknown peer"
    /// The protocol reading this connection's bytes (loop thread); dropped when it closes.
    package var reader: (any ConnectionReader)?
    package private(set) var isClosed = false
    private var isReading = false
    /// Reading is stopped until the loop's next turn, after a read that filled the loop's buffer
    /// (`yieldReading`); `isReading` still says whether it should read.
    private var yielded = false
    /// The read under way goes straight to the reader's memory and ends where its frame does.
    private var readEndsFrame = false
    private var closeWhenFlushed: String?
    /// Since when the connection waits to be flushed before it closes (`close(afterFlushing:)`).
    package private(set) var closingSince: ContinuousClock.Instant?
    /// A lingering close under way: writing is shut down and what the peer still sends is read and
    /// dropped (`discarded` bytes so far) until it closes too, or `timer` ends the wait.
    private var lingering: (discarded: Int, timer: LoopTimer)?
    /// How long, and for how many bytes, a closing connection reads and drops what its peer still
    /// sends after the last frame went out. Closing a socket with unread bytes makes the kernel reset
    /// the connection, and a reset discards what the peer has not read yet (the closing status
    /// among it); half-closing and draining first lets it arrive (as web servers' lingering close).
    package static let lingerTime = Duration.seconds(2)
    package static let lingerBytes = 4 << 20
    /// The server's budget for bytes its clients make it hold (nil for client connections), and what
    /// this connection holds of it in written-but-unsent answers (its reader holds the rest).
    package var budget: MemoryBudget?
    package private(set) var budgetedWrites = 0
    /// Unwritten answer bytes above which the worker pool starts none of this connection's calls (`WorkerPool`): its
    /// high-water mark, and never more than the whole memory budget. The budget is charged when answers are flushed,
    /// so a client that never reads, its calls answered faster than the loop flushed, had all thirty of its 1 MiB
    /// answers go out in one write past a 4 MiB budget before the budget could stop it (CI, AbuseTests).
    package var callsWaitAbove: Int { min(highWater, budget?.limit ?? .max) }
    /// Called when answers took the budget past its limit (loop thread).
    package var onBudgetExceeded: (() -> Void)?
    /// Bytes of the budget this connection holds.
    package var budgetFootprint: Int { budgetedWrites + (reader?.budgetedBytes ?? 0) }

    /// The connection closed, with the reason.
    package var onClose: ((String) -> Void)?
    /// Bytes waiting to be written fell below the low-water mark.
    package var onDrain: (() -> Void)?

    /// When the connection was opened, and when bytes were last handed to the socket or a write completed (the
    /// idle sweep's news: a write's completion is only seen on the next turn of the loop, after its timers).
    package let openedAt = ContinuousClock.now
    package private(set) var lastWriteAt: ContinuousClock.Instant?

    /// Whether bytes are queued that no `flush` has handed to the socket yet (an answer on its way, not a stuck one).
    package var hasUnflushedBytes: Bool { outbox.withLock { !$0.bytes.isEmpty || !$0.bodies.isEmpty } }

    private let outbox = Lock(Outbox())
    /// Bytes handed to `send` and not yet written to the socket.
    package let pendingBytes = Atomic<Int>(0)
    package let lowWater: Int
    package let highWater: Int
    package var unwrittenBytes: Int { pendingBytes.load(ordering: .relaxed) }

    /// Frames queued by `send` for the next write, and buffers to reuse.
    private struct Outbox {
        var bytes = OutboxBuffer()
        /// Bodies written by reference (`send(headOfSize:body:...)`), each to go out before the byte of `bytes` at its
        /// offset.
        var bodies: [ReferencedBody] = []
        /// An emptied buffer whose write completed, kept for the next flush.
        var spare: OutboxBuffer?
        var flushScheduled = false
        var closed = false
        /// A connection-level error was queued: nothing may follow it.
        var sealed = false
    }

    /// A new, unconnected TCP handle on `loop` (call on the loop thread).
    package init(loop: EventLoop, highWater: Int = 4 << 20) {
        self.loop = loop
        self.highWater = highWater
        lowWater = highWater / 4
        handle = allocateHandle(uv_tcp_t.self)
        uv_tcp_init(loop.raw, handle)
        handle.pointee.data = Unmanaged.passRetained(self as AnyObject).toOpaque()
    }

    package var stream: UnsafeMutablePointer<uv_stream_t> { cast(handle, to: uv_stream_t.self) }

    /// The connection of a TCP handle (a read, write or connect callback's).
    package static func owning(_ stream: UnsafeMutablePointer<uv_stream_t>?) -> TCPConnection {
        // `data` of a connection's handle holds nothing but its TCPConnection.
        unsafeDowncast(
            Unmanaged<AnyObject>.fromOpaque(stream!.pointee.data).takeUnretainedValue(), to: TCPConnection.self)
    }

    /// Call once connected or accepted (loop thread): learns the peer's address (unless known),
    /// disables Nagle, starts reading.
    package func start() {
        loop.assertInLoop()
        uv_tcp_nodelay(handle, 1)
        if !peerKnown { learnPeer() }
        resumeReading()
    }

    /// Learns the peer's address (loop thread): a server's limits count a connection by it before
    /// it is started.
    package func learnPeer() {
        loop.assertInLoop()
        setPeer(Self.address(of: handle, peer: true) ?? peer)
    }

    private var peerKnown = false

    private func setPeer(_ address: String) {
        peer = address
        peerHost = peer.lastIndex(of: ":").map { String(peer[..<$0]) } ?? peer
        peerKnown = true
    }

    /// Hands an accepted, not yet started connection over to another loop (loop thread): returns a
    /// duplicate of its socket's descriptor, for `adopt` there, and closes this handle and its
    /// descriptor; nil when `dup` fails (the connection is closed all the same). It must not have
    /// read yet: a descriptor its loop's epoll watches would stay registered there while the
    /// duplicate lives (epoll watches the open file, not the number).
    package func detachDescriptor() -> Int32? {
        loop.assertInLoop()
        precondition(!isReading, "a connection is handed over before it reads")
        var descriptor: uv_os_fd_t = -1
        let copy =
            uv_fileno(cast(handle, to: uv_handle_t.self), &descriptor) == 0 ? fcntl(descriptor, F_DUPFD_CLOEXEC, 0) : -1
        close(reason: "handed over to another loop")
        return copy >= 0 ? copy : nil
    }

    /// A connection on `loop` for the accepted socket `descriptor` (from `detachDescriptor`), whose
    /// peer is `peer`; nil when libuv refuses it (the caller closes the descriptor). Loop thread.
    package static func adopt(_ descriptor: Int32, loop: EventLoop, peer: String, highWater: Int) -> TCPConnection? {
        loop.assertInLoop()
        let connection = TCPConnection(loop: loop, highWater: highWater)
        guard uv_tcp_open(connection.handle, uv_os_sock_t(descriptor)) == 0 else {
            connection.isClosed = true
            closeHandle(connection.handle)
            return nil
        }
        connection.setPeer(peer)
        return connection
    }

    /// The peer's address without its port: what per-client limits count by. Kept, not derived:
    /// finding the idle connection to reclaim compares it for every connection.
    package private(set) var peerHost = "unknown peer"

    /// Whether reads feed a large frame (or are dropped by a lingering close): such reads share the
    /// loop's `turnBulkBudget`.
    private var readsInBulk: Bool { lingering != nil || reader?.readsInBulk == true }

    /// Starts reading again after `pauseReading` (loop thread).
    package func resumeReading() {
        loop.assertInLoop()
        guard !isClosed, !isReading, closeWhenFlushed == nil || lingering != nil else { return }
        isReading = true
        if !yielded { startReading() }  // else the loop's next turn starts it
    }

    /// A read filled the buffer it was given, so more is likely waiting: reading stops for the rest
    /// of this loop turn and starts again in the next. libuv reads a readable socket up to 32 times
    /// per turn (8 MiB with our 256 KiB buffer), so 40 clients streaming large frames held the loop
    /// for hundreds of milliseconds, and a health check waited that long for its accept and its
    /// read (280-640 ms in the abuse benchmark); now a turn reads one buffer from each connection,
    /// and small ones once the turn has read `EventLoop.turnReadBudget` (loop thread).
    private func yieldReading() {
        guard isReading, !isClosed, !yielded else { return }
        yielded = true
        uv_read_stop(stream)
        loop.readAgainNextTurn(self)
    }

    /// The loop's next turn after `yieldReading` (loop thread).
    package func resumeAfterYield() {
        guard yielded else { return }
        yielded = false
        if isReading, !isClosed { startReading() }
    }

    private func startReading() {
        uv_read_start(
            stream,
            { handle, _, buffer in
                let connection = TCPConnection.owning(cast(handle!, to: uv_stream_t.self))
                let loop = connection.loop
                let size = loop.readSize(bulk: connection.readsInBulk)
                // A large frame's rest goes straight where its reader would copy it (`ConnectionReader.readDestination`).
                if size > 0, connection.lingering == nil, let destination = connection.reader?.readDestination() {
                    buffer!.pointee = uv_buf_init(
                        destination.baseAddress!.assumingMemoryBound(to: CChar.self),
                        UInt32(min(size, destination.count)))
                    connection.readEndsFrame = destination.count <= size
                    return
                }
                // A length of 0 makes libuv skip the read with UV_ENOBUFS.
                buffer!.pointee = uv_buf_init(
                    loop.readBuffer.baseAddress!.assumingMemoryBound(to: CChar.self), UInt32(size))
            },
            { stream, count, buffer in
                let connection = TCPConnection.owning(stream)
                if count > 0 {
                    connection.loop.didRead(count, bulk: connection.readsInBulk)
                    let inPlace =
                        UnsafeMutableRawPointer(buffer!.pointee.base) != connection.loop.readBuffer.baseAddress
                    if inPlace {
                        connection.receivedInPlace(count)
                    } else {
                        connection.received(UnsafeRawBufferPointer(start: buffer!.pointee.base, count: count))
                    }
                    // A read that took exactly a frame's rest says nothing of what waits after it.
                    let filled = count == Int(buffer!.pointee.len) && !(inPlace && connection.readEndsFrame)
                    if filled { connection.yieldReading() }
                } else if Int32(count) == UV_ENOBUFS.rawValue {
                    // The turn's bulk budget is spent. libuv keeps watching the socket, and the next turn
                    // (its counters reset) reads it: level-triggered epoll reports it again, behind the
                    // sockets reported after it this time, so the uploaders take turns.
                } else if count < 0 {
                    // A lingering close keeps its own reason: the peer's end is what it waited for.
                    connection.peerEnded(
                        connection.lingering != nil
                            ? connection.closeWhenFlushed!
                            : Int32(count) == UV_EOF.rawValue
                                ? "peer closed the connection" : "read failed: \(uvError(Int32(count)))")
                }
            })
    }

    /// The peer's end of the stream (or a read error; libuv has stopped reading): closes now, or in
    /// the next loop turn once this one closed its share (`EventLoop.turnCloseBudget`).
    private func peerEnded(_ reason: String) {
        guard loop.mayClose() else {
            loop.afterThisTurn { [self] in peerEnded(reason) }
            return
        }
        close(reason: reason)
    }

    /// Stops reading (back-pressure: the peer's requests wait in its own socket buffer). Loop thread.
    package func pauseReading() {
        loop.assertInLoop()
        guard isReading, !isClosed else { return }
        isReading = false
        uv_read_stop(stream)
    }

    private func received(_ bytes: UnsafeRawBufferPointer) {
        loop.assertInLoop()
        if let reason = closeWhenFlushed, lingering != nil {
            lingering!.discarded += bytes.count
            if lingering!.discarded > Self.lingerBytes { close(reason: reason) }
            return
        }
        reader?.received(bytes)
    }

    /// `count` bytes were read into the memory the reader's `readDestination` gave (a lingering close offers none).
    private func receivedInPlace(_ count: Int) {
        loop.assertInLoop()
        reader?.receivedInPlace(count)
    }

    /// Whether it is being closed once flushed (`close(afterFlushing:)`): a reader takes no more from it.
    package var isClosing: Bool { closeWhenFlushed != nil }

    /// Queues `size` bytes, which `write` puts straight into the outbox, whatever protocol they
    /// are (see `ByteStream.send(bytesOfSize:sealing:_:)`); safe from any thread.
    package func send(bytesOfSize size: Int, sealing: Bool, _ write: (UnsafeMutableRawBufferPointer) -> Void) {
        queue(size, sealing: sealing) { $0.bytes.append(size, write) }
    }

    /// Adds `size` bytes to the outbox with `add` (under its lock, unless it closed or was sealed) and schedules a
    /// flush if none is; any thread.
    private func queue(_ size: Int, sealing: Bool, _ add: (inout Outbox) -> Void) {
        let schedule = outbox.withLock { outbox -> Bool in
            guard !outbox.closed, !outbox.sealed else { return false }
            add(&outbox)
            outbox.sealed = sealing
            pendingBytes.add(size, ordering: .relaxed)
            defer { outbox.flushScheduled = true }
            return !outbox.flushScheduled
        }
        if schedule {
            // On a worker, the flush waits for the end of its burst of jobs (see `WriteBurst`, `WorkerPool`).
            if let burst = WriteBurst.current { burst.deferFlush(of: self) } else { loop.execute { self.flush() } }
        }
    }

    /// Bodies at least this large are handed to the socket as they are (their own `uv_buf_t` of a vectored write)
    /// instead of being copied into the outbox: below it, a copy costs less than the extra buffer's bookkeeping.
    package static let smallestReferencedBody = 8 * 1024

    /// Queues head, body and tail; a body of `smallestReferencedBody` bytes or more is written from its own memory,
    /// retained until its write completes (see `ByteStream.send(headOfSize:body:tailOfSize:sealing:_:_:)`).
    package func send(
        headOfSize headSize: Int, body: [UInt8], tailOfSize tailSize: Int, sealing: Bool,
        _ writeHead: (UnsafeMutableRawBufferPointer) -> Void, _ writeTail: (UnsafeMutableRawBufferPointer) -> Void
    ) {
        guard body.count >= Self.smallestReferencedBody else {
            return sendCopying(
                headOfSize: headSize, body: body, tailOfSize: tailSize, sealing: sealing, writeHead, writeTail)
        }
        queue(headSize + body.count + tailSize, sealing: sealing) { outbox in
            outbox.bytes.append(headSize, writeHead)
            outbox.bodies.append(ReferencedBody(offset: outbox.bytes.count, bytes: body))
            outbox.bytes.append(tailSize, writeTail)
        }
    }

    /// Writes everything queued so far in one `uv_write` (loop thread): the outbox's bytes, and the bodies queued by
    /// reference between them, as the buffers of one vectored write.
    package func flush() {
        loop.assertInLoop()
        let queued = outbox.withLock { outbox -> (OutboxBuffer, [ReferencedBody])? in
            outbox.flushScheduled = false
            guard !outbox.bytes.isEmpty || !outbox.bodies.isEmpty else { return nil }
            var next = outbox.spare.take() ?? OutboxBuffer()
            swap(&next, &outbox.bytes)
            var bodies: [ReferencedBody] = []
            swap(&bodies, &outbox.bodies)
            return (next, bodies)
        }
        guard let (bytes, bodies) = queued, !isClosed else {
            queued?.0.deallocate()
            return
        }
        let write = WriteRequest(bytes: bytes, bodies: bodies)
        lastWriteAt = .now
        if let budget {
            budgetedWrites += write.count
            if budget.charge(write.count) { onBudgetExceeded?() }
        }
        let request = allocateHandle(uv_write_t.self)
        request.pointee.data = Unmanaged.passRetained(write).toOpaque()
        let result = write.withBuffers { buffers in
            uv_write(request, stream, buffers.baseAddress, UInt32(buffers.count)) { request, status in
                let write = Unmanaged<WriteRequest>.fromOpaque(request!.pointee.data).takeRetainedValue()
                let connection = TCPConnection.owning(request!.pointee.handle)
                free(request)
                connection.written(write, status: status)
            }
        }
        if result < 0 {
            // Refused at once (the writing side shut down by a lingering close, say), the write gets no callback to
            // give back what it counted, so it is given back here.
            Unmanaged<WriteRequest>.fromOpaque(request.pointee.data).release()
            free(request)
            write.bytes.deallocate()
            uncount(write)
            close(reason: "write failed: \(uvError(result))")
        }
    }

    /// Gives back what `flush` counted for `write` (its charge on the budget, its bytes as pending), once it was
    /// written or refused; returns the bytes still pending.
    @discardableResult
    private func uncount(_ write: WriteRequest) -> Int {
        if let budget {
            budgetedWrites -= write.count
            budget.release(write.count)
        }
        return pendingBytes.subtract(write.count, ordering: .relaxed).newValue
    }

    private func written(_ write: WriteRequest, status: Int32) {
        if write.hasBodies { LargeBuffers.release(write.takeBodies()) }
        var bytes = write.bytes
        let left = uncount(write)
        bytes.removeAll()
        let recycled = outbox.withLock { outbox -> Bool in
            guard !outbox.closed, outbox.spare == nil, bytes.capacity <= OutboxBuffer.largestKept else { return false }
            outbox.spare = bytes
            return true
        }
        if !recycled { bytes.deallocate() }
        if status < 0 {
            if status != UV_ECANCELED.rawValue { close(reason: "write failed: \(uvError(status))") }
            return
        }
        lastWriteAt = .now
        if left == 0, let reason = closeWhenFlushed {
            linger(reason)
        } else if left < lowWater {
            onDrain?()
        }
    }

    /// Closes once everything queued has been written (to deliver a last error status, sent
    /// `sealing`), lingering (see `lingerTime`). Loop thread.
    package func close(afterFlushing reason: String) {
        loop.assertInLoop()
        guard !isClosed else { return }
        pauseReading()
        if closeWhenFlushed == nil { closingSince = .now }
        closeWhenFlushed = reason
        flush()
        if pendingBytes.load(ordering: .relaxed) == 0 { linger(reason) }
    }

    /// Everything is written: shuts down writing (the peer reads the last frames, then the end of
    /// the stream) and reads and drops what the peer still sends until it closes too, for at most
    /// `lingerTime` and `lingerBytes`; then closes (loop thread).
    private func linger(_ reason: String) {
        guard !isClosed, lingering == nil else { return }
        let request = allocateHandle(uv_shutdown_t.self)
        guard uv_shutdown(request, stream, { request, _ in free(request) }) == 0 else {
            free(request)
            close(reason: reason)
            return
        }
        let timer = LoopTimer(loop: loop) { [weak self] in self?.close(reason: reason) }
        timer.start(after: Self.lingerTime)
        lingering = (0, timer)
        reader?.releaseBudget()
        resumeReading()
    }

    /// Closes now; writes still queued are dropped. Idempotent. Loop thread.
    package func close(reason: String) {
        loop.assertInLoop()
        guard !isClosed else { return }
        isClosed = true
        outbox.withLock { outbox in
            outbox.closed = true
            outbox.bytes.deallocate()
            outbox.bytes = OutboxBuffer()
            outbox.bodies = []
            outbox.spare.take()?.deallocate()
        }
        if isReading { uv_read_stop(stream) }
        lingering?.timer.close()
        lingering = nil
        reader?.releaseBudget()
        reader = nil
        onBudgetExceeded = nil
        closeHandle(handle)
        let onClose = onClose
        self.onClose = nil
        onDrain = nil
        onClose?(reason)
    }

    /// `host:port` of one end of a TCP handle.
    package static func address(of handle: UnsafeMutablePointer<uv_tcp_t>, peer: Bool) -> String? {
        var storage = sockaddr_storage()
        var length = Int32(MemoryLayout<sockaddr_storage>.size)
        let result = withUnsafeMutablePointer(to: &storage) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { address in
                peer ? uv_tcp_getpeername(handle, address, &length) : uv_tcp_getsockname(handle, address, &length)
            }
        }
        guard result == 0 else { return nil }
        return SocketAddress(storage).description
    }
}

// MARK: Connecting (clients)

extension TCPConnection {
    /// Connects this (new) connection to `address`; `completion` gets 0 or a libuv error code, on
    /// the loop thread, after which a successful connection is started.
    package func connect(to address: SocketAddress, completion: @escaping (Int32) -> Void) {
        loop.assertInLoop()
        let request = allocateHandle(uv_connect_t.self)
        request.pointee.data = Unmanaged.passRetained(ConnectCompletion(completion) as AnyObject).toOpaque()
        let result = address.withSockaddr {
            uv_tcp_connect(request, handle, $0) { request, status in
                let completion =
                    Unmanaged<AnyObject>.fromOpaque(request!.pointee.data).takeRetainedValue() as! ConnectCompletion
                let connection = TCPConnection.owning(request!.pointee.handle)
                free(request)
                if status == 0, !connection.isClosed { connection.start() }
                completion.body(status)
            }
        }
        if result < 0 {
            Unmanaged<AnyObject>.fromOpaque(request.pointee.data).release()
            free(request)
            completion(result)
        }
    }

    /// Connects from any thread and waits.
    package static func connect(_ connection: TCPConnection, to address: SocketAddress) async throws {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            connection.loop.execute {
                connection.connect(to: address) { status in
                    if status == 0 {
                        continuation.resume()
                    } else {
                        continuation.resume(
                            throwing: ConnectFailure(endpoint: address.description, reason: uvError(status)))
                    }
                }
            }
        }
    }
}

private final class ConnectCompletion {
    package let body: (Int32) -> Void

    package init(_ body: @escaping (Int32) -> Void) { self.body = body }
}

/// A body queued by reference: written before the outbox's byte at `offset`.
private struct ReferencedBody {
    package let offset: Int
    package let bytes: [UInt8]
}

/// The bytes of one `uv_write`, kept alive until libuv reports it done: the outbox's buffer and the bodies written
/// from their own memory between its bytes.
private final class WriteRequest {
    package let bytes: OutboxBuffer
    private var bodies: [ReferencedBody]
    /// Bytes written in all.
    package let count: Int

    package var hasBodies: Bool { !bodies.isEmpty }

    /// The bodies' arrays, no longer held here (once written).
    package func takeBodies() -> [[UInt8]] {
        defer { bodies = [] }
        return bodies.map(\.bytes)
    }

    package init(bytes: OutboxBuffer, bodies: [ReferencedBody]) {
        self.bytes = bytes
        self.bodies = bodies
        count = bodies.reduce(bytes.count) { $0 + $1.bytes.count }
    }

    /// The `uv_buf_t`s of the write, in order; libuv copies the array, not the bytes. A body's memory is used past
    /// `withUnsafeBytes`: the array is held here, never mutated, until the write completes, so its storage neither
    /// moves nor goes away (an array of `UInt8` on Linux is always native, contiguous storage).
    package func withBuffers<Result>(_ body: (UnsafeMutableBufferPointer<uv_buf_t>) -> Result) -> Result {
        guard !bodies.isEmpty else {
            var buffer = uv_buf_init(bytes.base!.assumingMemoryBound(to: CChar.self), UInt32(bytes.count))
            return withUnsafeMutablePointer(to: &buffer) { body(UnsafeMutableBufferPointer(start: $0, count: 1)) }
        }
        var buffers: [uv_buf_t] = []
        buffers.reserveCapacity(bodies.count * 2 + 1)
        var position = 0
        for referenced in bodies {
            if referenced.offset > position {
                buffers.append(
                    uv_buf_init(
                        bytes.base!.advanced(by: position).assumingMemoryBound(to: CChar.self),
                        UInt32(referenced.offset - position)))
            }
            let base = referenced.bytes.withUnsafeBytes { UnsafeMutableRawPointer(mutating: $0.baseAddress!) }
            buffers.append(uv_buf_init(base.assumingMemoryBound(to: CChar.self), UInt32(referenced.bytes.count)))
            position = referenced.offset
        }
        if bytes.count > position {
            buffers.append(
                uv_buf_init(
                    bytes.base!.advanced(by: position).assumingMemoryBound(to: CChar.self),
                    UInt32(bytes.count - position)))
        }
        return buffers.withUnsafeMutableBufferPointer { body($0) }
    }
}

/// A growable byte buffer of framed envelopes waiting to be written, managed by hand so that
/// it can be handed to libuv and recycled without copies.
package struct OutboxBuffer {
    /// Buffers larger than this are freed after their write instead of being kept for reuse.
    package static let largestKept = 1 << 20
    package private(set) var base: UnsafeMutableRawPointer?
    package private(set) var count = 0
    package private(set) var capacity = 0

    package var isEmpty: Bool { count == 0 }

    /// Appends `size` bytes that `write` fills in.
    package mutating func append(_ size: Int, _ write: (UnsafeMutableRawBufferPointer) -> Void) {
        guard size > 0 else { return }  // (a head or tail of nothing, before any byte: no buffer yet to point into)
        let needed = count + size
        if needed > capacity { grow(to: needed) }
        write(UnsafeMutableRawBufferPointer(start: base! + count, count: size))
        count = needed
    }

    package mutating func removeAll() { count = 0 }

    package func deallocate() { if let base { LargeBuffers.deallocate(base, capacity: capacity) } }

    private mutating func grow(to needed: Int) {
        let newCapacity = max(needed, capacity * 2, 4096)
        let newBase = UnsafeMutableRawPointer.allocate(byteCount: newCapacity, alignment: 16)
        if let base {
            newBase.copyMemory(from: base, byteCount: count)
            LargeBuffers.deallocate(base, capacity: capacity)
        }
        base = newBase
        capacity = newCapacity
    }
}

/// An IPv4 or IPv6 socket address.
package struct SocketAddress: CustomStringConvertible {
    package var storage: sockaddr_storage

    package init(_ storage: sockaddr_storage) { self.storage = storage }

    /// Parses a numeric address (`127.0.0.1`, `::1`); `localhost` means 127.0.0.1.
    package init?(host: String, port: Int) {
        storage = sockaddr_storage()
        let host = host == "localhost" ? "127.0.0.1" : host
        let ok = withUnsafeMutablePointer(to: &storage) { pointer -> Bool in
            if host.contains(":") {
                return pointer.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) {
                    uv_ip6_addr(host, Int32(port), $0)
                } == 0
            }
            return pointer.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { uv_ip4_addr(host, Int32(port), $0) }
                == 0
        }
        guard ok, (0...65535).contains(port) else { return nil }
    }

    package func withSockaddr<T>(_ body: (UnsafePointer<sockaddr>) -> T) -> T {
        withUnsafePointer(to: storage) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1, body) }
    }

    package var port: Int {
        withUnsafePointer(to: storage) { pointer in
            if Int32(storage.ss_family) == AF_INET6 {
                return pointer.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) {
                    Int(UInt16(bigEndian: $0.pointee.sin6_port))
                }
            }
            return pointer.withMemoryRebound(to: sockaddr_in.self, capacity: 1) {
                Int(UInt16(bigEndian: $0.pointee.sin_port))
            }
        }
    }

    package var description: String {
        var name = [CChar](repeating: 0, count: 64)
        let isV6 = Int32(storage.ss_family) == AF_INET6
        withUnsafePointer(to: storage) { pointer in
            if isV6 {
                pointer.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { _ = uv_ip6_name($0, &name, name.count) }
            } else {
                pointer.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { _ = uv_ip4_name($0, &name, name.count) }
            }
        }
        let host = String(decoding: name.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return isV6 ? "[\(host)]:\(port)" : "\(host):\(port)"
    }
}
