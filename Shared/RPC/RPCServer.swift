import Base
import Foundation
import RPCWire
import Schema
import Synchronization

/// The transport-agnostic server: routes calls to handlers, maps errors to status codes, keeps
/// stats and health. Transports (TCP, in-process) feed it calls.
public final class RPCServer: Sendable {
    /// Name of the executable this server runs in (`zoo`, `ocr`, ...), reported by health checks.
    public var name: String { state.name }
    public var stats: ServerStats { state.stats }
    /// Every method this server offers, built-ins included, sorted by path.
    public let methods: [ProtoMethodInfo]
    let state: ServerState
    private let routes: [String: ServerRoute]
    let logger: Logger
    /// Admits or refuses each call of `services` before its handler runs (nil: every call runs, anonymous).
    let callGuard: (any CallGuard)?

    /// A server offering `services` plus the built-in health, reflection and stats services; `guard`
    /// admits the calls of `services` (never the built-ins').
    public init(
        name: String, services: [any RPCService], logger: Logger? = nil, guard callGuard: (any CallGuard)? = nil
    ) {
        self.logger = logger ?? Logger(label: name)
        self.callGuard = callGuard
        state = ServerState(name: name)
        var router = RPCRouter()
        for service in services + [BuiltinServices(state: state)] { service.register(in: &router) }
        let stats = state.stats
        let builtins = Set((RpcV1.Health.methods + RpcV1.Reflection.methods + RpcV1.Stats.methods).map(\.path))
        routes = router.routes.mapValues {
            ServerRoute(
                info: $0.info, body: $0.body, json: $0.json, stats: stats.counters(for: $0.info.path),
                isBuiltin: builtins.contains($0.info.path))
        }
        methods = router.methods
        state.methods = methods
    }

    /// Whether health checks answer SERVING; set to false while draining for shutdown.
    public var isServing: Bool {
        get { state.serving.load(ordering: .acquiring) }
        set { state.serving.store(newValue, ordering: .releasing) }
    }

    /// Seconds since this server started.
    public var uptimeSeconds: Double { state.uptimeSeconds }

    /// A call a transport received, routed and its clock started: the transport decides where it
    /// runs (`answersAtOnce`, `workerTime`), then serves it or answers it itself (see `IncomingCall`).
    /// One dictionary lookup, so a transport's I/O thread can call it for every call.
    package func accept(_ head: CallHead) -> IncomingCall {
        IncomingCall(head: head, route: routes[head.method], arrived: .now, server: self)
    }

    /// What an HTTP face needs of method `path` before it opens a call: its kind and its JSON
    /// mapping; nil for a method this server does not offer.
    package func method(_ path: String) -> (info: ProtoMethodInfo, json: JSONTranscoder?)? {
        routes[path].map { ($0.info, $0.json) }
    }

    /// Whether the server's guard admits a call with `head` (always, without a guard): what a transport asks before
    /// it answers a call itself from kept bytes (`AnswerCachePolicy`). A refused call is then opened as any other,
    /// to be refused, counted and logged where calls are.
    package func admits(_ head: CallHead) -> Bool { refusal(of: head) == nil }

    /// Why the guard refuses a call with `head` (nil: it admits it, or the method is unknown — refused later as any
    /// other): what a door asks once a request's head arrived, to answer a caller it refuses before taking in a body
    /// it would never use.
    package func refusal(of head: CallHead) -> RPCError? {
        guard let route = routes[head.method] else { return nil }
        do {
            _ = try admittedCaller(of: head, on: route)
            return nil
        } catch {
            return error
        }
    }

    /// Who makes call `head` of `route`, as the guard establishes it (nil: anonymous; built-ins never ask it).
    private func admittedCaller(of head: CallHead, on route: ServerRoute) throws(RPCError) -> Caller? {
        route.isBuiltin ? nil : try callGuard?.admit(head, to: route.info)
    }

    /// Counts a call of `method` that its transport answered OK itself (from kept bytes), as its handler's would be,
    /// and as kept.
    package func countKept(_ method: String, since arrived: ContinuousClock.Instant) {
        routes[method]?.stats.recordKept(duration: .now - arrived)
    }

    /// Serves one call to completion; finishes `sink` (whose first `finish` counts) and never throws.
    ///
    /// The handler runs in the calling task. Transports enforce deadlines: when one passes they answer
    /// DEADLINE_EXCEEDED and cancel the task; here a call whose deadline passed before it started is
    /// refused, and a handler cancelled past its deadline counts as DEADLINE_EXCEEDED.
    public func handle(_ head: CallHead, request: [UInt8], sink: any ResponseSink) async {
        await accept(head).serve(.single(request), responses: sink)
    }

    /// Runs `call`'s handler and answers through `sink`, counting the status where it took effect
    /// (see `IncomingCall.serve`).
    fileprivate func serve(_ call: IncomingCall, _ input: CallInput, _ sink: any ResponseSink) async {
        let head = call.head
        guard let route = call.route else {
            if case .stream(let inbox) = input {
                inbox.finish(error: RPCError(.unimplemented, "unknown method"), discarding: true)
            }
            answer(call, sink, RPCError(.unimplemented, "unknown method \(head.method)"))
            return
        }
        if let deadline = head.deadline, deadline <= .now {
            answer(call, sink, RPCError(.deadlineExceeded, "deadline passed before \(head.method) started"))
            return
        }
        let caller: Caller?
        do {
            caller = try admittedCaller(of: head, on: route)
        } catch {
            // Refused before its handler: an upload's requests are dropped as they come, never read.
            // Not logged here: the guard logs refusals once per window, so a flood of guesses is no flood of lines.
            if case .stream(let inbox) = input { inbox.finish(error: error, discarding: true) }
            answer(call, sink, error, logged: false)
            return
        }
        var input = input
        if case .single(let request) = input, let limit = route.info.maxRequestBytes, request.count > limit {
            answer(
                call, sink,
                RPCError(
                    .resourceExhausted,
                    "the request of \(request.count) bytes is over \(head.method)'s limit of \(limit) bytes"))
            return
        }
        if case .encoded(let bytes, let decoder) = input {
            // Decoded here, on the call's worker and after the guard: see `RequestDecoder`.
            do {
                input = .single(
                    try decoder.decode(bytes, for: RequestDecoder.Method(info: route.info, json: route.json)))
            } catch {
                answer(call, sink, error)
                return
            }
        }
        do {
            let message: [UInt8]?
            switch (route.body, input) {
            case (.single(let handler), .single(let request)):
                message = try await handler(request, ServerContext(head, caller: caller, sink: sink), sink)
            case (.streaming(let handler), .stream(let inbox)):
                message = try await handler(inbox, ServerContext(head, caller: caller, sink: sink), sink)
            case (.streaming(let handler), .single(let request)):
                message = try await handler(
                    MessageInbox(closedWith: [request]), ServerContext(head, caller: caller, sink: sink), sink)
            case (_, .encoded):
                preconditionFailure("an encoded request is decoded before its handler runs")
            case (.single(let handler), .stream(let inbox)):
                guard let request = try await inbox.next() else {
                    throw RPCError(.invalidArgument, "\(head.method) takes one request; the client sent none")
                }
                guard try await inbox.next() == nil else {
                    throw RPCError(.invalidArgument, "\(head.method) takes one request; the client sent more")
                }
                message = try await handler(request, ServerContext(head, caller: caller, sink: sink), sink)
            }
            if sink.finish(message: message, error: nil) { count(call, .ok) }
        } catch {
            answer(call, sink, status(for: error, head))
        }
    }

    /// Counts `call`'s status: under its method, or under `ServerStats.unknownMethod`. Called once
    /// per call, where its status took effect.
    fileprivate func count(_ call: IncomingCall, _ code: StatusCode) {
        if let route = call.route {
            route.stats.record(duration: .now - call.arrived, code: code)
        } else {
            stats.recordRefused(ServerStats.unknownMethod, code: code)
        }
    }

    /// Answers with an error (counted if it was the call's answer) and logs it.
    private func answer(_ call: IncomingCall, _ sink: any ResponseSink, _ failure: RPCError, logged: Bool = true) {
        if sink.finish(message: nil, error: failure) { count(call, failure.code) }
        guard logged else { return }
        let level: LogLevel = failure.code == .internalError ? .error : .info
        logger.log(level, "call \(call.head.method) from \(call.head.peer) failed: \(failure)")
    }

    /// The status a call whose handler threw `error` answers with: an `RPCError` or a categorized error's own
    /// (`RPCError(answering:)`), CANCELLED or DEADLINE_EXCEEDED for a cancellation, and INTERNAL for anything
    /// else (internal and unknown categories too), whose details go to the log and never to the caller.
    func status(for error: any Error, _ head: CallHead) -> RPCError {
        if let answer = RPCError(answering: error) { return answer }
        switch error {
        case is CancellationError:
            if let deadline = head.deadline, deadline <= .now {
                return RPCError(.deadlineExceeded, "deadline exceeded while serving \(head.method)")
            }
            return RPCError(.cancelled, "call to \(head.method) was cancelled")
        default:
            logger.error("handler of \(head.method) threw \(type(of: error)): \(error)")
            return RPCError(.internalError, "internal error while serving \(head.method)")
        }
    }
}

/// A method as a server serves it.
///
/// A class: every call carries its route (in its `IncomingCall`), and copying a reference is one retain where
/// copying these fields was six (callgrind: the route's and the call's copies were 3 % of a small call).
final class ServerRoute: Sendable {
    let info: ProtoMethodInfo
    let body: RPCRouter.Body
    let json: JSONTranscoder?
    let stats: MethodStats
    /// Health, reflection and stats: quick, never waiting, and wanted most when the server is busy,
    /// so transports answer them at once instead of queueing them behind domain calls.
    let isBuiltin: Bool
    /// How long a call of this method holds a server worker, as measured.
    let workerTime = WorkerTime()

    init(info: ProtoMethodInfo, body: RPCRouter.Body, json: JSONTranscoder?, stats: MethodStats, isBuiltin: Bool) {
        self.info = info
        self.body = body
        self.json = json
        self.stats = stats
        self.isBuiltin = isBuiltin
    }
}

/// How long the calls of one method hold a worker before they finish or first wait: a moving
/// average of the last few, so a scheduler can tell an export that computes for 40 ms from a
/// search of half a millisecond before it starts one (any thread).
package final class WorkerTime: Sendable {
    private let nanoseconds = Atomic<Int64>(0)

    package init() {}

    /// The estimate; zero until a call was measured.
    package var estimate: Duration { .nanoseconds(nanoseconds.load(ordering: .relaxed)) }

    /// Takes one call's time into the average (weight 1/4, so a few calls change the estimate).
    package func record(_ duration: Duration) {
        let sample = duration.wholeNanoseconds
        let old = nanoseconds.load(ordering: .relaxed)
        // Racing updates may lose a sample, which an average can afford.
        nanoseconds.store(old == 0 ? sample : old + (sample - old) / 4, ordering: .relaxed)
    }
}

/// One call a transport received, as the server routed it, from its arrival until its status: what
/// grpc-swift-2 hands its router as an `RPCStream` (the head here; the requests and the response
/// writer come with `serve`, as a transport may queue the call before it has a worker to run it).
///
/// A transport ends every call it accepted in one of two ways, and the server counts it either way,
/// once: `serve` runs the handler (counted where its answer took effect), or the transport answers
/// the call itself — refused (too many calls, draining, a malformed head) or ended before its handler
/// answered (deadline passed, flow control broken) — and says so with `answered`. Transports never
/// see routes or stats.
///
/// A class: a transport keeps it with the call and passes it on (to its worker, its handler, its sink), and each
/// copy of a struct retained every reference in its head.
package final class IncomingCall: Sendable {
    package let head: CallHead
    fileprivate let route: ServerRoute?
    fileprivate let arrived: ContinuousClock.Instant
    fileprivate let server: RPCServer

    fileprivate init(head: CallHead, route: ServerRoute?, arrived: ContinuousClock.Instant, server: RPCServer) {
        self.head = head
        self.route = route
        self.arrived = arrived
        self.server = server
    }

    /// Health, reflection and stats: quick, never waiting, and wanted most when the server is busy,
    /// so a transport answers them at once on its I/O thread instead of queueing them behind domain calls.
    package var answersAtOnce: Bool { route?.isBuiltin == true }

    /// A client-streaming method (an upload): its requests must keep coming, at a pace, or the
    /// transport ends it; bidirectional calls may rightly fall quiet and are not held to it.
    package var isUpload: Bool { route.map { $0.info.clientStreaming && !$0.info.serverStreaming } ?? false }

    /// How long a call of this method holds a worker, as measured (nil: an unknown method).
    package var workerTime: WorkerTime? { route?.workerTime }

    /// The largest message of this call's requests, within the transport's own limit (see `ProtoMethodInfo.requestLimit`).
    package func requestLimit(within transportLimit: Int) -> Int {
        route?.info.requestLimit(within: transportLimit) ?? transportLimit
    }

    /// `decoder` bound to this call's method, for the messages of a stream its door decodes as its handler takes them
    /// (`MessageInbox`'s decoding, which runs on the handler's thread, and only once the guard admitted the call):
    /// nil for an unknown method, which never reads them.
    package func decoding(with decoder: RequestDecoder) -> (@Sendable ([UInt8]) throws(RPCError) -> [UInt8])? {
        guard let route else { return nil }
        let method = RequestDecoder.Method(info: route.info, json: route.json)
        return { bytes throws(RPCError) in try decoder.decode(bytes, for: method) }
    }

    /// Runs the handler in the calling task with `input` as its requests, answering through
    /// `responses` (whose first `finish` counts); never throws.
    ///
    /// Either kind of input serves either kind of method, as gRPC's wire does not tell them apart: a
    /// streaming method called with one request gets a stream of it, and a method taking one request
    /// called with a stream gets its only message (more or none is INVALID_ARGUMENT).
    package func serve(_ input: CallInput, responses: any ResponseSink) async {
        await server.serve(self, input, responses)
    }

    /// The transport answered this call with `code` itself (refused it, or ended it before its
    /// handler answered); call at most once, and only when that answer was the call's.
    package func answered(_ code: StatusCode) {
        server.count(self, code)
    }
}

/// The requests of a call as a transport hands them to the server.
package enum CallInput: Sendable {
    /// The only request, which came whole with the call (unary and server-streaming calls).
    case single([UInt8])
    /// The requests of a client-streaming or bidirectional call, as they arrive.
    case stream(MessageInbox)
    /// The only request as its door received it (compressed, JSON): the server decodes it with the decoder on the
    /// call's worker once the guard admitted the call (`RequestDecoder`).
    case encoded([UInt8], RequestDecoder)
}
