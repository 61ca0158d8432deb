import Base
import CLibUV
import Foundation
import HTTP
import RPC
import Schema
import Synchronization

/// Serves an `RPCServer` over TCP: a libuv loop does all socket I/O; handlers run on a worker pool
/// (one worker per core, on Swift's cooperative pool), never on the loop thread, except the
/// built-in health, reflection and stats methods, which the loop answers at once (see
/// `ServerCallTable`). A connection is a byte stream (`TCPConnection`), the protocol its first byte
/// picks (`ProtocolSniffer`: our frames, `FrameServerConnection`) and its calls (`ServerCallTable`).
public final class TCPServer: ServerTransport, @unchecked Sendable {
    /// Limits that protect the server from clients that misbehave or are simply too many.
    public struct Limits: Sendable {
        /// Largest frame a client may send; a larger one gets RESOURCE_EXHAUSTED, then the connection closes.
        public var maxFrameSize = FrameCodec.defaultMaxFrameSize
        /// Largest request message of a client-streaming call, joined from MESSAGE frames; a larger
        /// one ends its call with RESOURCE_EXHAUSTED.
        public var maxMessageSize = FlowControl.defaultMaxMessageSize
        /// Connections served at once. A connection beyond it (or beyond `maxConnectionsPerPeer`)
        /// takes the place of the connection with no open call that has been quiet longest (told
        /// UNAVAILABLE); when every connection has a call open it is refused with RESOURCE_EXHAUSTED.
        public var maxConnections = 1024
        /// Connections from one client address served at once (see `maxConnections`).
        public var maxConnectionsPerPeer = 256
        /// Calls one connection may have open at once, as gRPC's MAX_CONCURRENT_STREAMS; a call
        /// beyond it is answered RESOURCE_EXHAUSTED under its own id.
        public var maxConcurrentCalls = 100
        /// Bytes of large frames still arriving plus answers not yet taken by their clients, over all
        /// connections; see `MemoryBudget`.
        public var memoryBudget = 256 << 20
        /// Handlers that run at once on the worker pool (those waiting for something do not count);
        /// more calls wait in its queue.
        public var workers = ProcessInfo.processInfo.activeProcessorCount
        /// Answer batching of the worker pool (see `WorkerPool`); only tests change these.
        var quickCall: Duration = .microseconds(50)
        var answerBatchingWindow: Duration = .microseconds(100)
        /// Calls whose method has held a worker this long count as long: together they take at most
        /// `workers - 1` workers, so quick calls always find one (see `WorkerPool`).
        var longCall: Duration = .milliseconds(5)
        /// A connection with no open call and no frame either way for this long is closed.
        public var idleTimeout: Duration = .seconds(300)
        /// A connection must complete its first frame, and any frame it started, within this time.
        public var frameTimeout: Duration = .seconds(10)
        /// Unwritten response bytes per connection above which the server stops reading from it
        /// and streaming handlers wait.
        public var writeHighWater = 4 << 20
        /// An upload (a client-streaming call) with no request message for this long ends
        /// DEADLINE_EXCEEDED and what it sent is discarded.
        public var uploadIdleTimeout: Duration = .seconds(30)
        /// Bytes per second an upload must average over each `uploadRateWindow` (slowloris for
        /// streams: a message of one byte every ten seconds is never idle for long).
        public var uploadMinimumRate = 1024
        public var uploadRateWindow: Duration = .seconds(60)
        /// Uploads open at once, over all connections and from one client address; past them an
        /// upload is refused RESOURCE_EXHAUSTED (other calls are not).
        public var maxUploads = 256
        public var maxUploadsPerPeer = 64
        /// Past the connection limit with no idle connection, a newcomer takes the place of the busy
        /// connection that has sent nothing for longest, if that is at least this long.
        public var reclaimAfterQuiet: Duration = .seconds(2)

        public init() {}
    }

    /// The server its calls go to, from `listen` on.
    public private(set) var rpc: RPCServer!
    /// Plain HTTP routes served beside Connect on the HTTP side (set before `listen`), with how long
    /// each route's answers held a worker (by `HTTPRoutes.Route.id`; the last is the static files').
    public private(set) var httpRoutes: HTTPRoutes?
    private(set) var httpRouteTimes: [WorkerTime] = []
    public let limits: Limits
    /// The address the server listens on, with the port it got (useful when asked for port 0).
    public private(set) var address: String = ""
    public var port: Int { Int(address.split(separator: ":").last ?? "0") ?? 0 }

    /// The event loop doing this server's socket I/O, made by `listen` (named after the server).
    private(set) var loop: EventLoop!
    private let host: String
    private let requestedPort: Int
    /// The logger given, else one labelled with the server's name once `listen` knows it.
    private(set) var logger: Logger
    /// Warnings a client can cause at will, logged once a minute per kind.
    let refusals = LogWindow()
    private let loggerGiven: Bool
    private var listener: TCPListener?
    private var connections: [ObjectIdentifier: any ServerConnection] = [:]
    /// Open connections per client address (loop thread).
    private var connectionsPerPeer: [String: Int] = [:]
    /// Connections counted against the limits: being closed (told why, lingering) no longer counts,
    /// as such a connection serves nothing and goes within `TCPConnection.lingerTime`.
    private var countedConnections = 0
    /// Large frames arriving and answers unsent, over all connections (loop thread).
    public let budget: MemoryBudget
    private var budgetCheckScheduled = false
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
    /// Uploads open, over all connections (see `Limits.maxUploads`).
    let uploadsOpen = Atomic<Int>(0)
    /// Uploads open now, over all connections.
    public var uploadsInProgress: Int { uploadsOpen.load(ordering: .relaxed) }
    /// Calls being served or queued right now, over all connections.
    public var callsInFlight: Int { inFlight.load(ordering: .relaxed) }
    /// Connections told why they are closed and waiting for that to be written (loop thread).
    var connectionsFailing: Int { connections.values.filter(\.isFailing).count }
    /// Connections being served (loop thread; for tests).
    var connectionsOpen: Int { connections.count }
    /// Answer bytes queued and not yet written, over every connection (loop thread; for tests).
    var pendingAnswerBytes: Int { connections.values.reduce(0) { $0 + $1.socket.unwrittenBytes } }
    /// Where handlers run.
    let workers: WorkerPool
    private let draining = Atomic<Bool>(false)

    /// A server for `host:port` (port 0: any free one) that listens once given an `RPCServer`
    /// (`rpc.serve(over:)`).
    public init(host: String = "127.0.0.1", port: Int, limits: Limits = Limits(), logger: Logger? = nil) {
        self.host = host
        requestedPort = port
        self.limits = limits
        self.logger = logger ?? Logger(label: "tcp-server")
        loggerGiven = logger != nil
        budget = MemoryBudget(limit: limits.memoryBudget)
        workers = WorkerPool(
            width: limits.workers, quickJob: limits.quickCall, burstDelay: limits.answerBatchingWindow, longJob: limits.longCall)
    }

    /// Serves `rpc`, binding and listening at once; throws when the address is taken or invalid.
    public convenience init(rpc: RPCServer, host: String = "127.0.0.1", port: Int, limits: Limits = Limits(), logger: Logger? = nil) throws {
        self.init(host: host, port: port, limits: limits, logger: logger)
        try rpc.serve(over: self)
    }

    /// Serves `routes` on HTTP requests before Connect: GETs they match run their handler on the
    /// workers, under the same limits; others are Connect's, or 404. Call before `listen`.
    public func serveHTTP(_ routes: HTTPRoutes) {
        precondition(rpc == nil, "HTTP routes are set before the server listens")
        httpRoutes = routes
        httpRouteTimes = (0...routes.count).map { _ in WorkerTime() }
    }

    /// The certificates of TLS connections, when served (`serveTLS`); the server then serves TLS only.
    public private(set) var tls: TLSCredentials?

    /// Serves TLS with `credentials` (mutual TLS on the binary protocol, server-only on HTTP) and no
    /// plaintext: a plaintext client is told so and closed. Call before `listen`.
    public func serveTLS(_ credentials: TLSCredentials) {
        precondition(rpc == nil, "TLS is set before the server listens")
        tls = credentials
    }

    /// Binds and starts listening, handing calls to `server`; throws when the address is taken or
    /// invalid, or when it listens already.
    public func listen(handingCallsTo server: RPCServer) throws {
        guard rpc == nil else { throw RPCError(.failedPrecondition, "\(address) serves \(rpc.name) already") }
        rpc = server
        if !loggerGiven { logger = Logger(label: server.name) }
        let loop = EventLoop(name: "\(server.name)-loop")
        self.loop = loop
        server.reportLoop { [turns = loop.turns] in turns.snapshot }
        guard let socketAddress = SocketAddress(host: host, port: requestedPort) else {
            loop.shutdown()
            self.loop = nil
            rpc = nil
            throw RPCError(.invalidArgument, "cannot listen on \(host):\(requestedPort): not a numeric IP address and port")
        }
        let outcome: Result<String, RPCError> = loop.submit { self.listen(socketAddress) }
        switch outcome {
        case .success(let bound):
            address = bound
        case .failure(let error):
            loop.shutdown()
            self.loop = nil
            rpc = nil
            throw error
        }
    }

    private func listen(_ socketAddress: SocketAddress) -> Result<String, RPCError> {
        let opened = TCPListener.open(
            loop: loop, address: socketAddress, highWater: limits.writeHighWater
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
        loop.assertInLoop()
        connection.budget = budget
        connection.start()
        let host = connection.peerHost
        let fromPeer = connectionsPerPeer[host, default: 0]
        if countedConnections >= limits.maxConnections || fromPeer >= limits.maxConnectionsPerPeer {
            let perPeer = fromPeer >= limits.maxConnectionsPerPeer
            let limit = perPeer
                ? "the limit of \(limits.maxConnectionsPerPeer) connections from \(host)"
                : "the limit of \(limits.maxConnections) connections"
            // As servers reclaim idle keep-alive connections: the one quiet longest with no open call
            // makes room; only when every connection has a call open is the newcomer refused.
            if let idle = longestIdle(from: perPeer ? host : nil) {
                logger.info("closing idle connection from \(idle.socket.peer) to make room: \(limit) is reached")
                idle.fail(.unavailable, "idle connection closed to make room: \(limit) is reached")
            } else if let quiet = longestQuiet(from: perPeer ? host : nil) {
                // Every connection has a call open: the one that sent nothing for longest (an upload
                // left open, a client gone without closing) makes room, so a newcomer — a health check
                // above all — gets in while a crowd of open calls keeps its slots.
                let silent = ContinuousClock.now - (quiet.lastFrameAt ?? quiet.socket.openedAt)
                logger.info("closing connection from \(quiet.socket.peer) with \(quiet.openCalls) calls open and nothing sent for \(Int(silent.seconds)) s to make room: \(limit) is reached")
                quiet.fail(.unavailable, "connection closed to make room: \(limit) is reached and it had sent nothing for \(Int(silent.seconds)) s")
            } else {
                rpc.connectionRefused()
                logger.warning("refusing connection from \(connection.peer): \(limit) is reached and every connection has a call open")
                connection.budget = nil
                connection.send(FrameWire<TCPConnection>.statusFrame(
                    0, message: nil, error: RPCError(.resourceExhausted, "too many connections: \(limit) is reached")), sealing: true)
                connection.onClose = { [weak self] reason in self?.logger.debug("closed refused connection: \(reason)") }
                connection.close(afterFlushing: "too many connections")
                refused.append(connection)
                return
            }
        }
        let served = servesThrough?(self, connection) ?? serve(connection, over: connection)
        connections[ObjectIdentifier(served)] = served
        connectionsPerPeer[host, default: 0] += 1
        countedConnections += 1
        rpc.connectionOpened()
        connection.onClose = { [unowned self] reason in
            connections[ObjectIdentifier(served)] = nil
            uncount(served)
            rpc.connectionClosed()
            served.closed(reason: reason)
            let level: LogLevel = reason == "peer closed the connection" ? .debug : .info
            logger.log(level, "closed connection from \(served.socket.peer): \(reason)")
        }
        connection.onBudgetExceeded = { [unowned self] in budgetExceeded() }
        logger.debug("accepted connection from \(connection.peer)")
    }

    /// Serves `stream`, carried by the accepted `socket` (the same object for plain TCP; a `TLSStream`
    /// over it): its first byte picks the protocol, and the limits hold whichever it is.
    func serve<Stream: ByteStream>(_ stream: Stream, over socket: TCPConnection) -> SniffedConnection<Stream> {
        let served = SniffedConnection(stream: stream, socket: socket, server: self)
        stream.reader = ProtocolSniffer(stream) { [unowned served] kind in served.picked(kind) }
        return served
    }

    /// Tests only: serves each accepted connection as this makes it (over a test's stream, with
    /// `serve(_:over:)`) rather than over the TCP connection itself.
    var servesThrough: ((TCPServer, TCPConnection) -> any ServerConnection)?

    /// Stops counting `served` against the connection limits: it closes, or is being closed (loop thread).
    func uncount(_ served: any ServerConnection) {
        guard !served.uncounted else { return }
        served.uncounted = true
        countedConnections -= 1
        let host = served.socket.peerHost
        if let count = connectionsPerPeer[host], count > 1 { connectionsPerPeer[host] = count - 1 } else { connectionsPerPeer[host] = nil }
    }

    /// Refused connections waiting for their last status to be written; closed by the sweeper if
    /// their client does not read it.
    private var refused: [TCPConnection] = []

    /// The connection (from `host`, when given) with no open call to reclaim: one that never started
    /// a call before any that did, then the one with the oldest last frame or answer. (A socket that
    /// only keeps its slot, with a CANCEL of an unused id, had a frame more recently than a client
    /// that calls every 50 ms may have had; it went first all the same.)
    private func longestIdle(from host: String?) -> (any ServerConnection)? {
        var best: (any ServerConnection, Bool, ContinuousClock.Instant)?
        for served in connections.values where served.openCalls == 0 && !served.isFailing {
            let connection = served.socket
            if let host, connection.peerHost != host { continue }
            let quietSince = max(served.lastFrameAt ?? connection.openedAt, connection.lastWriteAt ?? connection.openedAt)
            let called = served.hasMadeCalls
            if best.map({ (!called && $0.1) || (called == $0.1 && quietSince < $0.2) }) ?? true { best = (served, called, quietSince) }
        }
        return best?.0
    }

    /// The connection (from `host`, when given) with calls open that has sent nothing for longest,
    /// at least `reclaimAfterQuiet`; the larger holder of the memory budget first among equals.
    private func longestQuiet(from host: String?) -> (any ServerConnection)? {
        let now = ContinuousClock.now
        var best: (any ServerConnection, ContinuousClock.Instant)?
        for served in connections.values where !served.isFailing {
            let connection = served.socket
            if let host, connection.peerHost != host { continue }
            let sentAt = served.lastFrameAt ?? connection.openedAt
            guard now - sentAt >= limits.reclaimAfterQuiet else { continue }
            if let (current, currentAt) = best {
                if sentAt > currentAt || (sentAt == currentAt && connection.budgetFootprint <= current.socket.budgetFootprint) { continue }
            }
            best = (served, sentAt)
        }
        return best?.0
    }

    /// Uploads open on the connections from `host` (loop thread).
    func uploadsOpen(from host: String) -> Int {
        connections.values.reduce(0) { $0 + ($1.socket.peerHost == host ? $1.openUploads : 0) }
    }

    /// Answers took the memory budget past its limit: closes the connections holding the most until
    /// it is within it again (on the loop's next turn, as this is called from inside a write).
    private func budgetExceeded() {
        guard !budgetCheckScheduled else { return }
        budgetCheckScheduled = true
        loop.execute { [self] in
            budgetCheckScheduled = false
            enforceBudget(making: 0)
        }
    }

    /// A large frame was refused for want of budget: the connection holding the most of it is
    /// closed too when it holds at least as much as that frame wanted (the largest offender).
    func shedLargest(atLeast bytes: Int, sparing spared: any ServerConnection) {
        loop.assertInLoop()
        guard let largest = connections.values.filter({ $0 !== spared && !$0.socket.isClosed })
            .max(by: { $0.socket.budgetFootprint < $1.socket.budgetFootprint }),
            largest.socket.budgetFootprint >= bytes else { return }
        shed(largest)
    }

    /// How long a connection told to go for the memory budget has to read its answers and that
    /// status before it is closed outright, should the budget still be exhausted.
    static let budgetGrace: Duration = .seconds(1)

    /// Whether `served` was told why it is closed more than `budgetGrace` ago.
    private func hadItsGrace(_ served: any ServerConnection) -> Bool {
        served.socket.closingSince.map { ContinuousClock.now - $0 > Self.budgetGrace } ?? false
    }

    /// Closes `served` for the memory budget: told RESOURCE_EXHAUSTED (call id 0, behind the answers
    /// already written to it) and closed once that is sent; closed at once when it was told already,
    /// over `budgetGrace` ago, and still holds its bytes (the client does not read).
    private func shed(_ served: any ServerConnection) {
        let held = served.socket.budgetFootprint
        if hadItsGrace(served) {
            logger.warning("closing connection from \(served.socket.peer): it still holds \(held) bytes of the exhausted memory budget")
            served.socket.close(reason: "memory budget exhausted and the client does not read (the connection held \(held) bytes)")
        } else if !served.isFailing {
            logger.warning("closing connection from \(served.socket.peer): it holds \(held) bytes and the memory budget of \(budget.limit) bytes is exhausted")
            served.fail(.resourceExhausted, "memory budget exhausted: this connection held \(held) bytes of unread answers and unfinished frames")
        }
    }

    /// Closes the connections holding the most of the budget until `room` more bytes fit in it
    /// (loop thread). Connections told why they are closed over `budgetGrace` ago and still not
    /// flushed go first and at once, as they had their chance; the rest, largest first, are told
    /// RESOURCE_EXHAUSTED and closed once that is sent — what they hold no longer counts then, as
    /// it only shrinks (nothing more is queued or read on them).
    func enforceBudget(making room: Int) {
        loop.assertInLoop()
        guard budget.used + room > budget.limit else { return }
        let holders = connections.values.filter { $0.socket.budgetFootprint > 0 }
            .sorted { $0.socket.budgetFootprint > $1.socket.budgetFootprint }
        for served in holders where hadItsGrace(served) && budget.used + room > budget.limit { shed(served) }
        // Bytes of closed connections are released once their cancelled writes report back.
        var leaving = holders.filter { $0.isFailing || $0.socket.isClosed }.reduce(0) { $0 + $1.socket.budgetFootprint }
        for served in holders where !served.isFailing && !served.socket.isClosed && budget.used - leaving + room > budget.limit {
            shed(served)
            leaving += served.socket.budgetFootprint
        }
    }

    /// Closes connections that stalled mid-frame, never sent a frame, or sat idle too long (idle
    /// since the last request or answer, whichever came later).
    private func sweep() {
        loop.assertInLoop()
        let now = ContinuousClock.now
        refused.removeAll { connection in
            if connection.isClosed { return true }
            guard let since = connection.closingSince, now - since > limits.frameTimeout else { return false }
            connection.close(reason: "refused client did not read its status")
            return true
        }
        for served in Array(connections.values) {
            let connection = served.socket
            if let since = connection.closingSince {
                // Told why it is closed, but the client does not read: close without waiting more.
                if now - since > limits.frameTimeout { connection.close(reason: "closing, and the client does not read") }
            } else if let since = served.partialFrameSince, now - since > limits.frameTimeout {
                served.fail(.unavailable, "stalled: frame still incomplete after \(limits.frameTimeout) (stalled or too slow client)")
            } else if served.lastFrameAt == nil, now - connection.openedAt > limits.frameTimeout {
                served.fail(.unavailable, "stalled: no frame within \(limits.frameTimeout) of connecting")
            } else if served.openCalls > 0 {
                served.endStalledUploads(now: now)
            }
            // Quiet: no call open (nor one whose answer is being queued), no answer queued for the next flush, and
            // neither a frame nor a write for the idle timeout.
            if connection.closingSince == nil, served.openCalls == 0, !connection.hasUnflushedBytes,
               now - max(served.lastFrameAt ?? connection.openedAt, connection.lastWriteAt ?? connection.openedAt) > limits.idleTimeout {
                served.fail(.unavailable, "idle timeout: no call for \(limits.idleTimeout)")
            }
        }
    }

    /// Answers DEADLINE_EXCEEDED for call `id` (numbered `serial`) of `calls` once `deadline`
    /// passes, unless it finished (loop thread).
    func watch(_ deadline: ContinuousClock.Instant, of id: UInt64, serial: UInt64, method: String, in calls: any CallDeadlines) {
        loop.assertInLoop()
        let watched = WatchedCall(id: id, serial: serial, method: method, calls: calls)
        deadlines.add(watched, at: deadline, liveCalls: inFlight.load(ordering: .relaxed)) { call in
            call.calls.map { !$0.isOpen(call.id, serial: call.serial) } ?? true
        }
        if let due = deadlineTimerDue, due <= deadline { return }
        deadlineTimerDue = deadline
        deadlineTimer?.start(after: max(.zero, deadline - .now))
    }

    private func expireDeadlines() {
        loop.assertInLoop()
        deadlineTimerDue = nil
        let now = ContinuousClock.now
        for call in deadlines.popExpired(at: now) {
            call.calls?.end(call.id, serial: call.serial, error: RPCError(.deadlineExceeded, "deadline exceeded while serving \(call.method)"))
        }
        if let next = deadlines.earliest {
            deadlineTimerDue = next
            deadlineTimer?.start(after: max(.zero, next - now))
        }
    }

    /// Makes sure responses queued by workers are written within `WorkerPool.maxFlushDelay` (loop thread).
    func callStarted() {
        loop.assertInLoop()
        guard !flushTimerRunning, let flushTimer else { return }
        flushTimerRunning = true
        flushTimer.start(after: WorkerPool.maxFlushDelay, every: WorkerPool.maxFlushDelay)
    }

    private func flushStaleResponses() {
        loop.assertInLoop()
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
        guard !draining.exchange(true, ordering: .acquiringAndReleasing), let rpc, let loop else { return }
        // Health checks answer NOT_SERVING from now on, so clients move to other replicas.
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
            for served in Array(connections.values) { served.socket.close(afterFlushing: "server shutting down") }
        }
        while loop.submit({ [self] in !connections.isEmpty }), ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(10))
        }
        loop.submit { [self] in
            for served in Array(connections.values) {
                served.socket.close(reason: "server shutting down; answers not read within the \(grace) grace period")
            }
            for connection in refused { connection.close(reason: "server shutting down") }
            refused.removeAll()
        }
        loop.shutdown()
    }
}

/// A call whose deadline the server's loop watches.
private struct WatchedCall {
    let id: UInt64
    let serial: UInt64
    let method: String
    weak var calls: (any CallDeadlines)?
}
