import Base
import Foundation
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
    private let routes: [String: (handler: RPCRouter.Handler, stats: MethodStats)]
    private let logger: Logger

    /// A server offering `services` plus the built-in health, reflection and stats services.
    public init(name: String, services: [any RPCService], logger: Logger? = nil) {
        self.logger = logger ?? Logger(label: name)
        state = ServerState(name: name)
        var router = RPCRouter()
        for service in services + [BuiltinServices(state: state)] { service.register(in: &router) }
        let stats = state.stats
        routes = router.routes.mapValues { ($0.handler, stats.counters(for: $0.info.path)) }
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

    /// Serves one call to completion; finishes `sink` (whose first `finish` counts) and never throws.
    ///
    /// The handler runs in the calling task. Transports enforce deadlines: when one passes they answer
    /// DEADLINE_EXCEEDED and cancel the task; here a call whose deadline passed before it started is
    /// refused, and a handler cancelled past its deadline counts as DEADLINE_EXCEEDED.
    public func handle(_ head: CallHead, request: [UInt8], sink: any ResponseSink) async {
        let started = ContinuousClock.now
        guard let route = routes[head.method] else {
            reject(head, sink, RPCError(.unimplemented, "unknown method \(head.method)"))
            return
        }
        if let deadline = head.deadline, deadline <= started {
            finish(head, sink, route.stats, started, failure: RPCError(.deadlineExceeded, "deadline passed before \(head.method) started"))
            return
        }
        do {
            let message = try await route.handler(request, ServerContext(head), sink)
            sink.finish(message: message, error: nil)
            route.stats.record(duration: .now - started, failed: false)
        } catch {
            finish(head, sink, route.stats, started, failure: status(for: error, head))
        }
    }

    private func finish(
        _ head: CallHead, _ sink: any ResponseSink, _ stats: MethodStats, _ started: ContinuousClock.Instant, failure: RPCError
    ) {
        stats.record(duration: .now - started, failed: true)
        reject(head, sink, failure)
    }

    /// Answers with an error and logs it.
    private func reject(_ head: CallHead, _ sink: any ResponseSink, _ failure: RPCError) {
        sink.finish(message: nil, error: failure)
        let level: LogLevel = failure.code == .internalError ? .error : .info
        logger.log(level, "call \(head.method) from \(head.peer) failed: \(failure)")
    }

    private func status(for error: any Error, _ head: CallHead) -> RPCError {
        switch error {
        case let error as RPCError:
            return error
        case let error as any RPCErrorConvertible where error.rpcError.code != .internalError:
            return error.rpcError
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
