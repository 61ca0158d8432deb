import RPCWire
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
    /// Metadata every call carries unless its options set the same key.
    public let defaultMetadata: Metadata
    /// The caller's credentials (`authorization: Bearer …`), carried only by calls of methods whose proto says they
    /// need a token (`ProtoMethodInfo.access`), unless their options set the same key: a public method's endpoint —
    /// which may be anyone's, named on a command line — never sees them (it got the stack's admin token before).
    public let credentials: Metadata
    private let retry: RetryPolicy
    private let next = Atomic<Int>(0)
    /// Per endpoint: until when it counts as unhealthy after answering UNAVAILABLE or NOT_SERVING.
    private let unhealthyUntil: Mutex<[ContinuousClock.Instant?]>
    private static let quarantine = Duration.seconds(2)

    public init(
        transports: [any ClientTransport], retry: RetryPolicy = RetryPolicy(), defaultMetadata: Metadata = [:],
        credentials: Metadata = [:]
    ) {
        precondition(!transports.isEmpty, "a client needs at least one endpoint")
        self.transports = transports
        self.defaultMetadata = defaultMetadata
        self.credentials = credentials
        self.retry = retry
        unhealthyUntil = Mutex(Array(repeating: nil, count: transports.count))
    }

    /// `request`'s bytes, or INVALID_ARGUMENT for a string holding a NUL, which protobuf-c would cut there: the
    /// server would answer a request the caller did not make (a search for `le` for `le\0v`).
    @inlinable
    static func encode<Request: ProtoMessage>(_ request: Request, for method: String) throws(RPCError) -> [UInt8] {
        do {
            return try request.serializedBytesRefusingNUL()
        } catch {
            throw RPCError(.invalidArgument, "the request to \(method) cannot be sent: \(error.reason)")
        }
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
            path: method.path, idempotent: options.idempotent ?? method.idempotent,
            needsToken: method.access.needsToken,
            request: try Self.encode(request, for: method.path), options: options)
        do {
            return try Response(serializedBytes: bytes)
        } catch {
            throw RPCError(
                .internalError, "response from \(method.path) is not a valid \(Response.protoName): \(error)")
        }
    }

    /// Makes a server-streaming call. Only a failure to connect is retried: once a message arrived,
    /// the stream belongs to that endpoint. The stream holds at most a window of unread responses
    /// (the server waits for the client to read); dropping it before its end cancels the call. A request
    /// that cannot be encoded (`encode`) is not sent: the stream throws INVALID_ARGUMENT.
    public func serverStreaming<Request, Response>(
        _ method: ProtoMethod<Request, Response>, _ request: Request, options: CallOptions = CallOptions()
    ) -> ResponseStream<Response> {
        let payload: [UInt8]
        do {
            payload = try Self.encode(request, for: method.path)
        } catch {
            return ResponseStream(ResponseSource(method: method.path, call: RefusedCall(error: error)))
        }
        let head = makeHead(method.path, options, needsToken: method.access.needsToken)
        let (_, transport) = pick()
        let first = transport.stream(head, request: payload)
        let attempts = max(1, min(retry.maxAttempts, transports.count))
        return ResponseStream(
            ResponseSource(method: method.path, call: first, retries: attempts - 1) { [self] in
                let (_, transport) = pick()
                return transport.stream(head, request: payload)
            })
    }

    /// Makes a client-streaming call: `requests` writes the requests (each `send` waits while the
    /// server does not keep up); the call half-closes when it returns, and the server's one response
    /// is returned. When `requests` throws, the call is cancelled and its error rethrown. Not
    /// retried: the requests are not kept.
    public func clientStreaming<Request, Response>(
        _ method: ProtoMethod<Request, Response>, options: CallOptions = CallOptions(),
        requests: @escaping @Sendable (RequestWriter<Request>) async throws -> Void
    ) async throws -> Response {
        try await bidirectionalStreaming(method, options: options, requests: requests) { responses in
            var iterator = responses.makeAsyncIterator()
            guard let response = try await iterator.next() else {
                throw RPCError(.internalError, "\(method.path) ended without a response")
            }
            guard try await iterator.next() == nil else {
                throw RPCError(.internalError, "\(method.path) answered with more than one response")
            }
            return response
        }
    }

    /// Makes a bidirectional-streaming call: `requests` writes requests (the call half-closes when
    /// it returns) while `responses` reads the responses, concurrently; returns what `responses`
    /// returns, once both are done. When either throws, the call is cancelled and that error
    /// rethrown (the first one, when `requests` failed first). When `responses` returns before the
    /// stream ended, the call is cancelled. Not retried.
    public func bidirectionalStreaming<Request, Response, Result: Sendable>(
        _ method: ProtoMethod<Request, Response>, options: CallOptions = CallOptions(),
        requests: @escaping @Sendable (RequestWriter<Request>) async throws -> Void,
        responses: @escaping @Sendable (ResponseStream<Response>) async throws -> Result
    ) async throws -> Result {
        let head = makeHead(method.path, options, needsToken: method.access.needsToken)
        let (index, transport) = pick()
        let call = transport.stream(head, request: nil)
        // Whichever fails first decides the error: `requests` (its error, and the call is
        // cancelled) or the call (its status; what `requests` then throws is a consequence).
        let outcome = Mutex<(settled: Bool, requestsError: (any Error)?)>((false, nil))
        let writer = Task {
            do {
                try await requests(RequestWriter(call: call, method: method.path))
                call.closeRequests()
            } catch {
                let first = outcome.withLock { outcome -> Bool in
                    guard !outcome.settled else { return false }
                    outcome = (true, error)
                    return true
                }
                if first { call.cancel() }
            }
        }
        do {
            let result = try await withTaskCancellationHandler {
                try await responses(ResponseStream(ResponseSource(method: method.path, call: call)))
            } onCancel: {
                call.cancel()
            }
            outcome.withLock { $0.settled = true }
            // Nothing when the call ended; else `responses` returned before the end.
            call.cancel()
            writer.cancel()
            await writer.value
            return result
        } catch {
            let requestsError = outcome.withLock { outcome -> (any Error)? in
                outcome.settled = true
                return outcome.requestsError
            }
            call.cancel()  // when `responses` threw of its own accord
            writer.cancel()
            await writer.value
            if let requestsError { throw requestsError }
            if let error = error as? RPCError, error.code == .unavailable { markUnhealthy(index) }
            throw error
        }
    }

    /// Closes every endpoint's connection.
    public func close() {
        for transport in transports { transport.close() }
    }

    /// Makes a unary call with an encoded request and returns the encoded response.
    @usableFromInline
    func unary(path: String, idempotent: Bool, needsToken: Bool, request: [UInt8], options: CallOptions) async throws
        -> [UInt8]
    {
        let head = makeHead(path, options, needsToken: needsToken)
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

    private func makeHead(_ path: String, _ options: CallOptions, needsToken: Bool) -> CallHead {
        var metadata = options.metadata
        for (key, value) in defaultMetadata where metadata[key] == nil { metadata.add(key, value) }
        if needsToken {
            for (key, value) in credentials where metadata[key] == nil { metadata.add(key, value) }
        }
        return CallHead(method: path, metadata: metadata, deadline: options.timeout.map { .now + $0 })
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
