import Base
import Foundation
import RPC
import RPCWire
import Schema
import Synchronization
import TCP
import TLS
import TLSStreams

/// A client's connection to one endpoint (`host:port`), shared by all calls to it: many calls are
/// multiplexed on one TCP connection and answered out of order. Connects lazily, reconnects after
/// the connection is lost, and enforces call deadlines on the event loop.
///
/// A call registers itself and queues its request from the caller's thread (no hop to the loop);
/// the loop writes what was queued, reads replies and completes the calls.
///
/// With `tls` credentials the connection is a TLS session (`TLSStream`): the server's certificate
/// must be signed by their CA and name the endpoint's host, and the client presents its own
/// certificate (mutual TLS); calls wait for the handshake as they wait for the connection.
///
/// At most `maxConcurrentCalls` calls are open on the connection (the server's default limit, as
/// gRPC clients keep to a server's MAX_CONCURRENT_STREAMS): more wait here, their frames held back,
/// until an open call ends.
public final class TCPClientTransport: ClientTransport, @unchecked Sendable {
    public let endpoint: String
    private let host: String
    private let port: Int
    private let loop: EventLoop
    private let maxFrameSize: Int
    /// TLS for every connection, when given.
    public let tls: TLSCredentials?
    private let nextCallID = Atomic<UInt64>(1)
    private let backoffUntil = Mutex<ContinuousClock.Instant?>(nil)

    private let state = Lock(State())
    /// Calls open on the server at once; the server refuses more (`TCPServer.Limits.maxConcurrentCalls`).
    public static let maxConcurrentCalls = 100
    private let maxConcurrentCalls: Int

    private struct State {
        /// Calls whose request went (or is about to go) to the server and that it has not answered.
        var open = 0
        /// Calls waiting for one of those to end, oldest first, with the frames they sent meanwhile.
        var held = FIFO<UInt64>()
        var heldFrames: [UInt64: [[UInt8]]] = [:]
        var connection: ClientStream?
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
    /// Ends a connection attempt (TCP and, with TLS, the handshake) that takes longer than
    /// `connectTimeout` (loop thread).
    private var connectTimer: LoopTimer?
    /// How long a connection attempt may take: an endpoint that drops our SYNs (a machine cut off
    /// by a partition, a firewall) fails its calls' connection after this, so the client tries the
    /// next endpoint, instead of holding every call to its deadline while the kernel retries the
    /// SYN for two minutes.
    public let connectTimeout: Duration

    /// A transport to `endpoint` (`host:port`, numeric host or `localhost`).
    public init(
        endpoint: String, loop: EventLoop = .shared, maxFrameSize: Int = FrameCodec.defaultMaxFrameSize,
        maxConcurrentCalls: Int = TCPClientTransport.maxConcurrentCalls, tls: TLSCredentials? = nil,
        connectTimeout: Duration = .seconds(2)
    ) throws {
        self.tls = tls
        self.connectTimeout = connectTimeout
        self.maxConcurrentCalls = max(1, maxConcurrentCalls)
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
        // never called: nothing to close
        guard connection != nil || deadlineTimer != nil || connectTimer != nil else { return }
        loop.execute { [deadlineTimer, connectTimer] in
            connection?.close(reason: "transport released")
            deadlineTimer?.close()
            connectTimer?.close()
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

    public func stream(_ head: CallHead, request: [UInt8]?) -> any ClientCall {
        let id = nextCallID.wrappingAdd(1, ordering: .relaxed).oldValue
        let call = TCPClientCall(id: id, method: head.method, transport: self)
        begin(id, .stream(call), head, requestFrame(id, head, request))
        return call
    }

    public func close() {
        loop.execute { [self] in
            state.withLock { $0.connection }?.close(reason: "closed by the client")
            deadlineTimer?.close()
            deadlineTimer = nil
            connectTimer?.close()
            connectTimer = nil
            state.withLock { $0.timerDue = nil }
        }
    }

    /// The REQUEST frame opening call `id`: with its only request, or (nil) opening its stream of requests.
    private func requestFrame(_ id: UInt64, _ head: CallHead, _ request: [UInt8]?) -> RpcV1.Frame {
        var frame = RpcV1.Frame(
            callID: id, kind: .request, method: head.method,
            metadata: head.metadata.map { RpcV1.MetadataEntry(key: $0.key, value: $0.value) },
            hasPayload: request != nil, payload: request ?? [], clientStream: request == nil)
        if let deadline = head.deadline {
            let left = max(.zero, deadline - .now)
            frame.timeoutMicros = left.wholeMicroseconds
        }
        return frame
    }

    private enum PendingCall {
        case unary(UnsafeContinuation<[UInt8], any Error>, last: [UInt8]?)
        case stream(TCPClientCall)

        func fail(_ error: any Error) {
            switch self {
            case .unary(let continuation, _): continuation.resume(throwing: error)
            case .stream(let call): call.ended(message: nil, error: error, local: false)
            }
        }
    }

    /// What `begin` found it has to do once the state is unlocked.
    private enum Next {
        case send(ClientStream)
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
            if state.open >= maxConcurrentCalls {
                state.held.append(id)
                state.heldFrames[id] = [FrameEnvelope.bytes(of: frame)]
                return .wait
            }
            state.open += 1
            if state.isConnected, let connection = state.connection { return .send(connection) }
            state.unsent.append((id, FrameEnvelope.bytes(of: frame)))
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
        loop.assertInLoop()
        guard state.withLock({ $0.connection == nil && !$0.calls.isEmpty }) else { return }
        let connection = TCPConnection(loop: loop)
        let stream: ClientStream
        if let tls {
            do {
                stream = .tls(try TLSStream(socket: connection, context: tls.context, serverName: host))
            } catch {
                connection.onClose = { [weak self, unowned connection] reason in self?.lost(connection, reason: reason)
                }
                state.withLock { $0.connection = .plain(connection) }
                connection.close(reason: "cannot start TLS: \(error)")
                return
            }
        } else {
            stream = .plain(connection)
        }
        state.withLock { $0.connection = stream }
        switch stream {
        case .plain(let plain):
            plain.readFrames(maxFrameSize: maxFrameSize).onFrame = { [weak self] in self?.received($0) }
        case .tls(let secure):
            secure.readFrames(maxFrameSize: maxFrameSize).onFrame = { [weak self] in self?.received($0) }
        }
        connection.onClose = { [weak self, unowned connection] reason in self?.lost(connection, reason: reason) }
        startConnectTimer(for: connection)
        connection.connect(to: SocketAddress(host: host, port: port)!) { [weak self] status in
            guard case .tls(let secure) = stream, status == 0, !connection.isClosed else {
                self?.connected(connection, status: status)
                return
            }
            // Calls go out once the handshake is done; a failed one closes the socket with its reason.
            secure.onEstablished = { [weak self] _, _ in self?.connected(connection, status: 0) }
            secure.start()
        }
    }

    /// Closes `connection` unless it is up (handshake included) within `connectTimeout`.
    private func startConnectTimer(for connection: TCPConnection) {
        if connectTimer == nil {
            connectTimer = LoopTimer(loop: loop) { [weak self] in self?.connectTimedOut() }
        }
        connectTimer?.start(after: connectTimeout)
    }

    private func connectTimedOut() {
        loop.assertInLoop()
        let pending = state.withLock { state in state.isConnected ? nil : state.connection?.socket }
        pending?.close(reason: "no connection within \(connectTimeout) (the endpoint does not answer)")
    }

    private func connected(_ connection: TCPConnection, status: Int32) {
        loop.assertInLoop()
        connectTimer?.stop()
        guard status == 0 else {
            connection.close(reason: uvError(status))
            return
        }
        let sent = state.withLock { state -> Bool in
            guard connection === state.connection?.socket, let stream = state.connection, !connection.isClosed else {
                return false
            }
            state.isConnected = true
            state.failures = 0
            // Under the lock, so that a stream's next frames (sent directly from now on) cannot
            // overtake its first ones.
            for (id, envelope) in state.unsent where state.calls[id] != nil { stream.send(envelope: envelope) }
            state.unsent.removeAll()
            return true
        }
        guard sent else { return }
        backoffUntil.withLock { $0 = nil }
    }

    private func lost(_ connection: TCPConnection, reason: String) {
        loop.assertInLoop()
        if connection === state.withLock({ $0.connection?.socket }) { connectTimer?.stop() }
        let outcome = state.withLock {
            state -> (calls: [UInt64: PendingCall], neverSent: Set<UInt64>, failures: Int?)? in
            guard connection === state.connection?.socket else { return nil }
            let wasConnected = state.isConnected
            state.connection = nil
            state.isConnected = false
            let neverSent = Set(state.unsent.map(\.id)).union(state.heldFrames.keys)
            state.unsent.removeAll()
            state.open = 0
            state.held = FIFO()
            state.heldFrames.removeAll()
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
        loop.assertInLoop()
        guard let frame = try? RpcV1.Frame(envelope: bytes) else {
            state.withLock { $0.connection }?.close(reason: "reply envelope from \(endpoint) does not decode")
            return
        }
        switch frame.kind {
        case .message:
            let stream = state.withLock { state -> TCPClientCall? in
                switch state.calls[frame.callID] {
                case .unary(let continuation, _):
                    state.calls[frame.callID] = .unary(continuation, last: frame.payload)
                    return nil
                case .stream(let call): return call
                case nil: return nil
                }
            }
            do {
                try stream?.inbox.receive(chunk: frame.payload, continues: frame.continues)
            } catch {
                end(frame.callID, error: error.error, notifyServer: true)
            }
        case .windowUpdate:
            guard case .stream(let call) = state.withLock({ $0.calls[frame.callID] }) else { return }
            call.window.grant(Int(frame.windowIncrement))
        case .status where frame.callID == 0:
            let error = RPCError(StatusCode(rawValue: frame.statusCode), frame.statusMessage)
            let calls = state.withLock { state in
                defer {
                    state.calls.removeAll()
                    state.open = 0
                    state.held = FIFO()
                    state.heldFrames.removeAll()
                }
                return state.calls
            }
            for call in calls.values { call.fail(error) }
        case .status:
            let error =
                frame.statusCode == 0 ? nil : RPCError(StatusCode(rawValue: frame.statusCode), frame.statusMessage)
            end(frame.callID, message: frame.hasPayload ? frame.payload : nil, error: error, notifyServer: false)
        default:
            state.withLock { $0.connection }?.close(reason: "unexpected \(frame.kind) frame from \(endpoint)")
        }
    }

    /// Completes a call: with its status from the server, or locally (cancelled, deadline). Any thread.
    private func end(_ id: UInt64, message: [UInt8]? = nil, error: RPCError?, notifyServer: Bool) {
        let call = state.withLock { state -> PendingCall? in
            let call = state.calls.removeValue(forKey: id)
            let wasHeld = call != nil && state.heldFrames.removeValue(forKey: id) != nil
            let connection = state.isConnected ? state.connection : nil
            if call != nil, !wasHeld {
                // The CANCEL first, so the server has a place free for the call taking this one's.
                if notifyServer { connection?.send(RpcV1.Frame(callID: id, kind: .cancel)) }
                releaseHeld(&state)
            }
            return call
        }
        guard let call else { return }
        switch call {
        case .unary(let continuation, let last):
            if let error {
                continuation.resume(throwing: error)
            } else if let reply = message ?? last {
                continuation.resume(returning: reply)
            } else {
                continuation.resume(throwing: RPCError(.internalError, "server ended a unary call without a response"))
            }
        case .stream(let call):
            call.ended(message: message, error: error, local: notifyServer)
        }
    }

    /// An open call ended: the oldest held call still waiting opens in its place. Its frames are
    /// sent now when connected, else queued for the connection (under the state lock).
    /// Sent under the lock, so that the call's next frames (sent directly from now on) cannot
    /// overtake these.
    private func releaseHeld(_ state: inout State) {
        state.open -= 1
        while let next = state.held.popFirst() {
            guard let frames = state.heldFrames.removeValue(forKey: next) else { continue }  // ended while held
            state.open += 1
            if state.isConnected, let connection = state.connection {
                for envelope in frames { connection.send(envelope: envelope) }
            } else {
                state.unsent += frames.map { (next, $0) }
            }
            return
        }
    }

    /// Sends a frame of open call `id`, or queues it behind the call's request while the connection
    /// is being made or the call is held; false once the call is over (any thread).
    fileprivate func send(_ frame: RpcV1.Frame, onCall id: UInt64) -> Bool {
        let outcome = state.withLock { state -> (open: Bool, connection: ClientStream?) in
            guard state.calls[id] != nil else { return (false, nil) }
            if state.heldFrames[id] != nil {
                state.heldFrames[id]!.append(FrameEnvelope.bytes(of: frame))
                return (true, nil)
            }
            if state.isConnected, let connection = state.connection { return (true, connection) }
            state.unsent.append((id, FrameEnvelope.bytes(of: frame)))
            return (true, nil)
        }
        outcome.connection?.send(frame)
        return outcome.open
    }

    /// Ends call `id` from the client's side with CANCELLED, telling the server (any thread).
    fileprivate func cancel(_ id: UInt64, method: String) {
        end(id, error: RPCError(.cancelled, "call to \(method) was cancelled"), notifyServer: true)
    }

    /// Adds a call's deadline to the heap (under the state lock); true when the timer must be
    /// moved earlier, which only the loop can do.
    private func watch(_ deadline: ContinuousClock.Instant, of id: UInt64, method: String, in state: inout State)
        -> Bool
    {
        let calls = state.calls
        state.deadlines.add((id, method), at: deadline, liveCalls: calls.count) { calls[$0.id] == nil }
        return state.timerDue.map { deadline < $0 } ?? true
    }

    /// Sets the timer for the earliest deadline (loop thread).
    private func armDeadlineTimer() {
        loop.assertInLoop()
        guard
            let due = state.withLock({ state -> ContinuousClock.Instant? in
                guard let first = state.deadlines.earliest, state.timerDue.map({ first < $0 }) ?? true else {
                    return nil
                }
                state.timerDue = first
                return first
            })
        else { return }
        if deadlineTimer == nil {
            deadlineTimer = LoopTimer(loop: loop) { [weak self] in self?.expireDeadlines() }
        }
        deadlineTimer?.start(after: max(.zero, due - .now))
    }

    private func expireDeadlines() {
        loop.assertInLoop()
        let now = ContinuousClock.now
        let expired = state.withLock { state in
            state.timerDue = nil
            return state.deadlines.popExpired(at: now).filter { state.calls[$0.id] != nil }
        }
        for call in expired {
            end(
                call.id,
                error: RPCError(.deadlineExceeded, "no answer from \(endpoint) to \(call.method) before the deadline"),
                notifyServer: true)
        }
        armDeadlineTimer()
    }
}

/// The stream a client's calls go over: the socket itself or a TLS session over it. An enum rather
/// than `any ByteStream`, so a plaintext frame costs a branch, not a dynamic call.
enum ClientStream {
    case plain(TCPConnection)
    case tls(TLSStream)

    var socket: TCPConnection {
        switch self {
        case .plain(let socket): socket
        case .tls(let secure): secure.socket
        }
    }

    func send(_ frame: RpcV1.Frame) {
        switch self {
        case .plain(let socket): socket.send(frame)
        case .tls(let secure): secure.send(frame)
        }
    }

    func send(envelope: [UInt8]) {
        switch self {
        case .plain(let socket): socket.send(envelope: envelope)
        case .tls(let secure): secure.send(envelope: envelope)
        }
    }

    /// Closes the socket now (a TLS session ends with it). Loop thread.
    func close(reason: String) { socket.close(reason: reason) }
}

/// A streaming call on a `TCPClientTransport`: its responses' inbox (granting the server credit
/// as the consumer reads) and its requests' credit window.
final class TCPClientCall: ClientCall, @unchecked Sendable {  // `transport` is set once, in init
    let id: UInt64
    let method: String
    private weak var transport: TCPClientTransport?
    let inbox: MessageInbox
    let window = SendWindow()

    init(id: UInt64, method: String, transport: TCPClientTransport) {
        self.id = id
        self.method = method
        self.transport = transport
        inbox = MessageInbox { [weak transport] bytes in
            _ = transport?.send(
                RpcV1.Frame(callID: id, kind: .windowUpdate, windowIncrement: UInt32(clamping: bytes)), onCall: id)
        }
    }

    func send(_ message: [UInt8]) async throws {
        try await window.send(message) { chunk, continues in
            let frame = RpcV1.Frame(callID: id, kind: .message, hasPayload: true, payload: chunk, continues: continues)
            guard transport?.send(frame, onCall: id) == true else {
                throw RPCError(.cancelled, "call to \(method) is over")
            }
        }
    }

    func closeRequests() {
        _ = transport?.send(RpcV1.Frame(callID: id, kind: .endStream), onCall: id)
    }

    func next() async throws -> [UInt8]? { try await inbox.next() }

    func cancel() { transport?.cancel(id, method: method) }

    var bufferedBytes: Int { inbox.bufferedBytes }

    /// The call ended: with the server's status (its last response in `message`), or locally
    /// (cancelled, deadline, flow control broken), which drops unread responses.
    func ended(message: [UInt8]?, error: (any Error)?, local: Bool) {
        if let message { inbox.receive(message: message) }
        inbox.finish(error: error, discarding: local)
        window.fail(error ?? RPCError(.cancelled, "call to \(method) is over"))
    }
}
