import Base
import Connect
import Foundation
import Framing
import HTTP
import RPC
import Schema
import ServerCore
import ServerSeam
import Synchronization
import TCP
import TLSStreams

#if canImport(Glibc)
    import Glibc
#endif

/// Serves an `RPCServer` over TCP: libuv loops do all socket I/O; handlers run on a worker pool
/// (one worker per core, on Swift's cooperative pool), never on a loop thread, except the
/// built-in health, reflection and stats methods, which the loop answers at once (see
/// `ServerCallTable`). A connection is a byte stream (`TCPConnection`, TCP), the protocol its first byte
/// picks (`ProtocolSniffer`: our frames, `FrameServerConnection` in Framing; HTTP, `ConnectServerConnection` in
/// Connect; TLS, `TLSStream` in TLSStreams) and its calls (`ServerCallTable`, ServerCore), which the protocol sees
/// only through the seam (`ConnectionCalls`, `ConnectionHost`, ServerSeam): this is where the layers meet.
///
/// With `Limits.loops` above one, the first loop (the acceptor) accepts every connection, admits it
/// under the limits, and hands it to the loop serving the fewest connections, itself included; the
/// connection stays there until it closes (a `ServerLoop` each: its sweep, deadlines and flushes).
/// One acceptor, as swift-nio's server bootstrap hands accepted channels to its child loops, rather
/// than a listening socket per loop with `SO_REUSEPORT`: the kernel's hash cannot see how busy a
/// loop is, the limits (and the reclaiming of an idle connection for a newcomer) need one place that
/// decides one newcomer at a time, and a socket with `SO_REUSEPORT` lets a second server started on
/// the same port share it silently instead of failing to bind. The acceptor's cost is an accept, a
/// `dup` and a wake-up of the chosen loop per connection: far below what serving it costs.
public final class TCPServer: ServerTransport, ConnectionHost, @unchecked Sendable {
    /// Limits that protect the server from clients that misbehave or are simply too many: one value, handed down to
    /// the layers that enforce them.
    public typealias Limits = ServerLimits

    /// The server its calls go to, from `listen` on.
    public private(set) var rpc: RPCServer!
    /// Plain HTTP routes served beside Connect on the HTTP side (set before `listen`), and each as the server serves
    /// it (by `HTTPRoutes.Route.id`): guarded, counted, its worker time measured (bound when listening starts).
    public var httpRoutes: HTTPRoutes? { httpFace.routes }
    /// What HTTP connections serve beside Connect calls: the routes, bound when listening starts, and the answer cache.
    private var httpFace = HTTPFace()
    public let limits: Limits
    /// The address the server listens on, with the port it got (useful when asked for port 0).
    public private(set) var address: String = ""
    public var port: Int { Int(address.split(separator: ":").last ?? "0") ?? 0 }

    /// The event loops doing this server's socket I/O, made by `listen` (named after the server);
    /// the first accepts connections. Not changed after `listen`, so readable from any thread.
    private(set) var loops: [ServerLoop] = []
    /// The acceptor's event loop (with one loop, every connection's).
    var loop: EventLoop! { loops.first?.loop }
    private let host: String
    private let requestedPort: Int
    /// The logger given, else one labelled with the server's name once `listen` knows it.
    private(set) var logger: Logger
    /// Warnings a client can cause at will, logged once a minute per kind.
    let refusals = LogWindow()
    private let loggerGiven: Bool
    /// Acceptor loop only.
    private var listener: TCPListener?
    /// Connections counted against the limits, in all and per client address: being closed (told
    /// why, lingering) no longer counts, as such a connection serves nothing and goes within
    /// `TCPConnection.lingerTime`. The acceptor counts a newcomer in; any loop counts its own out.
    private let counted = Mutex<(all: Int, perPeer: [String: Int])>((0, [:]))
    /// Large frames arriving and answers unsent, over all connections.
    public let budget: MemoryBudget
    /// What every connection's calls share (the server core): the workers, calls in flight, uploads, draining.
    let core: CallServer

    /// What the server holds now, loop by loop: what an operator (or a test) reads of its connections to see the
    /// limits, the spreading over the loops and the answers waiting for slow readers at work. Each loop's part is
    /// read on its own thread, so it is consistent per loop, not across loops.
    public struct Figures: Sendable, Equatable {
        /// Connections being served on each loop (the acceptor first), closing ones included until they are gone.
        public var connectionsPerLoop: [Int]
        /// Of those, connections told why they are closed and waiting for that to be written.
        public var connectionsFailing: Int
        /// Connections counted against the limits (`maxConnections`, per client): a closing one no longer counts.
        public var connectionsCounted: Int
        /// Answer bytes queued on the connections and not yet written.
        public var unwrittenAnswerBytes: Int
        /// Calls being served or queued, and uploads open, over all connections.
        public var callsInFlight: Int
        public var uploadsInProgress: Int

        /// Connections being served, over every loop.
        public var connectionsOpen: Int { connectionsPerLoop.reduce(0, +) }
    }

    /// The server's figures now. Call off its loops (it waits for each loop to read its part).
    public func figures() -> Figures {
        let perLoop = loops.map { serving in
            serving.loop.submit {
                (
                    open: serving.connections.count, failing: serving.connections.values.filter(\.isFailing).count,
                    unwritten: serving.connections.values.reduce(0) { $0 + $1.socket.unwrittenBytes }
                )
            }
        }
        return Figures(
            connectionsPerLoop: perLoop.map(\.open), connectionsFailing: perLoop.reduce(0) { $0 + $1.failing },
            connectionsCounted: counted.withLock { $0.all },
            unwrittenAnswerBytes: perLoop.reduce(0) { $0 + $1.unwritten },
            callsInFlight: core.inFlight.load(ordering: .relaxed),
            uploadsInProgress: core.uploadsOpen.load(ordering: .relaxed))
    }

    /// A server for `host:port` (port 0: any free one) that listens once given an `RPCServer`
    /// (`rpc.serve(over:)`).
    public init(host: String = "127.0.0.1", port: Int, limits: Limits = Limits(), logger: Logger? = nil) {
        self.host = host
        requestedPort = port
        self.limits = limits
        self.logger = logger ?? Logger(label: "tcp-server")
        loggerGiven = logger != nil
        budget = MemoryBudget(limit: limits.memoryBudget)
        core = CallServer(limits: limits)
    }

    /// Serves `rpc`, binding and listening at once; throws when the address is taken or invalid.
    public convenience init(
        rpc: RPCServer, host: String = "127.0.0.1", port: Int, limits: Limits = Limits(), logger: Logger? = nil
    ) throws {
        self.init(host: host, port: port, limits: limits, logger: logger)
        try rpc.serve(over: self)
    }

    /// Serves `routes` on HTTP requests before Connect: GETs they match run their handler on the
    /// workers, under the same limits; others are Connect's, or 404. Call before `listen`.
    public func serveHTTP(_ routes: HTTPRoutes) {
        precondition(rpc == nil, "HTTP routes are set before the server listens")
        httpFace.routes = routes
    }

    /// Keeps the answers of `policy`'s methods and routes (one cache for both) and sends them again to the same request
    /// on the same data (see `AnswerCachePolicy`). Call before `listen`.
    public func cacheAnswers(_ policy: AnswerCachePolicy) {
        precondition(rpc == nil, "the answer cache is set before the server listens")
        httpFace.answerCache = AnswerCache(policy: policy)
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
        guard (1...1024).contains(limits.loops) else {
            throw RPCError(.invalidArgument, "loops must be 1-1024 (got \(limits.loops))")
        }
        rpc = server
        core.serve(server)
        httpFace.bindings = httpRoutes?.all.map { server.bind($0.binding.name, guardedAs: $0.binding.guardedAs) } ?? []
        if !loggerGiven { logger = Logger(label: server.name) }
        // Thread names beyond the first loop's carry its number (Linux keeps 15 characters of one).
        loops = (0..<limits.loops).map { index in
            ServerLoop(
                loop: EventLoop(name: "\(server.name)-loop" + (index == 0 ? "" : "\(index)")), index: index,
                server: self)
        }
        // Turns summed over the loops, the longest the longest of any.
        server.reportLoop { [turns = loops.map(\.loop.turns)] in
            turns.map(\.snapshot).reduce(into: LoopFigures()) { all, one in
                all.turns += one.turns
                all.busySeconds += one.busySeconds
                all.longestMilliseconds = max(all.longestMilliseconds, one.longestMilliseconds)
                all.turnsOver = zip(all.turnsOver, one.turnsOver).map(+)
            }
        }
        guard let socketAddress = SocketAddress(host: host, port: requestedPort) else {
            stopLoops()
            throw RPCError(
                .invalidArgument, "cannot listen on \(host):\(requestedPort): not a numeric IP address and port")
        }
        // The other loops' timers run before the listener hands them a connection.
        for serving in loops.dropFirst() { serving.loop.submit { serving.start() } }
        let outcome: Result<String, RPCError> = loop.submit { self.listen(socketAddress) }
        switch outcome {
        case .success(let bound):
            address = bound
        case .failure(let error):
            stopLoops()
            throw error
        }
    }

    private func stopLoops() {
        for serving in loops { serving.loop.shutdown() }
        loops = []
        rpc = nil
        core.serve(nil)
    }

    private func listen(_ socketAddress: SocketAddress) -> Result<String, RPCError> {
        let opened = TCPListener.open(
            loop: loop, address: socketAddress, highWater: limits.writeHighWater
        ) { [weak self] connection in self?.accept(connection) }
        guard case .success(let listener) = opened else { return opened.map(\.address) }
        self.listener = listener
        loops[0].start()
        return .success(listener.address)
    }

    /// A connection the listener accepted (acceptor loop): served when the limits allow it; past one,
    /// it takes the place of a connection reclaimed for it, or is refused.
    private func accept(_ connection: TCPConnection) {
        loops[0].loop.assertInLoop()
        connection.learnPeer()
        admit(connection)
    }

    private func admit(_ connection: TCPConnection) {
        let host = connection.peerHost
        let (all, fromPeer) = counted.withLock { ($0.all, $0.perPeer[host, default: 0]) }
        guard all >= limits.maxConnections || fromPeer >= limits.maxConnectionsPerPeer else { return place(connection) }
        let perPeer = fromPeer >= limits.maxConnectionsPerPeer
        let limit =
            perPeer
            ? "the limit of \(limits.maxConnectionsPerPeer) connections from \(host)"
            : "the limit of \(limits.maxConnections) connections"
        // As servers reclaim idle keep-alive connections: the one quiet longest with no open call
        // makes room; failing that, the one with calls open that sent nothing for longest (see
        // `ServerLoop.reclaimCandidate`); only when every connection has a call open and sent something
        // lately is the newcomer refused.
        if loops.count == 1 {
            if let candidate = loops[0].reclaimCandidate(from: perPeer ? host : nil),
                loops[0].reclaim(candidate, limit: limit)
            {
                place(connection)
            } else {
                refuse(connection, limit: limit)
            }
            return
        }
        // Several loops: each offers its best, read on its own thread, and the acceptor picks among
        // them as one loop would. The listener waits meanwhile (newcomers wait in the kernel's queue),
        // so newcomers are admitted one at a time and the limits hold exactly.
        listener?.pause()
        let acceptor = loops[0].loop
        let offers = Offers(expected: loops.count)
        for serving in loops {
            serving.loop.execute { [self] in
                let offer = serving.reclaimCandidate(from: perPeer ? host : nil)
                acceptor.execute { [self] in
                    guard offers.add(offer) else { return }
                    guard let best = offers.best, !isDraining else { return refuse(connection, limit: limit) }
                    let owner = loops[best.loop]
                    owner.loop.execute { [self] in
                        let reclaimed = owner.reclaim(best, limit: limit)
                        // Gone meanwhile: it closed (making room) or another took its place; ask again.
                        acceptor.execute { [self] in reclaimed ? place(connection) : admit(connection) }
                    }
                }
            }
        }
    }

    /// The offers of the loops for one newcomer (acceptor loop).
    private final class Offers: @unchecked Sendable {
        private let expected: Int
        private var count = 0
        private(set) var best: ReclaimCandidate?

        init(expected: Int) { self.expected = expected }

        /// Adds one loop's offer; true when it was the last.
        func add(_ offer: ReclaimCandidate?) -> Bool {
            count += 1
            if let offer, best.map({ offer.goesBefore($0) }) ?? true { best = offer }
            return count == expected
        }
    }

    /// Counts `connection` in and serves it on the loop with the fewest connections (`leastLoaded`),
    /// handing the socket over when that is not the acceptor's.
    private func place(_ connection: TCPConnection) {
        defer { listener?.resume() }
        let host = connection.peerHost
        counted.withLock { counted in
            counted.all += 1
            counted.perPeer[host, default: 0] += 1
        }
        let target = leastLoaded()
        target.load.add(1, ordering: .relaxed)
        if target === loops[0] {
            connection.start()
            return target.serve(connection)
        }
        guard let descriptor = connection.detachDescriptor() else {
            logger.warning("cannot hand the connection from \(connection.peer) to \(target.loop.name): dup failed")
            return release(host: host, on: target)
        }
        let peer = connection.peer, highWater = limits.writeHighWater
        // Arriving once shutting down, it may come after its loop closed its connections: closed at once.
        target.loop.execute { [self] in
            guard !isDraining,
                let adopted = TCPConnection.adopt(descriptor, loop: target.loop, peer: peer, highWater: highWater)
            else {
                if !isDraining {
                    logger.warning(
                        "cannot serve the connection from \(peer) on \(target.loop.name): uv_tcp_open failed")
                }
                _ = Glibc.close(descriptor)
                return release(host: host, on: target)
            }
            adopted.start()
            target.serve(adopted)
        }
    }

    /// The loop serving the fewest connections; among equals, the one after the last chosen (round
    /// robin). Connections that come and go one after another (an accept storm) are then spread too,
    /// rather than all served by the acceptor, which already accepts for every loop (acceptor loop).
    private func leastLoaded() -> ServerLoop {
        var target = loops[nextLoop % loops.count]
        var fewest = target.load.load(ordering: .relaxed)
        for offset in 1..<loops.count where fewest > 0 {
            let serving = loops[(nextLoop + offset) % loops.count]
            let load = serving.load.load(ordering: .relaxed)
            if load < fewest { (target, fewest) = (serving, load) }
        }
        nextLoop = target.index + 1
        return target
    }

    /// Where `leastLoaded` starts looking (acceptor loop).
    private var nextLoop = 0

    /// Answers `connection` RESOURCE_EXHAUSTED and closes it (acceptor loop).
    private func refuse(_ connection: TCPConnection, limit: String) {
        defer { listener?.resume() }
        connection.start()
        rpc.connectionRefused()
        logger.warning(
            "refusing connection from \(connection.peer): \(limit) is reached and every connection has a call open")
        connection.send(
            FrameWire<TCPConnection>.statusFrame(
                0, message: nil, error: RPCError(.resourceExhausted, "too many connections: \(limit) is reached")),
            sealing: true)
        connection.onClose = { [weak self] reason in self?.logger.debug("closed refused connection: \(reason)") }
        connection.close(afterFlushing: "too many connections")
        loops[0].refused.append(connection)
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

    /// The loop of a connection (or stream) on `loop`.
    func serving(_ loop: EventLoop) -> ServerLoop {
        loops.first { $0.loop === loop } ?? loops[0]
    }

    /// Runs `work` on every loop but `serving`, each on its own thread.
    func onOtherLoops(than serving: ServerLoop, _ work: @escaping @Sendable (ServerLoop) -> Void) {
        for other in loops where other !== serving { other.loop.execute { work(other) } }
    }

    // MARK: What the protocols ask of the server (`ConnectionHost`)

    package var rpcServer: RPCServer { rpc }

    /// The calls of a connection over `socket` that `wire` answers on: the server core's table, served on the
    /// socket's loop, queued in the connection's own turn on the workers.
    func calls(over wire: any CallWire, socket: TCPConnection) -> ServerCallTable {
        core.calls(over: wire, on: serving(socket.loop).calls, queue: CallQueue(connection: socket))
    }

    /// What HTTP connections serve beside Connect calls.
    var face: HTTPFace { httpFace }

    /// Stops counting `served` against the connection limits: it closes, or is being closed (its loop's thread).
    package func release(_ served: any ServerConnection) {
        guard !served.uncounted else { return }
        served.uncounted = true
        release(host: served.socket.peerHost, on: serving(served.socket.loop))
    }

    private func release(host: String, on serving: ServerLoop) {
        serving.load.subtract(1, ordering: .relaxed)
        counted.withLock { counted in
            counted.all -= 1
            if let count = counted.perPeer[host], count > 1 {
                counted.perPeer[host] = count - 1
            } else {
                counted.perPeer[host] = nil
            }
        }
    }

    /// A large frame was refused for want of budget (its connection's loop thread): see `ServerLoop.shedLargest`.
    package func shedLargest(atLeast bytes: Int, sparing spared: any ServerConnection) {
        serving(spared.socket.loop).shedLargest(atLeast: bytes, sparing: spared)
    }

    /// Whether new calls are refused (UNAVAILABLE) because the server is shutting down.
    var isDraining: Bool { core.isDraining }

    /// Graceful shutdown: health turns NOT_SERVING, the listener closes, new calls get UNAVAILABLE,
    /// calls in flight get up to `grace` to finish and their answers what is left of it to be
    /// written; then every connection, on every loop, closes and the loops stop. Calling it again
    /// returns at once.
    public func shutdown(grace: Duration) async {
        guard core.drain(), let rpc, let loop else { return }
        // Health checks answer NOT_SERVING from now on, so clients move to other replicas.
        rpc.isServing = false
        loop.execute { [self] in
            listener?.close()
            listener = nil
        }
        let deadline = ContinuousClock.now + grace
        while core.inFlight.load(ordering: .acquiring) > 0, ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(10))
        }
        let abandoned = core.inFlight.load(ordering: .acquiring)
        if abandoned > 0 {
            logger.warning("\(abandoned) call(s) still running after the \(grace) grace period; closing anyway")
        }
        for serving in loops {
            serving.loop.submit {
                serving.stopTimers()
                // Answers still in an outbox (a worker's burst had not ended, or the client reads slowly)
                // are written before the connection closes.
                for served in Array(serving.connections.values) {
                    served.socket.close(afterFlushing: "server shutting down")
                }
            }
        }
        while loops.contains(where: { serving in serving.loop.submit { !serving.connections.isEmpty } }),
            ContinuousClock.now < deadline
        {
            try? await Task.sleep(for: .milliseconds(10))
        }
        for serving in loops {
            serving.loop.submit {
                for served in Array(serving.connections.values) {
                    served.socket.close(
                        reason: "server shutting down; answers not read within the \(grace) grace period")
                }
                for connection in serving.refused { connection.close(reason: "server shutting down") }
                serving.refused.removeAll()
            }
        }
        for serving in loops { serving.loop.shutdown() }
    }
}
