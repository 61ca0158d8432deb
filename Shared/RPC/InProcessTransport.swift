import Synchronization

/// Calls a server living in the same process, with no sockets and no framing: for unit tests of
/// services and of the RPC core itself. Deadlines and cancellation behave as over TCP.
public final class InProcessTransport: ClientTransport {
    public let server: RPCServer
    public var endpoint: String { "in-process:\(server.name)" }
    public var isAvailable: Bool { true }

    public init(server: RPCServer) { self.server = server }

    public func unary(_ head: CallHead, request: [UInt8]) async throws -> [UInt8] {
        var messages: [[UInt8]] = []
        for try await message in serverStreaming(head, request: request) { messages.append(message) }
        // A cancelled caller's stream just ends.
        if Task.isCancelled { throw RPCError(.cancelled, "call to \(head.method) was cancelled") }
        guard let last = messages.last else {
            throw RPCError(.internalError, "\(head.method) ended without a response")
        }
        return last
    }

    public func serverStreaming(_ head: CallHead, request: [UInt8]) -> AsyncThrowingStream<[UInt8], any Error> {
        let (stream, continuation) = AsyncThrowingStream<[UInt8], any Error>.makeStream()
        let sink = InProcessSink(continuation)
        let head = CallHead(method: head.method, metadata: head.metadata, deadline: head.deadline, peer: "in-process")
        let server = server
        let call = Task { await server.handle(head, request: request, sink: sink) }
        let watchdog = head.deadline.map { deadline in
            Task {
                try await Task.sleep(until: deadline, clock: .continuous)
                sink.finish(message: nil, error: RPCError(.deadlineExceeded, "deadline exceeded waiting for \(head.method)"))
                call.cancel()
            }
        }
        continuation.onTermination = { reason in
            watchdog?.cancel()
            if case .cancelled = reason { call.cancel() }
        }
        return stream
    }

    public func close() {}
}

/// Feeds a server's answers straight into the caller's stream.
private final class InProcessSink: ResponseSink {
    private let continuation: AsyncThrowingStream<[UInt8], any Error>.Continuation
    private let done = Atomic<Bool>(false)

    init(_ continuation: AsyncThrowingStream<[UInt8], any Error>.Continuation) { self.continuation = continuation }

    func send(_ message: [UInt8]) async throws {
        guard !done.load(ordering: .acquiring) else { throw RPCError(.cancelled, "the caller went away") }
        if case .terminated = continuation.yield(message) { throw RPCError(.cancelled, "the caller went away") }
    }

    func finish(message: [UInt8]?, error: RPCError?) {
        guard !done.exchange(true, ordering: .acquiringAndReleasing) else { return }
        if let message { continuation.yield(message) }
        continuation.finish(throwing: error)
    }
}
