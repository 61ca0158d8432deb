import Base
import CLibUV
import Foundation
import RPC
import Schema
import Synchronization

/// Serves an `RPCServer` over TCP: a libuv loop does all socket I/O; handlers run on a worker pool
/// (one worker per core, on Swift's cooperative pool), never on the loop thread.
public final class TCPServer: @unchecked Sendable {
    /// Limits that protect the server from clients that misbehave or are simply too many.
    public struct Limits: Sendable {
        /// Largest frame a client may send; a larger one gets RESOURCE_EXHAUSTED, then the connection closes.
        public var maxFrameSize = FrameCodec.defaultMaxFrameSize
        /// Connections beyond this many are closed as soon as they are accepted.
        public var maxConnections = 1024
        /// Calls one connection may have open at once; more get RESOURCE_EXHAUSTED.
        public var maxConcurrentCalls = 1024
        /// Handlers that run at once on the worker pool (those waiting for something do not count);
        /// more calls wait in its queue.
        public var workers = ProcessInfo.processInfo.activeProcessorCount
        /// Answer batching of the worker pool (see `WorkerPool`); only tests change these.
        var quickCall: Duration = .microseconds(50)
        var answerBatchingWindow: Duration = .microseconds(100)
        /// A connection with no open call and no frame either way for this long is closed.
        public var idleTimeout: Duration = .seconds(300)
        /// A connection must complete its first frame, and any frame it started, within this time.
        public var frameTimeout: Duration = .seconds(10)
        /// Unwritten response bytes per connection above which the server stops reading from it
        /// and streaming handlers wait.
        public var writeHighWater = 4 << 20

        public init() {}
    }

    public let rpc: RPCServer
    public let limits: Limits
    /// The address the server listens on, with the port it got (useful when asked for port 0).
    public private(set) var address: String = ""
    public var port: Int { Int(address.split(separator: ":").last ?? "0") ?? 0 }

    let loop: EventLoop
    private let logger: Logger
    private var listener: TCPListener?
    private var connections: [ObjectIdentifier: ServerConnection] = [:]
    private var sweeper: LoopTimer?
    /// Deadlines of calls, earliest first (loop thread), and the timer that fires at the first.
    private var deadlines = DeadlineQueue<WatchedCall>()
    private var deadlineTimer: LoopTimer?
    private var deadlineTimerDue: ContinuousClock.Instant?
    /// Runs while calls are in flight: writes responses a long handler would otherwise hold back.
    private var flushTimer: LoopTimer?
    private var flushTimerRunning = false
    /// Calls being served or queued, over all connections.
    let inFlight = Atomic<Int>(0)
    /// Calls being served or queued right now, over all connections.
    public var callsInFlight: Int { inFlight.load(ordering: .relaxed) }
    /// Where handlers run.
    let workers: WorkerPool
    private let draining = Atomic<Bool>(false)

    /// Binds and starts listening; throws when the address is taken or invalid.
    public init(rpc: RPCServer, host: String = "127.0.0.1", port: Int, limits: Limits = Limits(), logger: Logger? = nil) throws {
        self.rpc = rpc
        self.limits = limits
        self.logger = logger ?? Logger(label: rpc.name)
        workers = WorkerPool(width: limits.workers, quickJob: limits.quickCall, burstDelay: limits.answerBatchingWindow)
        loop = EventLoop(name: "\(rpc.name)-loop")
        guard let socketAddress = SocketAddress(host: host, port: port) else {
            loop.shutdown()
            throw RPCError(.invalidArgument, "cannot listen on \(host):\(port): not a numeric IP address and port")
        }
        let outcome: Result<String, RPCError> = loop.submit { self.listen(socketAddress) }
        switch outcome {
        case .success(let bound):
            address = bound
        case .failure(let error):
            loop.shutdown()
            throw error
        }
    }

    private func listen(_ socketAddress: SocketAddress) -> Result<String, RPCError> {
        let opened = TCPListener.open(
            loop: loop, address: socketAddress, maxFrameSize: limits.maxFrameSize, highWater: limits.writeHighWater
        ) { [weak self] connection in self?.accept(connection) }
        guard case .success(let listener) = opened else { return opened.map(\.address) }
        self.listener = listener
        let period = min(limits.frameTimeout, limits.idleTimeout) / 4
        sweeper = LoopTimer(loop: loop) { [weak self] in self?.sweep() }
        sweeper?.start(after: period, every: period)
        flushTimer = LoopTimer(loop: loop) { [weak self] in self?.flushStaleResponses() }
        deadlineTimer = LoopTimer(loop: loop) { [weak self] in self?.expireDeadlines() }
        return .success(listener.address)
    }

    private func accept(_ connection: TCPConnection) {
        if connections.count >= limits.maxConnections {
            rpc.stats.connectionRejected()
            connection.start()
            logger.warning("closing connection from \(connection.peer): the limit of \(limits.maxConnections) connections is reached")
            connection.close(reason: "too many connections")
            return
        }
        let served = ServerConnection(connection: connection, server: self)
        connections[ObjectIdentifier(served)] = served
        rpc.stats.connectionOpened()
        connection.onClose = { [unowned self] reason in
            connections[ObjectIdentifier(served)] = nil
            rpc.stats.connectionClosed()
            served.closed(reason: reason)
            let level: LogLevel = reason == "peer closed the connection" ? .debug : .info
            logger.log(level, "closed connection from \(served.connection.peer): \(reason)")
        }
        connection.start()
        logger.debug("accepted connection from \(connection.peer)")
    }

    /// Closes connections that stalled mid-frame, never sent a frame, or sat idle too long (idle
    /// since the last request or answer, whichever came later).
    private func sweep() {
        let now = ContinuousClock.now
        for served in Array(connections.values) {
            let connection = served.connection
            if let since = connection.partialFrameSince, now - since > limits.frameTimeout {
                connection.close(reason: "frame still incomplete after \(limits.frameTimeout) (stalled or too slow client)")
            } else if connection.lastFrameAt == nil, now - connection.openedAt > limits.frameTimeout {
                connection.close(reason: "no frame within \(limits.frameTimeout) of connecting")
            } else if served.openCalls == 0,
                      now - max(connection.lastFrameAt ?? connection.openedAt, connection.lastWriteAt ?? connection.openedAt) > limits.idleTimeout {
                connection.close(reason: "idle for \(limits.idleTimeout)")
            }
        }
    }

    /// Answers DEADLINE_EXCEEDED for call `id` (numbered `serial`) of `connection` once `deadline`
    /// passes, unless it finished (loop thread).
    func watch(_ deadline: ContinuousClock.Instant, of id: UInt64, serial: UInt64, method: String, on connection: ServerConnection) {
        let watched = WatchedCall(id: id, serial: serial, method: method, connection: connection)
        deadlines.add(watched, at: deadline, liveCalls: inFlight.load(ordering: .relaxed)) { call in
            call.connection.map { !$0.isOpen(call.id, serial: call.serial) } ?? true
        }
        if let due = deadlineTimerDue, due <= deadline { return }
        deadlineTimerDue = deadline
        deadlineTimer?.start(after: max(.zero, deadline - .now))
    }

    private func expireDeadlines() {
        deadlineTimerDue = nil
        let now = ContinuousClock.now
        for call in deadlines.popExpired(at: now) { call.connection?.expire(call.id, serial: call.serial, method: call.method) }
        if let next = deadlines.earliest {
            deadlineTimerDue = next
            deadlineTimer?.start(after: max(.zero, next - now))
        }
    }

    /// Makes sure responses queued by workers are written within `WorkerPool.maxFlushDelay` (loop thread).
    func callStarted() {
        guard !flushTimerRunning, let flushTimer else { return }
        flushTimerRunning = true
        flushTimer.start(after: WorkerPool.maxFlushDelay, every: WorkerPool.maxFlushDelay)
    }

    private func flushStaleResponses() {
        workers.flushIfStale()
        if inFlight.load(ordering: .relaxed) == 0, !workers.hasDeferredFlushes {
            flushTimer?.stop()
            flushTimerRunning = false
        }
    }

    /// Whether new calls are refused (UNAVAILABLE) because the server is shutting down.
    var isDraining: Bool { draining.load(ordering: .acquiring) }

    /// Graceful shutdown: health turns NOT_SERVING, the listener closes, new calls get UNAVAILABLE,
    /// calls in flight get up to `grace` to finish and their answers what is left of it to be
    /// written; then every connection closes and the loop stops. Calling it again returns at once.
    public func shutdown(grace: Duration) async {
        guard !draining.exchange(true, ordering: .acquiringAndReleasing) else { return }
        rpc.isServing = false
        loop.execute { [self] in
            listener?.close()
            listener = nil
        }
        let deadline = ContinuousClock.now + grace
        while inFlight.load(ordering: .acquiring) > 0, ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(10))
        }
        let abandoned = inFlight.load(ordering: .acquiring)
        if abandoned > 0 { logger.warning("\(abandoned) call(s) still running after the \(grace) grace period; closing anyway") }
        loop.submit { [self] in
            sweeper?.close()
            sweeper = nil
            flushTimer?.close()
            flushTimer = nil
            deadlineTimer?.close()
            deadlineTimer = nil
            deadlines = DeadlineQueue()
            // Answers still in an outbox (a worker's burst had not ended, or the client reads slowly)
            // are written before the connection closes.
            for served in Array(connections.values) { served.connection.close(afterFlushing: "server shutting down") }
        }
        while loop.submit({ [self] in !connections.isEmpty }), ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(10))
        }
        loop.submit { [self] in
            for served in Array(connections.values) {
                served.connection.close(reason: "server shutting down; answers not read within the \(grace) grace period")
            }
        }
        loop.shutdown()
    }
}

/// A call whose deadline the server's loop watches.
private struct WatchedCall {
    let id: UInt64
    let serial: UInt64
    let method: String
    weak var connection: ServerConnection?
}

/// The server side of one connection: turns request frames into calls and tracks them.
final class ServerConnection: @unchecked Sendable {
    let connection: TCPConnection
    let server: TCPServer
    /// Open calls by the id the client gave them, with the serial number the server gave them: once
    /// a call is over the client may use its id again, and what is left of the old call (its
    /// deadline, its handler if cancelled or expired) must not act on the new one.
    private let calls = Lock<[UInt64: (serial: UInt64, slot: CallSlot)]>([:])
    /// Serial number of the last call started (loop thread).
    private var lastSerial: UInt64 = 0

    /// A call's entry, from the moment its request arrived until its status was sent.
    private enum CallSlot {
        /// Waiting for a worker.
        case queued
        /// Cancelled (by the client, or because the connection closed) while still queued.
        case cancelled
        /// Its deadline passed before its task was known here (answered already); the worker
        /// cancels or skips it and removes the entry.
        case expired
        /// Its handler runs (or waits) in this task.
        case running(Task<Void, Never>)
    }
    /// Streaming handlers waiting for the client to read, by ticket (resumed on drain, close or
    /// cancellation).
    private let writers = Mutex<(waiting: [Int: CheckedContinuation<Void, any Error>], lastTicket: Int, closed: Bool)>(([:], 0, false))

    init(connection: TCPConnection, server: TCPServer) {
        self.connection = connection
        self.server = server
        connection.onFrame = { [unowned self] in received($0) }
        connection.onFrameError = { [unowned self] error in frameError(error) }
        connection.onDrain = { [unowned self] in drained() }
    }

    var openCalls: Int { calls.withLock { $0.count } }

    private func received(_ bytes: UnsafeRawBufferPointer) {
        let frame: RpcV1.Frame
        do {
            frame = try RpcV1.Frame(serializedBytes: bytes)
        } catch {
            connection.close(reason: "envelope does not decode: \(error)")
            return
        }
        switch frame.kind {
        case .request: start(frame)
        case .cancel: cancel(frame.callID)
        default: connection.close(reason: "unexpected \(frame.kind) frame from a client")
        }
    }

    private func start(_ frame: RpcV1.Frame) {
        let id = frame.callID
        if server.isDraining {
            answer(id, error: RPCError(.unavailable, "server is shutting down"))
            return
        }
        let head = CallHead(
            method: frame.method, metadata: Metadata(frame.metadata.map { ($0.key, $0.value) }),
            deadline: frame.timeoutMicros.map { .now + .microseconds(Int64(clamping: $0)) }, peer: connection.peer)
        lastSerial += 1
        let serial = lastSerial
        let accepted = calls.withLock { calls -> Bool in
            guard calls[id] == nil, calls.count < server.limits.maxConcurrentCalls else { return false }
            calls[id] = (serial, .queued)
            return true
        }
        guard accepted else {
            answer(id, error: RPCError(.resourceExhausted, "call id \(id) is in use or more than \(server.limits.maxConcurrentCalls) calls are open on this connection"))
            return
        }
        server.inFlight.add(1, ordering: .relaxed)
        server.callStarted()
        if let deadline = head.deadline { server.watch(deadline, of: id, serial: serial, method: head.method, on: self) }
        server.workers.submit(ServerCall(connection: self, id: id, serial: serial, head: head, payload: frame.payload))
        if connection.pendingBytes.load(ordering: .relaxed) > connection.highWater { connection.pauseReading() }
    }

    /// Runs a queued call's handler (on a worker), unless it was cancelled or expired while it waited.
    fileprivate func run(_ call: ServerCall) {
        let id = call.id
        let proceed = calls.withLock { calls -> Bool in
            guard let entry = calls[id], entry.serial == call.serial else { return false }
            switch entry.slot {
            case .queued:
                return true
            case .cancelled:
                // The client has already given up on this call; nothing to answer.
                calls[id] = nil
                server.inFlight.subtract(1, ordering: .relaxed)
                return false
            case .expired:
                // Its deadline passed while it waited, and it was answered then.
                calls[id] = nil
                return false
            case .running:
                return false
            }
        }
        guard proceed else { return }
        // Runs right here, on this worker, until the handler first waits.
        let task = Task.immediate { await call.serve() }
        let cancelNow = calls.withLock { calls -> Bool in
            guard let entry = calls[id], entry.serial == call.serial else { return false }  // finished already
            switch entry.slot {
            case .queued:
                calls[id]?.slot = .running(task)
                return false
            case .cancelled:
                calls[id]?.slot = .running(task)
                return true
            case .expired:
                calls[id] = nil
                return true
            case .running:
                return false
            }
        }
        if cancelNow { task.cancel() }
    }

    /// The call's deadline passed: answers DEADLINE_EXCEEDED now and cancels its handler (loop thread).
    func expire(_ id: UInt64, serial: UInt64, method: String) {
        let slot = calls.withLock { calls -> CallSlot? in
            guard let entry = calls[id], entry.serial == serial else { return nil }
            switch entry.slot {
            case .queued: calls[id]?.slot = .expired  // the worker may be starting it right now
            case .running, .cancelled: calls[id] = nil
            case .expired: return nil
            }
            return entry.slot
        }
        guard let slot else { return }
        server.inFlight.subtract(1, ordering: .relaxed)
        switch slot {
        case .cancelled, .expired: return
        case .queued: break
        case .running(let task): task.cancel()
        }
        answer(id, error: RPCError(.deadlineExceeded, "deadline exceeded while serving \(method)"))
    }

    private func cancel(_ id: UInt64) {
        let task = calls.withLock { calls -> Task<Void, Never>? in
            switch calls[id]?.slot {
            case .queued:
                calls[id]?.slot = .cancelled
                return nil
            case .running(let task): return task
            case .cancelled, .expired, nil: return nil
            }
        }
        task?.cancel()
    }

    private func frameError(_ error: FrameError) {
        guard case .tooLarge = error else { return }
        // Tell the client why before closing (call id 0: the connection as a whole).
        answer(0, error: RPCError(.resourceExhausted, error.description))
        connection.close(afterFlushing: error.description)
    }

    private func answer(_ id: UInt64, error: RPCError) {
        connection.send(Self.statusFrame(id, message: nil, error: error))
    }

    /// Called by a call's sink when it finished; only the first answer of a call is sent (a call
    /// that expired was answered already).
    func finished(_ id: UInt64, serial: UInt64, status: RpcV1.Frame) {
        let slot = calls.withLock { calls -> CallSlot? in
            guard let entry = calls[id], entry.serial == serial else { return nil }
            calls[id] = nil
            return entry.slot
        }
        if slot == nil { return }
        if case .expired = slot { return }
        // Queued before the call stops counting as in flight, so a shutdown waiting for that writes it.
        connection.send(status)
        server.inFlight.subtract(1, ordering: .releasing)
    }

    /// Whether call `id` may still send: it is open and was not answered because of its deadline.
    func isOpen(_ id: UInt64, serial: UInt64) -> Bool {
        calls.withLock { calls in
            guard let entry = calls[id], entry.serial == serial else { return false }
            switch entry.slot {
            case .queued, .running, .cancelled: return true
            case .expired: return false
            }
        }
    }

    /// Waits while the client has more unread response bytes than the high-water mark; throws once
    /// the connection closed or the call's task is cancelled (client cancel, deadline).
    func waitUntilWritable() async throws {
        guard connection.pendingBytes.load(ordering: .relaxed) > connection.highWater else { return }
        let ticket = writers.withLock { writers in
            writers.lastTicket += 1
            return writers.lastTicket
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let resumeNow = writers.withLock { writers -> (any Error)?? in
                    if writers.closed { return .some(RPCError(.cancelled, "connection closed")) }
                    if Task.isCancelled { return .some(CancellationError()) }
                    if connection.pendingBytes.load(ordering: .relaxed) <= connection.lowWater { return .some(nil) }
                    writers.waiting[ticket] = continuation
                    return nil
                }
                if let outcome = resumeNow {
                    if let error = outcome { continuation.resume(throwing: error) } else { continuation.resume() }
                }
            }
        } onCancel: {
            writers.withLock { $0.waiting.removeValue(forKey: ticket) }?.resume(throwing: CancellationError())
        }
    }

    private func drained() {
        let waiting = writers.withLock { writers in
            defer { writers.waiting.removeAll() }
            return writers.waiting.values
        }
        for writer in waiting { writer.resume() }
        connection.resumeReading()
    }

    func closed(reason: String) {
        let running = calls.withLock { calls -> [Task<Void, Never>] in
            var running: [Task<Void, Never>] = []
            for (id, call) in calls {
                switch call.slot {
                case .queued: calls[id]?.slot = .cancelled
                case .running(let task): running.append(task)
                case .cancelled, .expired: break
                }
            }
            return running
        }
        let waiting = writers.withLock { writers in
            writers.closed = true
            defer { writers.waiting.removeAll() }
            return writers.waiting.values
        }
        for writer in waiting { writer.resume(throwing: RPCError(.cancelled, "connection closed: \(reason)")) }
        for task in running { task.cancel() }
    }

    static func statusFrame(_ id: UInt64, message: [UInt8]?, error: RPCError?) -> RpcV1.Frame {
        RpcV1.Frame(
            callID: id, kind: .status, hasPayload: message != nil, payload: message ?? [],
            statusCode: error?.code.rawValue ?? 0, statusMessage: error?.message ?? "")
    }
}

/// A call waiting in the worker pool's queue.
private final class ServerCall: WorkerJob {
    let connection: ServerConnection
    let id: UInt64
    let serial: UInt64
    let head: CallHead
    let payload: [UInt8]

    init(connection: ServerConnection, id: UInt64, serial: UInt64, head: CallHead, payload: [UInt8]) {
        self.connection = connection
        self.id = id
        self.serial = serial
        self.head = head
        self.payload = payload
    }

    func run() { connection.run(self) }

    func serve() async {
        await connection.server.rpc.handle(head, request: payload, sink: TCPResponseSink(connection: connection, callID: id, serial: serial))
    }
}

/// Writes one call's responses to its connection.
struct TCPResponseSink: ResponseSink {
    let connection: ServerConnection
    let callID: UInt64
    let serial: UInt64

    func send(_ message: [UInt8]) async throws {
        guard connection.isOpen(callID, serial: serial) else { throw RPCError(.cancelled, "call \(callID) is over") }
        try await connection.waitUntilWritable()
        connection.connection.send(RpcV1.Frame(callID: callID, kind: .message, hasPayload: true, payload: message))
    }

    func finish(message: [UInt8]?, error: RPCError?) {
        connection.finished(callID, serial: serial, status: ServerConnection.statusFrame(callID, message: message, error: error))
    }
}
