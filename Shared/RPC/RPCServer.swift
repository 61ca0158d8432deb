import Foundation
import Schema
import Synchronization

/// The transport-agnostic server: routes calls to handlers, enforces deadlines, maps errors to
/// status codes, keeps stats and health. Transports (TCP, in-process) feed it calls.
public final class RPCServer: Sendable {
    /// Name of the executable this server runs in (`zoo`, `ocr`, ...), reported by health checks.
    public var name: String { state.name }
    public var stats: ServerStats { state.stats }
    /// Every method this server offers, built-ins included, sorted by path.
    public let methods: [ProtoMethodInfo]
    let state: ServerState
    private let routes: [String: RPCRouter.Route]
    private let logger: Logger

    /// A server offering `services` plus the built-in health, reflection and stats services.
    public init(name: String, services: [any RPCService], logger: Logger? = nil) {
        self.logger = logger ?? Logger(label: name)
        state = ServerState(name: name)
        var router = RPCRouter()
        for service in services + [BuiltinServices(state: state)] { service.register(in: &router) }
        routes = router.routes
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

    /// Serves one call to completion; always finishes `sink` exactly once and never throws.
    public func handle(_ head: CallHead, request: [UInt8], sink: any ResponseSink) async {
        let started = ContinuousClock.now
        guard let route = routes[head.method] else {
            finish(head, sink, started, failure: RPCError(.unimplemented, "unknown method \(head.method)"))
            return
        }
        if let deadline = head.deadline, deadline <= started {
            finish(head, sink, started, failure: RPCError(.deadlineExceeded, "deadline passed before \(head.method) started"))
            return
        }
        let context = ServerContext(head)
        let once = FinishOnce(sink)
        let result: Result<[UInt8]?, any Error>
        if let deadline = head.deadline {
            result = await Self.run(route.handler, request, context, once, deadline: deadline)
        } else {
            do {
                result = .success(try await route.handler(request, context, once))
            } catch {
                result = .failure(error)
            }
        }
        switch result {
        case .success(let message):
            once.finish(message: message, error: nil)
            stats.record(method: head.method, duration: .now - started, failed: once.failed)
        case .failure(let error):
            finish(head, once, started, failure: status(for: error, method: head.method))
        }
    }

    /// Runs a handler against its deadline: when the deadline passes first, the caller gets
    /// DEADLINE_EXCEEDED at once and the handler is cancelled.
    private static func run(
        _ handler: @escaping RPCRouter.Handler, _ request: [UInt8], _ context: ServerContext, _ sink: FinishOnce,
        deadline: ContinuousClock.Instant
    ) async -> Result<[UInt8]?, any Error> {
        await withTaskGroup(of: Result<[UInt8]?, any Error>?.self) { group in
            group.addTask {
                do {
                    return .success(try await handler(request, context, sink))
                } catch {
                    return .failure(error)
                }
            }
            group.addTask {
                guard (try? await Task.sleep(until: deadline, clock: .continuous)) != nil else { return nil }
                return .failure(RPCError(.deadlineExceeded, "deadline exceeded while serving \(context.method)"))
            }
            var outcome: Result<[UInt8]?, any Error>?
            while outcome == nil, let next = await group.next() {
                outcome = next
            }
            group.cancelAll()
            if case .failure(let error as RPCError) = outcome, error.code == .deadlineExceeded {
                // Answer now; the cancelled handler may take a moment to wind down.
                sink.finish(message: nil, error: error)
            }
            return outcome ?? .failure(CancellationError())
        }
    }

    private func finish(_ head: CallHead, _ sink: any ResponseSink, _ started: ContinuousClock.Instant, failure: RPCError) {
        sink.finish(message: nil, error: failure)
        stats.record(method: head.method, duration: .now - started, failed: true)
        let level: LogLevel = failure.code == .internalError ? .error : .info
        logger.log(level, "call \(head.method) from \(head.peer) failed: \(failure)")
    }

    private func status(for error: any Error, method: String) -> RPCError {
        switch error {
        case let error as RPCError:
            return error
        case is CancellationError:
            return RPCError(.cancelled, "call to \(method) was cancelled")
        default:
            logger.error("handler of \(method) threw \(type(of: error)): \(error)")
            return RPCError(.internalError, "internal error while serving \(method)")
        }
    }
}

/// Lets only the first `finish` through, so a deadline and a late handler cannot both answer.
private final class FinishOnce: ResponseSink {
    private let sink: any ResponseSink
    private let state = Mutex<(done: Bool, failed: Bool)>((false, false))

    init(_ sink: any ResponseSink) { self.sink = sink }

    var failed: Bool { state.withLock { $0.failed } }

    func send(_ message: [UInt8]) async throws {
        guard !state.withLock({ $0.done }) else { throw CancellationError() }
        try await sink.send(message)
    }

    func finish(message: [UInt8]?, error: RPCError?) {
        let first = state.withLock { state in
            defer { state.done = true }
            if !state.done { state.failed = error != nil }
            return !state.done
        }
        if first { sink.finish(message: message, error: error) }
    }
}
