import HTTP
import RPC
import Schema
import Synchronization

/// The Connect protocol (connectrpc.com) over HTTP/1.1 on the server, the decoding half: parses
/// requests strictly (`HTTPRequestParser`, limits as the binary port's: the body as its message
/// limit), turns each into a call of the connection's `ServerCallTable` — the same table, workers,
/// deadlines and stats as our frames — and `ConnectWire` writes the answers. Any method of any
/// service is served from its route: JSON through the generated JSON mapping (`JSONTranscoder`),
/// protobuf as it is.
///
/// HTTP/1.1 answers in order, so requests are taken one at a time: a pipelined request waits in the
/// parser's buffer (reading pauses while it grows) until the answer before it is written. A
/// malformed request is answered with its 4xx status and the connection closes; nothing of it, nor
/// anything after it, is dispatched.
///
/// Loop thread, except what the wire's `answered` hops back from.
final class ConnectServerConnection<Stream: ByteStream>: ServerConnection, ConnectionReader, @unchecked Sendable {
    let stream: Stream
    let socket: TCPConnection
    let server: TCPServer
    let calls: ServerCallTable<ConnectWire<Stream>>
    private let exchanges: ConnectExchanges
    private var parser: HTTPRequestParser
    /// Requests taken so far: the next one's call id.
    private var requests: UInt64 = 0
    /// A request is being answered; the next waits.
    private var busy = false
    /// Reading paused because pipelined requests piled up behind the one being answered.
    private var pausedBehindAnswer = false
    var uncounted = false
    private(set) var lastFrameAt: ContinuousClock.Instant?
    private(set) var partialFrameSince: ContinuousClock.Instant?

    /// Pipelined bytes buffered beyond which reading waits for the answer in progress.
    static var pipelineBuffer: Int { 64 << 10 }

    init(stream: Stream, socket: TCPConnection, server: TCPServer) {
        self.stream = stream
        self.socket = socket
        self.server = server
        let exchanges = ConnectExchanges()
        self.exchanges = exchanges
        calls = ServerCallTable(wire: ConnectWire(stream: stream, exchanges: exchanges), server: server, queue: CallQueue(connection: socket))
        parser = HTTPRequestParser(limits: .init(maxBodyBytes: server.limits.maxMessageSize))
    }

    /// Reads `stream` as HTTP from now on.
    func start() {
        exchanges.onAnswered = { [weak self, loop = stream.loop] keepAlive in
            guard let self else { return }
            loop.execute { self.answered(keepingAlive: keepAlive) }
        }
        stream.reader = self
    }

    var openCalls: Int { calls.openCalls }
    var hasMadeCalls: Bool { requests > 0 }
    var readsInBulk: Bool { false }
    var budgetedBytes: Int { 0 }
    func releaseBudget() {}

    /// Picked already: this connection exists because its first byte said HTTP.
    func picked(_ kind: ProtocolSniffer.Kind) {}

    // MARK: Reading requests

    func received(_ bytes: UnsafeRawBufferPointer) {
        stream.loop.assertInLoop()
        parser.append(bytes)
        if partialFrameSince == nil { partialFrameSince = .now }
        takeRequests()
    }

    /// Serves the buffered requests in order while none is being answered.
    private func takeRequests() {
        while !busy, !stream.isClosing, !stream.isClosed {
            let request: HTTPRequest?
            do {
                request = try parser.next()
            } catch {
                refuse(error)
                return
            }
            guard let request else { break }
            lastFrameAt = .now
            partialFrameSince = parser.hasPartialRequest ? .now : nil
            busy = true
            serve(request)
        }
        calls.startQueued()
        if busy, parser.bufferedBytes > Self.pipelineBuffer, !pausedBehindAnswer {
            pausedBehindAnswer = true
            stream.pauseReading()
        }
    }

    /// The answer to the request in progress is queued (loop thread).
    private func answered(keepingAlive: Bool) {
        busy = false
        guard keepingAlive else {
            close("the client asked to close, or the request could not be read to its end")
            return
        }
        if pausedBehindAnswer {
            pausedBehindAnswer = false
            stream.resumeReading()
        }
        takeRequests()
    }

    /// A request that cannot be read: its status (400 for anything malformed), then the end.
    private func refuse(_ error: HTTPParseError) {
        let response = HTTPResponse.text(error.status, error.reason)
        stream.send(bytes: response.serialized(closing: true), sealing: true)
        close("malformed HTTP request: \(error)")
    }

    private func close(_ reason: String) {
        guard !stream.isClosing, !stream.isClosed else { return }
        stream.close(afterFlushing: reason)
        if !socket.isClosed { server.uncount(self) }
    }

    // MARK: Serving one request

    private func serve(_ request: HTTPRequest) {
        requests += 1
        let id = requests
        let origin = request.headers["origin"]
        let keepAlive = request.keepsAlive
        let path = String(request.path)
        if request.method == "OPTIONS" {
            answerAtOnce(ConnectProtocol.preflight(request), keepAlive: keepAlive)
            return
        }
        if let routes = server.httpRoutes {
            if let route = routes.route(for: request) {
                serve(route, request, keepAlive: keepAlive, origin: origin)
                return
            }
            // A GET that is neither a route nor a Connect call (no such method, no connect=v1) is a
            // missing page, as any web server says, not a malformed call.
            if request.method == "GET", server.rpc.method(path) == nil, ConnectProtocol.query(request.query ?? "")["connect"] == nil {
                answerAtOnce(.text(404, "nothing at \(path)"), keepAlive: keepAlive, origin: origin)
                return
            }
        }
        guard request.method == "POST" || request.method == "GET" else {
            var response = HTTPResponse.text(405, "Connect calls are POST (or GET for methods without side effects)")
            response.headers.add("Allow", "POST, GET, OPTIONS")
            answerAtOnce(response, keepAlive: keepAlive, origin: origin)
            return
        }
        let method = server.rpc.method(path)
        let call: ConnectProtocol.Call
        do {
            call = try ConnectProtocol.Call(request, method: method, maxMessageSize: server.limits.maxMessageSize)
        } catch {
            switch error {
            case .http(let response):
                answerAtOnce(response, keepAlive: keepAlive, origin: origin)
            case .rpc(let error, let encoding):
                // A request that reached a method but cannot be its call: answered as a Connect error, counted.
                exchanges.begin(id, ConnectExchange(encoding: encoding, origin: origin, keepAlive: keepAlive, unknownMethod: method == nil))
                calls.refuse(id, CallHead(method: path, peer: stream.peer), error)
            }
            return
        }
        exchanges.begin(id, ConnectExchange(
            encoding: call.encoding, json: method?.json, gzip: call.acceptsGzip, origin: origin, keepAlive: keepAlive,
            unknownMethod: method == nil, cacheable: call.isGET, ifNoneMatch: request.headers["if-none-match"]))
        let head = CallHead(method: path, metadata: call.metadata, deadline: call.deadline, peer: stream.peer)
        _ = calls.open(id, head, clientStreams: false, payload: call.payload)
    }

    /// Runs a plain HTTP route's handler on the workers, in this connection's queue as its calls are,
    /// and writes its answer; counted in flight, so a draining server waits for it.
    private func serve(_ route: HTTPRoutes.Route, _ request: HTTPRequest, keepAlive: Bool, origin: String?) {
        let times = server.httpRouteTimes
        let job = HTTPRouteJob(
            route: route, request: request, stream: stream, exchanges: exchanges, keepAlive: keepAlive, origin: origin,
            server: server, workerTime: route.id < times.count ? times[route.id] : nil)
        server.inFlight.add(1, ordering: .relaxed)
        server.workers.submit(job, to: calls.queue)
    }

    /// Answers without a call (preflight, a request no call could be made of).
    private func answerAtOnce(_ response: HTTPResponse, keepAlive: Bool, origin: String? = nil) {
        var response = response
        ConnectProtocol.addCORS(to: &response.headers, origin: origin)
        stream.send(bytes: response.serialized(closing: !keepAlive))
        busy = false
        if !keepAlive { close("the client asked to close") }
    }

    // MARK: What the listener asks

    func fail(_ code: StatusCode, _ message: String) {
        stream.loop.assertInLoop()
        guard !stream.isClosing, !stream.isClosed else { return }
        // An idle keep-alive connection is closed without a word, as HTTP servers do; a client in the
        // middle of a request is told why.
        if busy || parser.hasPartialRequest {
            let status = code == .unavailable && parser.hasPartialRequest && !busy ? 408 : code.httpStatus
            stream.send(bytes: HTTPResponse.text(status, message).serialized(closing: true), sealing: true)
        }
        calls.cancelAll()
        close(message)
    }

    func closed(reason: String) { calls.closed(reason: reason) }
}

/// The encoding half of Connect on the server: a call's status becomes its HTTP response. Any thread.
struct ConnectWire<Stream: ByteStream>: CallWire {
    let stream: Stream
    let exchanges: ConnectExchanges

    func writeStatus(_ id: UInt64, message: [UInt8]?, error: RPCError?) {
        guard let exchange = exchanges.end(id) else { return }
        let response = exchange.unaryResponse(message: message, error: error)
        stream.send(bytes: response.serialized(closing: !exchange.keepAlive))
        exchanges.onAnswered?(exchange.keepAlive)
    }

    func writeMessage(_ id: UInt64, _ chunk: [UInt8], continues: Bool) {}

    func writeRequestCredit(_ id: UInt64, bytes: Int) {}
}

/// The requests being answered on one connection, by call id: how each wants its answer.
final class ConnectExchanges: @unchecked Sendable {
    private let open = Mutex<[UInt64: ConnectExchange]>([:])
    /// Called once an answer is queued, with whether the connection stays open; set before any call.
    var onAnswered: (@Sendable (Bool) -> Void)?

    func begin(_ id: UInt64, _ exchange: ConnectExchange) {
        open.withLock { $0[id] = exchange }
    }

    func end(_ id: UInt64) -> ConnectExchange? {
        open.withLock { $0.removeValue(forKey: id) }
    }
}

/// How one request wants its answer.
struct ConnectExchange: Sendable {
    var encoding: ConnectProtocol.Encoding
    var json: JSONTranscoder?
    var gzip = false
    var origin: String?
    var keepAlive: Bool
    var unknownMethod = false
    /// A GET: the answer carries an ETag and cache headers, and `ifNoneMatch` may make it a 304.
    var cacheable = false
    var ifNoneMatch: String?

    init(
        encoding: ConnectProtocol.Encoding, json: JSONTranscoder? = nil, gzip: Bool = false, origin: String?, keepAlive: Bool,
        unknownMethod: Bool = false, cacheable: Bool = false, ifNoneMatch: String? = nil
    ) {
        self.encoding = encoding
        self.json = json
        self.gzip = gzip
        self.origin = origin
        self.keepAlive = keepAlive
        self.unknownMethod = unknownMethod
        self.cacheable = cacheable
        self.ifNoneMatch = ifNoneMatch
    }

    /// The response of a unary call: its message in the request's encoding, or its error as
    /// Connect's JSON error body with the status Connect maps its code to.
    func unaryResponse(message: [UInt8]?, error: RPCError?) -> HTTPResponse {
        var response: HTTPResponse
        if let error {
            response = ConnectProtocol.errorResponse(error, status: unknownMethod ? 404 : nil)
        } else {
            var body = message ?? []
            if encoding == .json {
                do {
                    guard let json else { throw RPCError(.internalError, "the method has no JSON mapping") }
                    body = try json.response(body)
                } catch {
                    return finished(ConnectProtocol.errorResponse(failing: error))
                }
            }
            response = HTTPResponse(status: 200, headers: ["Content-Type": encoding.contentType], body: body)
            if cacheable {
                let tag = ConnectProtocol.entityTag(body)
                response.headers.add("ETag", tag)
                response.headers.add("Cache-Control", "private, no-cache")
                if let ifNoneMatch, ConnectProtocol.matches(ifNoneMatch, tag) {
                    return finished(HTTPResponse(status: 304, headers: response.headers))
                }
            }
            if gzip, body.count >= ConnectProtocol.compressionThreshold {
                response.body = Gzip.compress(body)
                response.headers.add("Content-Encoding", "gzip")
            }
        }
        return finished(response)
    }

    private func finished(_ response: HTTPResponse) -> HTTPResponse {
        var response = response
        ConnectProtocol.addCORS(to: &response.headers, origin: origin)
        if cacheable || gzip { response.headers.add("Vary", "Accept-Encoding, Origin") }
        return response
    }
}

/// One plain HTTP route's request on a worker: the handler runs there until it first waits
/// (`Task.immediate`, as a call's does), and its response goes out in the connection's order.
final class HTTPRouteJob<Stream: ByteStream>: WorkerJob, @unchecked Sendable {
    let route: HTTPRoutes.Route
    let request: HTTPRequest
    let stream: Stream
    let exchanges: ConnectExchanges
    let keepAlive: Bool
    let origin: String?
    let server: TCPServer
    let workerTime: WorkerTime?

    init(
        route: HTTPRoutes.Route, request: HTTPRequest, stream: Stream, exchanges: ConnectExchanges, keepAlive: Bool, origin: String?,
        server: TCPServer, workerTime: WorkerTime?
    ) {
        self.route = route
        self.request = request
        self.stream = stream
        self.exchanges = exchanges
        self.keepAlive = keepAlive
        self.origin = origin
        self.server = server
        self.workerTime = workerTime
    }

    func run() -> Bool {
        Task.immediate { [self] in
            var response = await route.handler(request)
            ConnectProtocol.addCORS(to: &response.headers, origin: origin)
            stream.send(bytes: response.serialized(closing: !keepAlive))
            server.inFlight.subtract(1, ordering: .releasing)
            exchanges.onAnswered?(keepAlive)
        }
        return true
    }
}
