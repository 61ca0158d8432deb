import CLibUV
import Foundation
import RPC
import Schema
import Synchronization

/// A client's connection to one endpoint (`host:port`), shared by all calls to it: many calls are
/// multiplexed on one TCP connection and answered out of order. Connects lazily, reconnects after
/// the connection is lost, and enforces call deadlines on the event loop.
///
/// A call registers itself and queues its request from the caller's thread (no hop to the loop);
/// the loop writes what was queued, reads replies and completes the calls.
public final class TCPClientTransport: ClientTransport, @unchecked Sendable {
    public let endpoint: String
    private let host: String
    private let port: Int
    private let loop: EventLoop
    private let maxFrameSize: Int
    private let nextCallID = Atomic<UInt64>(1)
    private let backoffUntil = Mutex<ContinuousClock.Instant?>(nil)

    private let state = Lock(State())

    private struct State {
        var connection: TCPConnection?
        var isConnected = false
        /// Request envelopes of calls waiting for the connection to be made.
        var unsent: [(id: UInt64, envelope: [UInt8])] = []
        var calls: [UInt64: PendingCall] = [:]
        /// Connection attempts that failed in a row.
        var failures = 0
        /// Deadlines of calls, earliest first; entries of calls that ended stay until they come up.
        var deadlines = DeadlineQueue<(id: UInt64, method: String)>()
        /// When the deadline timer is set to fire, if it is.
        var timerDue: ContinuousClock.Instant?
    }

    /// Fires at the earliest deadline (loop thread).
    private var deadlineTimer: LoopTimer?

    /// A transport to `endpoint` (`host:port`, numeric host or `localhost`).
    public init(endpoint: String, loop: EventLoop = .shared, maxFrameSize: Int = FrameCodec.defaultMaxFrameSize) throws {
        let parsed = try Endpoint(parsing: endpoint)
        self.endpoint = endpoint
        host = parsed.host
        port = parsed.port
        self.loop = loop
        self.maxFrameSize = maxFrameSize
    }

    /// A transport dropped without `close()`: its connection and deadline timer are closed too.
    deinit {
        let connection = state.withLock { $0.connection }
        guard connection != nil || deadlineTimer != nil else { return }  // never called: nothing to close
        loop.execute { [deadlineTimer] in
            connection?.close(reason: "transport released")
            deadlineTimer?.close()
        }
    }

    public var isAvailable: Bool {
        backoffUntil.withLock { $0.map { $0 <= .now } ?? true }
    }

    public func unary(_ head: CallHead, request: [UInt8]) async throws -> [UInt8] {
        let id = nextCallID.wrappingAdd(1, ordering: .relaxed).oldValue
        let frame = requestFrame(id, head, request)
        return try await withTaskCancellationHandler {
            try await withUnsafeThrowingContinuation { (continuation: UnsafeContinuation<[UInt8], any Error>) in
                begin(id, .unary(continuation, last: nil), head, frame)
            }
        } onCancel: {
            end(id, error: RPCError(.cancelled, "call to \(head.method) was cancelled"), notifyServer: true)
        }
    }

    public func serverStreaming(_ head: CallHead, request: [UInt8]) -> AsyncThrowingStream<[UInt8], any Error> {
        let id = nextCallID.wrappingAdd(1, ordering: .relaxed).oldValue
        let frame = requestFrame(id, head, request)
        let (stream, continuation) = AsyncThrowingStream<[UInt8], any Error>.makeStream()
        continuation.onTermination = { reason in
            if case .cancelled = reason {
                self.end(id, error: RPCError(.cancelled, "call to \(head.method) was cancelled"), notifyServer: true)
            }
        }
        begin(id, .stream(continuation), head, frame)
        return stream
    }

    public func close() {
        loop.execute { [self] in
            state.withLock { $0.connection }?.close(reason: "closed by the client")
            deadlineTimer?.close()
            deadlineTimer = nil
            state.withLock { $0.timerDue = nil }
        }
    }

    private func requestFrame(_ id: UInt64, _ head: CallHead, _ request: [UInt8]) -> RpcV1.Frame {
        var frame = RpcV1.Frame(
            callID: id, kind: .request, method: head.method,
            metadata: head.metadata.map { RpcV1.MetadataEntry(key: $0.key, value: $0.value) },
            hasPayload: true, payload: request)
        if let deadline = head.deadline {
            let left = max(.zero, deadline - .now)
            frame.timeoutMicros = UInt64(left.components.seconds) * 1_000_000 + UInt64(left.components.attoseconds / 1_000_000_000_000)
        }
        return frame
    }

    private enum PendingCall {
        case unary(UnsafeContinuation<[UInt8], any Error>, last: [UInt8]?)
        case stream(AsyncThrowingStream<[UInt8], any Error>.Continuation)

        func fail(_ error: any Error) {
            switch self {
            case .unary(let continuation, _): continuation.resume(throwing: error)
            case .stream(let continuation): continuation.finish(throwing: error)
            }
        }
    }

    /// What `begin` found it has to do once the state is unlocked.
    private enum Next {
        case send(TCPConnection)
        case connect
        case wait
        case cancelled
    }

    /// Registers a call and sends its request, or queues it until the connection is up (any thread).
    private func begin(_ id: UInt64, _ call: PendingCall, _ head: CallHead, _ frame: RpcV1.Frame) {
        let next = state.withLock { state -> Next in
            // Checked under the lock that `end` takes too: a cancellation now or later is seen.
            if Task.isCancelled { return .cancelled }
            state.calls[id] = call
            if let deadline = head.deadline, watch(deadline, of: id, method: head.method, in: &state) {
                loop.execute { self.armDeadlineTimer() }
            }
            if state.isConnected, let connection = state.connection { return .send(connection) }
            state.unsent.append((id, frame.serializedBytes()))
            return state.connection == nil ? .connect : .wait
        }
        switch next {
        case .send(let connection): connection.send(frame)
        case .connect: loop.execute { self.connect() }
        case .wait: break
        case .cancelled:
            call.fail(RPCError(.cancelled, "call to \(head.method) was cancelled"))
            return
        }
    }

    // MARK: Loop thread

    private func connect() {
        guard state.withLock({ $0.connection == nil && !$0.calls.isEmpty }) else { return }
        let connection = TCPConnection(loop: loop, maxFrameSize: maxFrameSize)
        state.withLock { $0.connection = connection }
        connection.onFrame = { [weak self] in self?.received($0) }
        connection.onClose = { [weak self, unowned connection] reason in self?.lost(connection, reason: reason) }
        connection.connect(to: SocketAddress(host: host, port: port)!) { [weak self] status in
            self?.connected(connection, status: status)
        }
    }

    private func connected(_ connection: TCPConnection, status: Int32) {
        guard status == 0 else {
            connection.close(reason: uvError(status))
            return
        }
        let unsent = state.withLock { state -> [(id: UInt64, envelope: [UInt8])]? in
            guard connection === state.connection, !connection.isClosed else { return nil }
            state.isConnected = true
            state.failures = 0
            defer { state.unsent.removeAll() }
            return state.unsent.filter { state.calls[$0.id] != nil }
        }
        guard let unsent else { return }
        backoffUntil.withLock { $0 = nil }
        for (_, envelope) in unsent { connection.send(envelope: envelope) }
    }

    private func lost(_ connection: TCPConnection, reason: String) {
        let outcome = state.withLock { state -> (calls: [UInt64: PendingCall], neverSent: Set<UInt64>, failures: Int?)? in
            guard connection === state.connection else { return nil }
            let wasConnected = state.isConnected
            state.connection = nil
            state.isConnected = false
            let neverSent = Set(state.unsent.map(\.id))
            state.unsent.removeAll()
            if !wasConnected { state.failures += 1 }
            defer { state.calls.removeAll() }
            return (state.calls, neverSent, wasConnected ? nil : state.failures)
        }
        guard let outcome else { return }
        if let failures = outcome.failures {
            let pause = Duration.milliseconds(min(5000, 50 << min(failures, 7)))
            backoffUntil.withLock { $0 = .now + pause }
        }
        for (id, call) in outcome.calls {
            if outcome.neverSent.contains(id) {
                call.fail(ConnectFailure(endpoint: endpoint, reason: reason))
            } else {
                call.fail(RPCError(.unavailable, "connection to \(endpoint) lost: \(reason)"))
            }
        }
    }

    private func received(_ bytes: UnsafeRawBufferPointer) {
        guard let frame = try? RpcV1.Frame(serializedBytes: bytes) else {
            state.withLock { $0.connection }?.close(reason: "reply envelope from \(endpoint) does not decode")
            return
        }
        switch frame.kind {
        case .message:
            let stream = state.withLock { state -> AsyncThrowingStream<[UInt8], any Error>.Continuation? in
                switch state.calls[frame.callID] {
                case .unary(let continuation, _):
                    state.calls[frame.callID] = .unary(continuation, last: frame.payload)
                    return nil
                case .stream(let continuation): return continuation
                case nil: return nil
                }
            }
            stream?.yield(frame.payload)
        case .status where frame.callID == 0:
            let error = RPCError(StatusCode(rawValue: frame.statusCode), frame.statusMessage)
            let calls = state.withLock { state in
                defer { state.calls.removeAll() }
                return state.calls
            }
            for call in calls.values { call.fail(error) }
        case .status:
            let error = frame.statusCode == 0 ? nil : RPCError(StatusCode(rawValue: frame.statusCode), frame.statusMessage)
            end(frame.callID, message: frame.hasPayload ? frame.payload : nil, error: error, notifyServer: false)
        default:
            state.withLock { $0.connection }?.close(reason: "unexpected \(frame.kind) frame from \(endpoint)")
        }
    }

    /// Completes a call: with its status from the server, or locally (cancelled, deadline). Any thread.
    private func end(_ id: UInt64, message: [UInt8]? = nil, error: RPCError?, notifyServer: Bool) {
        let (call, connection) = state.withLock { state in
            (state.calls.removeValue(forKey: id), state.isConnected ? state.connection : nil)
        }
        guard let call else { return }
        if notifyServer, let connection { connection.send(RpcV1.Frame(callID: id, kind: .cancel)) }
        switch call {
        case .unary(let continuation, let last):
            if let error {
                continuation.resume(throwing: error)
            } else if let reply = message ?? last {
                continuation.resume(returning: reply)
            } else {
                continuation.resume(throwing: RPCError(.internalError, "server ended a unary call without a response"))
            }
        case .stream(let continuation):
            if let message { continuation.yield(message) }
            if let error { continuation.finish(throwing: error) } else { continuation.finish() }
        }
    }

    /// Adds a call's deadline to the heap (under the state lock); true when the timer must be
    /// moved earlier, which only the loop can do.
    private func watch(_ deadline: ContinuousClock.Instant, of id: UInt64, method: String, in state: inout State) -> Bool {
        let calls = state.calls
        state.deadlines.add((id, method), at: deadline, liveCalls: calls.count) { calls[$0.id] == nil }
        return state.timerDue.map { deadline < $0 } ?? true
    }

    /// Sets the timer for the earliest deadline (loop thread).
    private func armDeadlineTimer() {
        guard let due = state.withLock({ state -> ContinuousClock.Instant? in
            guard let first = state.deadlines.earliest, state.timerDue.map({ first < $0 }) ?? true else { return nil }
            state.timerDue = first
            return first
        }) else { return }
        if deadlineTimer == nil {
            deadlineTimer = LoopTimer(loop: loop) { [weak self] in self?.expireDeadlines() }
        }
        deadlineTimer?.start(after: max(.zero, due - .now))
    }

    private func expireDeadlines() {
        let now = ContinuousClock.now
        let expired = state.withLock { state in
            state.timerDue = nil
            return state.deadlines.popExpired(at: now).filter { state.calls[$0.id] != nil }
        }
        for call in expired {
            end(call.id, error: RPCError(.deadlineExceeded, "no answer from \(endpoint) to \(call.method) before the deadline"), notifyServer: true)
        }
        armDeadlineTimer()
    }
}

extension TCPConnection {
    /// Queues `message` as one frame, encoded straight into the outbox; safe from any thread.
    func send<Message: ProtoMessage>(_ message: Message) {
        message.serialize { byteCount, pack in send(envelopeOfSize: byteCount, pack) }
    }
}
