import CLibUV
import Foundation
import RPC
import Schema
import Synchronization

/// A client's connection to one endpoint (`host:port`), shared by all calls to it: many calls are
/// multiplexed on one TCP connection and answered out of order. Connects lazily, reconnects after
/// the connection is lost, and enforces call deadlines on the event loop.
public final class TCPClientTransport: ClientTransport, @unchecked Sendable {
    public let endpoint: String
    private let host: String
    private let port: Int
    private let loop: EventLoop
    private let maxFrameSize: Int
    private let nextCallID = Atomic<UInt64>(1)
    private let backoffUntil = Mutex<ContinuousClock.Instant?>(nil)

    // Loop-thread state.
    private var connection: TCPConnection?
    private var isConnected = false
    /// Request frames of calls waiting for the connection to be made.
    private var unsent: [(id: UInt64, envelope: [UInt8])] = []
    private var calls: [UInt64: PendingCall] = [:]
    private var deadlineTimer: LoopTimer?
    private var failures = 0

    /// A transport to `endpoint` (`host:port`, numeric host or `localhost`).
    public init(endpoint: String, loop: EventLoop = .shared, maxFrameSize: Int = FrameCodec.defaultMaxFrameSize) throws {
        guard let colon = endpoint.lastIndex(of: ":"), let port = Int(endpoint[endpoint.index(after: colon)...]),
              SocketAddress(host: Self.unbracketed(String(endpoint[..<colon])), port: port) != nil
        else {
            throw RPCError(.invalidArgument, "endpoint \(endpoint) is not HOST:PORT with a numeric address (or localhost) and a port 0-65535")
        }
        self.endpoint = endpoint
        host = Self.unbracketed(String(endpoint[..<colon]))
        self.port = port
        self.loop = loop
        self.maxFrameSize = maxFrameSize
    }

    private static func unbracketed(_ host: String) -> String {
        host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
    }

    public var isAvailable: Bool {
        backoffUntil.withLock { $0.map { $0 <= .now } ?? true }
    }

    public func unary(_ head: CallHead, request: [UInt8]) async throws -> [UInt8] {
        let id = nextCallID.wrappingAdd(1, ordering: .relaxed).oldValue
        let envelope = requestEnvelope(id, head, request)
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<[UInt8], any Error>) in
                if Task.isCancelled {
                    continuation.resume(throwing: RPCError(.cancelled, "call to \(head.method) was cancelled"))
                    return
                }
                loop.execute { self.begin(id, .unary(continuation, last: nil), head, envelope) }
            }
        } onCancel: {
            loop.execute { self.end(id, error: RPCError(.cancelled, "call to \(head.method) was cancelled"), notifyServer: true) }
        }
    }

    public func serverStreaming(_ head: CallHead, request: [UInt8]) -> AsyncThrowingStream<[UInt8], any Error> {
        let id = nextCallID.wrappingAdd(1, ordering: .relaxed).oldValue
        let envelope = requestEnvelope(id, head, request)
        let (stream, continuation) = AsyncThrowingStream<[UInt8], any Error>.makeStream()
        continuation.onTermination = { [loop] reason in
            if case .cancelled = reason {
                loop.execute { self.end(id, error: RPCError(.cancelled, "call to \(head.method) was cancelled"), notifyServer: true) }
            }
        }
        loop.execute { self.begin(id, .stream(continuation), head, envelope) }
        return stream
    }

    public func close() {
        loop.execute { [self] in
            connection?.close(reason: "closed by the client")
            deadlineTimer?.close()
            deadlineTimer = nil
        }
    }

    private func requestEnvelope(_ id: UInt64, _ head: CallHead, _ request: [UInt8]) -> [UInt8] {
        var frame = RpcV1.Frame(
            callID: id, kind: .request, method: head.method,
            metadata: head.metadata.map { RpcV1.MetadataEntry(key: $0.key, value: $0.value) },
            hasPayload: true, payload: request)
        if let deadline = head.deadline {
            let left = max(.zero, deadline - .now)
            frame.timeoutMicros = UInt64(left.components.seconds) * 1_000_000 + UInt64(left.components.attoseconds / 1_000_000_000_000)
        }
        return frame.serializedBytes()
    }

    // MARK: Loop thread

    private enum PendingCall {
        case unary(CheckedContinuation<[UInt8], any Error>, last: [UInt8]?)
        case stream(AsyncThrowingStream<[UInt8], any Error>.Continuation)
    }

    private var deadlines: [UInt64: (ContinuousClock.Instant, String)] = [:]

    private func begin(_ id: UInt64, _ call: PendingCall, _ head: CallHead, _ envelope: [UInt8]) {
        calls[id] = call
        if let deadline = head.deadline {
            deadlines[id] = (deadline, head.method)
            armDeadlineTimer()
        }
        if isConnected, let connection {
            connection.send(envelope: envelope)
        } else {
            unsent.append((id, envelope))
            if connection == nil { connect() }
        }
    }

    private func connect() {
        let connection = TCPConnection(loop: loop, maxFrameSize: maxFrameSize)
        self.connection = connection
        connection.onFrame = { [weak self] in self?.received($0) }
        connection.onClose = { [weak self, unowned connection] reason in self?.lost(connection, reason: reason) }
        connection.connect(to: SocketAddress(host: host, port: port)!) { [weak self] status in
            self?.connected(connection, status: status)
        }
    }

    private func connected(_ connection: TCPConnection, status: Int32) {
        guard connection === self.connection, !connection.isClosed else { return }
        guard status == 0 else {
            connection.close(reason: uvError(status))
            return
        }
        isConnected = true
        failures = 0
        backoffUntil.withLock { $0 = nil }
        for (id, envelope) in unsent where calls[id] != nil { connection.send(envelope: envelope) }
        unsent.removeAll()
    }

    private func lost(_ connection: TCPConnection, reason: String) {
        guard connection === self.connection else { return }
        let wasConnected = isConnected
        self.connection = nil
        isConnected = false
        let neverSent = Set(unsent.map(\.id))
        unsent.removeAll()
        if !wasConnected {
            failures += 1
            let pause = Duration.milliseconds(min(5000, 50 << min(failures, 7)))
            backoffUntil.withLock { $0 = .now + pause }
        }
        for id in Array(calls.keys) {
            if neverSent.contains(id) {
                fail(id, ConnectFailure(endpoint: endpoint, reason: reason))
            } else {
                fail(id, RPCError(.unavailable, "connection to \(endpoint) lost: \(reason)"))
            }
        }
    }

    private func received(_ bytes: [UInt8]) {
        guard let frame = try? RpcV1.Frame(serializedBytes: bytes) else {
            connection?.close(reason: "reply envelope from \(endpoint) does not decode")
            return
        }
        switch frame.kind {
        case .message:
            switch calls[frame.callID] {
            case .unary(let continuation, _): calls[frame.callID] = .unary(continuation, last: frame.payload)
            case .stream(let continuation): continuation.yield(frame.payload)
            case nil: break
            }
        case .status where frame.callID == 0:
            let error = RPCError(StatusCode(rawValue: frame.statusCode), frame.statusMessage)
            for id in Array(calls.keys) { fail(id, error) }
        case .status:
            let error = frame.statusCode == 0 ? nil : RPCError(StatusCode(rawValue: frame.statusCode), frame.statusMessage)
            end(frame.callID, message: frame.hasPayload ? frame.payload : nil, error: error, notifyServer: false)
        default:
            connection?.close(reason: "unexpected \(frame.kind) frame from \(endpoint)")
        }
    }

    private func fail(_ id: UInt64, _ error: any Error) {
        guard let call = calls.removeValue(forKey: id) else { return }
        deadlines[id] = nil
        switch call {
        case .unary(let continuation, _): continuation.resume(throwing: error)
        case .stream(let continuation): continuation.finish(throwing: error)
        }
    }

    /// Completes a call: with its status from the server, or locally (cancelled, deadline).
    private func end(_ id: UInt64, message: [UInt8]? = nil, error: RPCError?, notifyServer: Bool) {
        guard let call = calls.removeValue(forKey: id) else { return }
        deadlines[id] = nil
        if notifyServer, isConnected, let connection {
            connection.send(envelope: RpcV1.Frame(callID: id, kind: .cancel).serializedBytes())
        }
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

    private func armDeadlineTimer() {
        guard let earliest = deadlines.values.map(\.0).min() else {
            deadlineTimer?.stop()
            return
        }
        if deadlineTimer == nil {
            deadlineTimer = LoopTimer(loop: loop) { [unowned self] in expireDeadlines() }
        }
        deadlineTimer?.start(after: max(.zero, earliest - .now))
    }

    private func expireDeadlines() {
        let now = ContinuousClock.now
        for (id, (deadline, method)) in deadlines where deadline <= now {
            end(id, error: RPCError(.deadlineExceeded, "no answer from \(endpoint) to \(method) before the deadline"), notifyServer: true)
        }
        armDeadlineTimer()
    }
}
