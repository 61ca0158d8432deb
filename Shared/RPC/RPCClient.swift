import Schema
import Synchronization

/// Calls one service through one or more endpoints (its replicas): round-robin over healthy
/// endpoints, deadlines, cancellation, and retries of idempotent calls on UNAVAILABLE.
public final class RPCClient: Sendable {
    /// How the client retries.
    public struct RetryPolicy: Sendable {
        /// Attempts per call, the first one included.
        public var maxAttempts: Int
        /// Wait before the second attempt; doubles for each later one.
        public var initialBackoff: Duration

        public init(maxAttempts: Int = 3, initialBackoff: Duration = .milliseconds(20)) {
            self.maxAttempts = maxAttempts
            self.initialBackoff = initialBackoff
        }
    }

    public let transports: [any ClientTransport]
    private let retry: RetryPolicy
    private let next = Atomic<Int>(0)
    /// Per endpoint: until when it counts as unhealthy after answering UNAVAILABLE or NOT_SERVING.
    private let unhealthyUntil: Mutex<[ContinuousClock.Instant?]>
    private static let quarantine = Duration.seconds(2)

    public init(transports: [any ClientTransport], retry: RetryPolicy = RetryPolicy()) {
        precondition(!transports.isEmpty, "a client needs at least one endpoint")
        self.transports = transports
        self.retry = retry
        unhealthyUntil = Mutex(Array(repeating: nil, count: transports.count))
    }

    /// Makes a unary call.
    ///
    /// Inlinable so that encoding and decoding are specialized where the message types are known; the
    /// call itself (endpoint choice, retries) is not generic.
    @inlinable
    public func unary<Request, Response>(
        _ method: ProtoMethod<Request, Response>, _ request: Request, options: CallOptions = CallOptions()
    ) async throws -> Response {
        let bytes = try await unary(
            path: method.path, idempotent: options.idempotent ?? method.idempotent, request: request.serializedBytes(), options: options)
        do {
            return try Response(serializedBytes: bytes)
        } catch {
            throw RPCError(.internalError, "response from \(method.path) is not a valid \(Response.protoName): \(error)")
        }
    }

    /// Makes a server-streaming call. Only a failure to connect is retried: once a message arrived,
    /// the stream belongs to that endpoint.
    public func serverStreaming<Request, Response>(
        _ method: ProtoMethod<Request, Response>, _ request: Request, options: CallOptions = CallOptions()
    ) -> AsyncThrowingStream<Response, any Error> {
        let head = makeHead(method.path, options)
        let payload = request.serializedBytes()
        let (stream, continuation) = AsyncThrowingStream<Response, any Error>.makeStream()
        let task = Task {
            var lastError: any Error = RPCError(.unavailable, "no endpoint answered")
            for _ in 0..<max(1, min(retry.maxAttempts, transports.count)) {
                let (index, transport) = pick()
                do {
                    for try await bytes in transport.serverStreaming(head, request: payload) {
                        continuation.yield(try Response(serializedBytes: bytes))
                    }
                    continuation.finish()
                    return
                } catch let failure as ConnectFailure {
                    markUnhealthy(index)
                    lastError = RPCError(.unavailable, failure.description)
                } catch let error as RPCError {
                    continuation.finish(throwing: error)
                    return
                } catch {
                    continuation.finish(throwing: RPCError(.internalError, "response from \(method.path) did not decode: \(error)"))
                    return
                }
            }
            continuation.finish(throwing: lastError)
        }
        continuation.onTermination = { _ in task.cancel() }
        return stream
    }

    /// Asks every endpoint's health service (in parallel) and keeps calls away from those that are
    /// unreachable or not SERVING (draining for shutdown, say) for a while. Returns, per endpoint,
    /// whether it answered SERVING.
    @discardableResult
    public func checkHealth(timeout: Duration = .seconds(1)) async -> [Bool] {
        await withTaskGroup(of: (Int, Bool).self) { group in
            for (index, transport) in transports.enumerated() {
                group.addTask {
                    let head = CallHead(method: RpcV1.Health.check.path, deadline: .now + timeout)
                    let bytes = try? await transport.unary(head, request: RpcV1.HealthCheckRequest().serializedBytes())
                    let reply = bytes.flatMap { try? RpcV1.HealthCheckResponse(serializedBytes: $0) }
                    return (index, reply?.status == .serving)
                }
            }
            var serving = Array(repeating: false, count: transports.count)
            for await (index, healthy) in group {
                serving[index] = healthy
                if !healthy { markUnhealthy(index) }
            }
            return serving
        }
    }

    /// Closes every endpoint's connection.
    public func close() {
        for transport in transports { transport.close() }
    }

    /// Makes a unary call with an encoded request and returns the encoded response.
    @usableFromInline
    func unary(path: String, idempotent: Bool, request: [UInt8], options: CallOptions) async throws -> [UInt8] {
        let head = makeHead(path, options)
        var backoff = retry.initialBackoff
        var attempt = 1
        while true {
            let (index, transport) = pick()
            do {
                return try await transport.unary(head, request: request)
            } catch let failure as ConnectFailure {
                markUnhealthy(index)
                guard attempt < retry.maxAttempts else { throw RPCError(.unavailable, failure.description) }
            } catch let error as RPCError where error.code == .unavailable {
                markUnhealthy(index)
                guard idempotent, attempt < retry.maxAttempts else { throw error }
            }
            if let deadline = head.deadline, deadline <= .now + backoff {
                throw RPCError(.deadlineExceeded, "deadline exceeded while retrying \(path)")
            }
            // Another endpoint is tried at once; the same one again only after a pause.
            if transports.count == 1 {
                do {
                    try await Task.sleep(for: backoff)
                } catch {
                    throw RPCError(.cancelled, "call to \(path) was cancelled")
                }
                backoff *= 2
            }
            attempt += 1
        }
    }

    private func makeHead(_ path: String, _ options: CallOptions) -> CallHead {
        CallHead(method: path, metadata: options.metadata, deadline: options.timeout.map { .now + $0 })
    }

    /// The next endpoint in round-robin order that is available and healthy; any one if none is.
    private func pick() -> (Int, any ClientTransport) {
        // One endpoint: nothing to choose, and its health only matters for the error a call gets.
        if transports.count == 1 { return (0, transports[0]) }
        let count = UInt(transports.count)
        let start = UInt(bitPattern: next.wrappingAdd(1, ordering: .relaxed).oldValue)
        let now = ContinuousClock.now
        let healthy = unhealthyUntil.withLock { quarantined in
            (0..<count).lazy.map { Int((start &+ $0) % count) }.first { index in
                quarantined[index].map { $0 <= now } ?? true && transports[index].isAvailable
            }
        }
        let index = healthy ?? Int(start % count)
        return (index, transports[index])
    }

    private func markUnhealthy(_ index: Int) {
        unhealthyUntil.withLock { $0[index] = .now + Self.quarantine }
    }
}
