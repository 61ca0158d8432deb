import Base
import HTTP
import RPC
import Schema
import ServerSeam
import Synchronization
import TCP

/// The Connect protocol (connectrpc.com) over HTTP/1.1 on the server, the decoding half: parses
/// requests strictly (`HTTPRequestParser`, limits as the binary port's: the body as its message
/// limit), turns each into a call of the connection's `ConnectionCalls` — the server core's table, workers,
/// deadlines and stats as our frames — and `ConnectWire` writes the answers. Any method of any
/// service is served from its route: JSON through the generated JSON mapping (`JSONTranscoder`),
/// protobuf as it is.
///
/// HTTP/1.1 answers in order, so requests are taken one at a time: a pipelined request waits in the
/// parser's buffer (reading pauses while it grows) until the answer before it is written. A
/// malformed request is answered with its 4xx status and the connection closes; nothing of it, nor
/// anything after it, is dispatched.
///
/// A streaming call's body (`application/connect+…`) is read as it comes, envelope by envelope:
/// a client stream's requests go to its handler's inbox within the inbox's credit — reading the
/// socket stops while the inbox is full, as no HTTP client grants credit — and a server stream's one
/// request opens its call once the body ended (see `StreamedBody`).
///
/// Loop thread, except what the wire's `answered` hops back from.
package final class ConnectServerConnection<Stream: ByteStream, Calls: ConnectionCalls>: ServerConnection,
    ConnectionReader,
    @unchecked Sendable
{
    package let stream: Stream
    package let socket: TCPConnection
    /// The server that accepted it, and what its HTTP side serves beside Connect calls.
    package let host: any ConnectionHost
    package let face: HTTPFace
    /// The connection's calls, served by the server core, and how their answers are written.
    package let calls: Calls
    package let wire: ConnectWire<Stream>
    private let exchanges: ConnectExchanges
    private var parser: HTTPRequestParser
    /// Requests taken so far: the next one's call id.
    private var requests: UInt64 = 0
    /// A request is being answered; the next waits.
    private var busy = false
    /// Reading paused because pipelined requests piled up behind the one being answered.
    private var pausedBehindAnswer = false
    /// The streamed body of the request being served, until it ended.
    private var body: StreamedBody?
    /// Reading paused because the client stream's inbox has no credit for the next message.
    private var waitingForCredit = false
    package var uncounted = false
    package private(set) var lastFrameAt: ContinuousClock.Instant?
    package private(set) var partialFrameSince: ContinuousClock.Instant?

    /// Pipelined bytes buffered beyond which reading waits for the answer in progress.
    package static var pipelineBuffer: Int { 64 << 10 }
    /// Bytes of a body answered before its end that are read and dropped to keep the connection for the
    /// next request (nginx discards an unread body the same way); past them the connection closes.
    package static var drainLimit: Int { 1 << 20 }
    /// Bytes of the current body dropped since its call was answered; nil while it is not draining.
    private var drained: Int?

    /// Serves `stream`, carried by `socket`, for `host`: Connect calls (those `calls` makes for its wire) and `face`.
    package init(
        stream: Stream, socket: TCPConnection, host: any ConnectionHost, face: HTTPFace,
        calls makeCalls: (ConnectWire<Stream>) -> Calls
    ) {
        self.stream = stream
        self.socket = socket
        self.host = host
        self.face = face
        let exchanges = ConnectExchanges()
        self.exchanges = exchanges
        wire = ConnectWire(stream: stream, exchanges: exchanges)
        calls = makeCalls(wire)
        parser = HTTPRequestParser(limits: .init(maxBodyBytes: host.limits.maxMessageSize))
    }

    /// Reads `stream` as HTTP from now on.
    package func start() {
        exchanges.onAnswered = { [weak self, loop = stream.loop] keepAlive in
            guard let self else { return }
            loop.execute { self.answered(keepingAlive: keepAlive) }
        }
        exchanges.onCredit = { [weak self, loop = stream.loop] in
            guard let self else { return }
            loop.execute { self.creditArrived() }
        }
        stream.reader = self
    }

    package var openCalls: Int { calls.openCalls }
    package var hasMadeCalls: Bool { requests > 0 }
    package var openUploads: Int { calls.openUploads }
    package func endStalledUploads(now: ContinuousClock.Instant) { calls.endStalledUploads(now: now) }
    /// Reads into a large body (one the budget holds bytes for, as a large frame of ours) or into one
    /// being dropped share the loop's bulk budget per turn, so forty of them cannot hold a turn for
    /// the time it takes to copy tens of MiB into fresh pages (a 100-130 ms turn before).
    package var readsInBulk: Bool { budgetedBytes > 0 || drained != nil }
    package var budgetedBytes: Int { reservedBody + (body?.envelopes.reserved ?? 0) }

    package func releaseBudget() {
        body?.envelopes.releaseReserved()
        releaseBodyBudget()
    }

    /// Bytes of the server's memory budget held for the unary body being joined.
    private var reservedBody = 0

    /// Takes what the body being joined announced of the memory budget, as our frames take a large
    /// frame's length when its header arrives; false when it does not fit.
    private func reserveBody() -> Bool {
        let wanted = parser.bodyBytesExpected
        guard wanted >= MemoryBudget.largeFrame, wanted > reservedBody, let budget = stream.budget else { return true }
        guard budget.reserve(wanted - reservedBody) else { return false }
        reservedBody = wanted
        parser.reserveBodyCapacity()
        return true
    }

    private func releaseBodyBudget() {
        guard reservedBody > 0 else { return }
        stream.budget?.release(reservedBody)
        reservedBody = 0
    }

    /// Picked already: this connection exists because its first byte said HTTP.
    package func picked(_ kind: ProtocolSniffer.Kind) {}

    // MARK: Reading requests

    package func received(_ bytes: UnsafeRawBufferPointer) {
        stream.loop.assertInLoop()
        parser.append(bytes)
        if partialFrameSince == nil { partialFrameSince = .now }
        readBody()
        takeRequests()
        if waitingForCredit { stream.pauseReading() }
    }

    /// Serves the buffered requests in order while none is being answered.
    private func takeRequests() {
        while !busy, body == nil, !stream.isClosing, !stream.isClosed {
            let request: HTTPRequest?
            do {
                request = try parser.next(streamingBodyOf: ConnectProtocol.isStreaming)
            } catch {
                refuse(error)
                return
            }
            guard let request else {
                if refusedBeforeBody() { return }
                guard reserveBody() else {
                    refuseForBudget()
                    return
                }
                break
            }
            headChecked = false
            releaseBodyBudget()
            lastFrameAt = .now
            partialFrameSince = parser.hasPartialRequest ? .now : nil
            busy = true
            if parser.isStreamingBody {
                serveStream(request)
                readBody()
            } else {
                serve(request)
            }
        }
        calls.startQueued()
        if busy, parser.bufferedBytes > Self.pipelineBuffer, !pausedBehindAnswer {
            pausedBehindAnswer = true
            stream.pauseReading()
        }
    }

    /// The guard was asked about the head of the request whose body is arriving.
    private var headChecked = false

    /// Asks the guard about a call whose head arrived before its body, once: a caller it refuses is answered now and
    /// the connection closes after the answer, so a body it sent (60 MiB, or a small one inflating to as much) is
    /// never taken in, let alone decoded — an unauthenticated write costs reading its head. A body that arrives with
    /// its head is not held back for this: its call meets the guard on the worker, before anything decodes it.
    private func refusedBeforeBody() -> Bool {
        guard !headChecked, let request = parser.headAwaitingBody, request.method == "POST" else { return false }
        headChecked = true
        let path = String(request.path)
        let head = CallHead(method: path, metadata: ConnectProtocol.Call.metadata(request.headers), peer: stream.peer)
        guard let refusal = host.rpcServer.refusal(of: head) else { return false }
        requests += 1
        busy = true
        let encoding: ConnectProtocol.Encoding =
            ConnectProtocol.mediaType(request.headers["content-type"]).hasSuffix("proto") ? .proto : .json
        exchanges.begin(
            requests, ConnectExchange(encoding: encoding, origin: request.headers["origin"], keepAlive: false))
        calls.refuse(requests, head, refusal)
        return true
    }

    /// The answer to the request in progress is queued (loop thread).
    private func answered(keepingAlive: Bool) {
        busy = false
        guard keepingAlive else {
            close("the client asked to close, or the request could not be read to its end")
            return
        }
        if let body {
            // Answered before its body ended (the handler stopped reading, or the call was refused): the
            // rest is nobody's. A little is read and dropped so the connection serves the next request;
            // a body announcing more than that is not read on the chance it ends.
            if let remaining = parser.bodyBytesRemaining, remaining > Self.drainLimit {
                close("answered before the request's body ended (\(remaining) bytes still to come)")
                return
            }
            body.pending = nil
            body.purpose = .discarded
            body.envelopes.discardAll()
            drained = 0
            if waitingForCredit {
                waitingForCredit = false
                stream.resumeReading()
            }
            if pausedBehindAnswer {
                pausedBehindAnswer = false
                stream.resumeReading()
            }
            readBody()
            takeRequests()
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
        stream.send(response, closing: true, sealing: true)
        close("malformed HTTP request: \(error)")
    }

    /// A body the memory budget cannot hold now: 503 with Connect's `resource_exhausted`, and the
    /// end (the rest of the body is not read).
    private func refuseForBudget() {
        let wanted = parser.bodyBytesExpected
        var response = ConnectProtocol.errorResponse(
            RPCError(
                .resourceExhausted, "the server's memory budget cannot hold a body of \(wanted) bytes now; retry later"),
            status: 503)
        response.headers.add("Retry-After", "1")
        stream.send(response, closing: true, sealing: true)
        close("a body of \(wanted) bytes does not fit in the memory budget")
    }

    private func close(_ reason: String) {
        guard !stream.isClosing, !stream.isClosed else { return }
        stream.close(afterFlushing: reason)
        if !socket.isClosed { host.release(self) }
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
        if let routes = face.routes {
            if let route = routes.route(for: request) {
                serve(route, request, keepAlive: keepAlive, origin: origin)
                return
            }
            // A GET (or HEAD) that is neither a route nor a Connect call (no such method, no connect=v1) is a
            // missing page, as any web server says, not a malformed call.
            let isHEAD = request.method == "HEAD"
            if request.method == "GET" || isHEAD, host.rpcServer.method(path) == nil,
                ConnectProtocol.query(request.query ?? "")["connect"] == nil
            {
                answerAtOnce(.text(404, "nothing at \(path)"), keepAlive: keepAlive, origin: origin, headOnly: isHEAD)
                return
            }
        }
        guard request.method == "POST" || request.method == "GET" else {
            var response = HTTPResponse.text(405, "Connect calls are POST (or GET for methods without side effects)")
            response.headers.add("Allow", "POST, GET, OPTIONS")
            answerAtOnce(response, keepAlive: keepAlive, origin: origin)
            return
        }
        let method = host.rpcServer.method(path)
        var call: ConnectProtocol.Call
        var kept: ConnectExchange.Kept?
        do {
            call = try ConnectProtocol.Call(request, method: method)
            // Kept answers are found by the request as it came; a compressed one (rare for reads) is not looked up.
            if let cache = face.answerCache, cache.covers(path), method?.info.sideEffectFree == true,
                call.compression == .identity
            {
                let key = AnswerCache.Key(
                    method: path, json: call.encoding == .json, gzip: call.acceptsGzip, get: call.isGET,
                    request: call.payload)
                let (answer, version) = cache.lookup(key)
                if let answer,
                    answerFromCache(answer, call, path: path, request: request, keepAlive: keepAlive, origin: origin)
                {
                    return
                }
                kept = version.map { ConnectExchange.Kept(cache: cache, key: key, version: $0) }
            }
        } catch {
            switch error {
            case .http(let response):
                answerAtOnce(response, keepAlive: keepAlive, origin: origin)
            case .rpc(let error, let encoding):
                // A request that reached a method but cannot be its call: answered as a Connect error, counted.
                exchanges.begin(
                    id,
                    ConnectExchange(
                        encoding: encoding, origin: origin, keepAlive: keepAlive, unknownMethod: method == nil))
                calls.refuse(id, CallHead(method: path, peer: stream.peer), error)
            }
            return
        }
        exchanges.begin(
            id,
            ConnectExchange(
                encoding: call.encoding, json: method?.json, gzip: call.acceptsGzip, origin: origin,
                keepAlive: keepAlive,
                unknownMethod: method == nil, cacheable: call.isGET, ifNoneMatch: request.headers["if-none-match"],
                kept: kept))
        let head = CallHead(method: path, metadata: call.metadata, deadline: call.deadline, peer: stream.peer)
        let decoder = call.decoder(maxMessageSize: host.limits.maxMessageSize, budget: stream.budget)
        _ = calls.open(id, head, clientStreams: false, payload: call.payload, decoder: decoder)
    }

    /// Sends an answer kept for this very request (`AnswerCache`) at once, on the loop: no task, no handler,
    /// no transcoding. The call still passes the server's guard first — false when it does not, and the call then
    /// opens as any other to be refused there — and counts in its method's stats.
    private func answerFromCache(
        _ answer: HTTPResponse, _ call: ConnectProtocol.Call, path: String, request: HTTPRequest, keepAlive: Bool,
        origin: String?
    ) -> Bool {
        let arrived = ContinuousClock.now
        guard
            host.rpcServer.admits(
                CallHead(method: path, metadata: call.metadata, deadline: call.deadline, peer: stream.peer))
        else {
            return false
        }
        let exchange = ConnectExchange(
            encoding: call.encoding, origin: origin, keepAlive: keepAlive, cacheable: call.isGET,
            ifNoneMatch: request.headers["if-none-match"])
        stream.send(exchange.answer(ok: answer), closing: !keepAlive)
        host.rpcServer.countKept(path, since: arrived)
        busy = false
        if !keepAlive { close("the client asked to close") }
        return true
    }

    /// Runs a plain HTTP route as a call of its binding (`HTTPRouteJob`) on the workers, in this connection's queue as
    /// its calls are, and writes its answer; counted in flight, so a draining server waits for it. A route the answer
    /// cache covers is answered here at once from its kept bytes when it has them and the guard admits the caller,
    /// as a Connect call is.
    private func serve(_ route: HTTPRoutes.Route, _ request: HTTPRequest, keepAlive: Bool, origin: String?) {
        let bound = face.bindings[route.id]
        var kept: HTTPRouteJob<Stream>.Kept?
        if let cache = face.answerCache, cache.covers(bound.name) {
            let key = AnswerCache.Key(route: bound.name, request)
            let (answer, version) = cache.lookup(key)
            if let answer, answerFromCache(answer, bound, request, keepAlive: keepAlive, origin: origin) { return }
            kept = HTTPRouteJob.Kept(cache: cache, key: key, version: version)
        }
        let job = HTTPRouteJob(
            route: route, bound: bound, request: request, stream: stream, exchanges: exchanges, keepAlive: keepAlive,
            origin: origin, routes: face.routes!, rpc: host.rpcServer, kept: kept
        ) { [calls] in calls.jobEnded() }
        calls.run(job)
    }

    /// Sends a route's kept answer at once, on the loop, as `HTTPRouteJob` would send it (a 304 for its tag, its head
    /// alone to a HEAD); false when the guard does not admit the caller or the request's deadline cannot be read
    /// (the route then runs, to be refused or failed where calls are).
    private func answerFromCache(
        _ answer: HTTPResponse, _ bound: BoundRoute, _ request: HTTPRequest, keepAlive: Bool, origin: String?
    ) -> Bool {
        let arrived = ContinuousClock.now
        let deadline: ContinuousClock.Instant?
        do { deadline = try ConnectProtocol.deadline(request.headers["connect-timeout-ms"]) } catch { return false }
        let head = CallHead(
            method: bound.guardedAs, metadata: ConnectProtocol.Call.metadata(request.headers), deadline: deadline,
            peer: stream.peer)
        guard host.rpcServer.admits(bound, head) else { return false }
        host.rpcServer.countKept(bound, since: arrived)
        answerAtOnce(
            HTTPRouteJob<Stream>.answer(answer, to: request), keepAlive: keepAlive, origin: origin,
            headOnly: request.method == "HEAD")
        return true
    }

    /// Answers without a call (preflight, a request no call could be made of).
    /// `headOnly`: the answer to a HEAD, its head alone (`Content-Length` as GET's).
    private func answerAtOnce(_ response: HTTPResponse, keepAlive: Bool, origin: String? = nil, headOnly: Bool = false)
    {
        var response = response
        ConnectProtocol.addCORS(to: &response.headers, origin: origin)
        if headOnly {
            stream.send(bytes: response.serializedHead(closing: !keepAlive))
        } else {
            stream.send(response, closing: !keepAlive)
        }
        busy = false
        if !keepAlive { close("the client asked to close") }
    }

    // MARK: Serving a streaming call

    /// A streaming call's head arrived: its body follows (`readBody`).
    private func serveStream(_ request: HTTPRequest) {
        requests += 1
        let id = requests
        let origin = request.headers["origin"]
        // HTTP/1.0 has no chunked bodies: its answer is delimited by the close.
        let keepAlive = request.keepsAlive && request.isHTTP11
        let path = String(request.path)
        let method = host.rpcServer.method(path)
        let head = { (call: ConnectProtocol.StreamCall?) in
            CallHead(
                method: path, metadata: call?.metadata ?? Metadata(), deadline: call?.deadline, peer: self.stream.peer)
        }
        body = StreamedBody(id: id, maxMessageSize: host.limits.maxMessageSize, budget: stream.budget)
        let call: ConnectProtocol.StreamCall
        do {
            call = try ConnectProtocol.StreamCall(request, method: method)
        } catch {
            switch error {
            case .http(let response):
                answerAtOnce(response, keepAlive: keepAlive, origin: origin)
            case .rpc(let error, let encoding):
                exchanges.begin(
                    id,
                    ConnectExchange(
                        encoding: encoding, origin: origin, keepAlive: keepAlive, streaming: true,
                        chunked: request.isHTTP11))
                calls.refuse(id, head(nil), error)
            }
            return
        }
        exchanges.begin(
            id,
            ConnectExchange(
                encoding: call.encoding, json: call.json, gzip: call.gzipResponses, origin: origin,
                keepAlive: keepAlive, streaming: true,
                chunked: request.isHTTP11))
        body?.call = call
        body?.head = head(call)
        if call.clientStreams {
            exchanges.resetRequestCredit(id)
            _ = calls.open(id, head(call), clientStreams: true, payload: [], decoder: streamDecoder(call))
            calls.startQueued()
            body?.purpose = .requests
        } else {
            body?.purpose = .singleRequest
        }
    }

    private func streamDecoder(_ call: ConnectProtocol.StreamCall) -> RequestDecoder? {
        call.decoder(maxMessageSize: host.limits.maxMessageSize, budget: stream.budget)
    }

    /// Reads what arrived of the streamed body: envelopes into the call, as far as its credit goes.
    private func readBody() {
        while let body, !stream.isClosing, !stream.isClosed {
            if body.pending != nil {
                guard deliverPending(body) else {
                    // The inbox is full: nothing more is read until its consumer makes room, and the
                    // client, who waits on us, is not stalled meanwhile.
                    waitingForCredit = true
                    partialFrameSince = nil
                    return
                }
                continue
            }
            do {
                if body.purpose != .discarded, let envelope = try body.envelopes.next() {
                    lastFrameAt = .now
                    partialFrameSince = .now
                    take(envelope, of: body)
                    continue
                }
            } catch {
                failBody(body, error)
                continue
            }
            let part: HTTPRequestParser.BodyPart?
            do {
                part = try parser.nextBodyPart(maxBytes: 64 << 10)
            } catch {
                refuse(error)
                return
            }
            switch part {
            case nil:
                return
            case .bytes(let bytes):
                if body.purpose != .discarded { body.envelopes.append(bytes) }
                if let drained {
                    self.drained = drained + bytes.count
                    guard drained + bytes.count <= Self.drainLimit else {
                        close(
                            "answered before the request's body ended, and more than \(Self.drainLimit) bytes followed")
                        return
                    }
                }
            case .end:
                bodyEnded(body)
            }
        }
    }

    /// One request envelope: the client stream's next message, or the server stream's one request — as it came, behind
    /// its flag byte, for the call's decoder to inflate and transcode on the worker (`ConnectProtocol.StreamCall.decoder`).
    private func take(_ envelope: (flags: UInt8, payload: [UInt8]), of body: StreamedBody) {
        guard body.purpose != .discarded, let call = body.call else { return }
        let message: [UInt8]
        do {
            message = try call.request(flags: envelope.flags, envelope.payload)
        } catch {
            failBody(body, error)
            return
        }
        switch body.purpose {
        case .requests:
            body.pending = (message, 0)
        case .singleRequest:
            guard body.single == nil else {
                failBody(
                    body,
                    RPCError(
                        .invalidArgument, "\(body.head?.method ?? "") takes exactly one request; a second envelope came"
                    ))
                return
            }
            body.single = message
        case .discarded:
            break
        }
    }

    /// Hands the client stream's pending message to its inbox, in chunks as our frames would carry
    /// it; false while the inbox lacks credit for the next piece.
    private func deliverPending(_ body: StreamedBody) -> Bool {
        guard var (message, offset) = body.pending else { return true }
        guard exchanges.isOpen(body.id) else {
            // Answered already (the handler finished or failed): the rest of the body is dropped.
            body.pending = nil
            body.purpose = .discarded
            return true
        }
        while true {
            let remaining = message.count - offset
            let last = remaining <= FlowControl.maxChunk
            let size = last ? remaining : FlowControl.maxChunk
            guard exchanges.spendRequestCredit(body.id, FlowControl.cost(size)) else {
                body.pending = (message, offset)
                return false
            }
            let chunk = offset == 0 && last ? message : Array(message[offset..<offset + size])
            offset += size
            calls.receiveMessage(body.id, chunk, continues: !last)
            if last {
                body.pending = nil
                message = []
                return true
            }
        }
    }

    /// The inbox took messages: reading goes on (loop thread).
    private func creditArrived() {
        guard waitingForCredit else { return }
        waitingForCredit = false
        partialFrameSince = .now
        readBody()
        takeRequests()
        if waitingForCredit { stream.pauseReading() } else { stream.resumeReading() }
    }

    /// The body's envelopes cannot be read: the call ends with `error` (a call not opened yet is
    /// answered with it), and the rest of the body is dropped.
    private func failBody(_ body: StreamedBody, _ error: RPCError) {
        switch body.purpose {
        case .requests:
            calls.end(body.id, error: error)
        case .singleRequest:
            calls.refuse(body.id, body.head ?? CallHead(method: "", peer: stream.peer), error)
        case .discarded:
            break
        }
        body.pending = nil
        body.purpose = .discarded
        body.envelopes.discardAll()
    }

    private func bodyEnded(_ body: StreamedBody) {
        self.body = nil
        drained = nil
        body.envelopes.releaseReserved()
        if body.envelopes.hasPartialEnvelope, body.purpose != .discarded {
            failBody(body, RPCError(.invalidArgument, "the request body ended inside an envelope"))
        }
        switch body.purpose {
        case .requests:
            calls.endRequests(body.id)
        case .singleRequest:
            if let single = body.single, let head = body.head, let call = body.call {
                _ = calls.open(body.id, head, clientStreams: false, payload: single, decoder: streamDecoder(call))
                calls.startQueued()
            } else {
                failBody(
                    body, RPCError(.invalidArgument, "\(body.head?.method ?? "") takes one request; the body held none")
                )
            }
        case .discarded:
            break
        }
        lastFrameAt = .now
        partialFrameSince = parser.hasPartialRequest ? .now : nil
        if waitingForCredit {
            waitingForCredit = false
            stream.resumeReading()
        }
    }

    // MARK: What the listener asks

    package func fail(_ code: StatusCode, _ message: String) {
        stream.loop.assertInLoop()
        guard !stream.isClosing, !stream.isClosed else { return }
        // An idle keep-alive connection is closed without a word, as HTTP servers do; a client in the
        // middle of a request is told why.
        let answering = exchanges.openIDs
        if !answering.isEmpty {
            // Each in its own shape: a unary call's error response, a stream's end-of-stream error.
            for id in answering { wire.writeStatus(id, message: nil, error: RPCError(code, message)) }
        } else if parser.hasPartialRequest || body != nil {
            let status = code == .unavailable && !busy ? 408 : code.httpStatus
            stream.send(HTTPResponse.text(status, message), closing: true, sealing: true)
        }
        calls.cancelAll()
        close(message)
    }

    package func closed(reason: String) { calls.closed(reason: reason) }
}

/// The streamed body of the streaming call being read (loop thread).
package final class StreamedBody {
    package enum Purpose {
        /// A server stream's: one envelope, its call opened once the body ended.
        case singleRequest
        /// A client stream's: each envelope a message into the open call's inbox.
        case requests
        /// Nobody's (the call was refused or is over): read and dropped.
        case discarded
    }

    package let id: UInt64
    package var purpose = Purpose.discarded
    package var call: ConnectProtocol.StreamCall?
    package var head: CallHead?
    package var envelopes: ConnectEnvelopeReader
    /// A client stream's message waiting for the inbox's credit, and how much of it went.
    package var pending: (message: [UInt8], offset: Int)?
    /// A server stream's request.
    package var single: [UInt8]?

    package init(id: UInt64, maxMessageSize: Int, budget: MemoryBudget?) {
        self.id = id
        envelopes = ConnectEnvelopeReader(maxMessageSize: maxMessageSize)
        if let budget {
            envelopes.admit = { budget.reserve($0) }
            envelopes.release = { budget.release($0) }
        }
    }
}
