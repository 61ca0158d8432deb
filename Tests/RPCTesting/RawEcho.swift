import Foundation
import RPC
import Synchronization
import Transport

/// The floor the RPC path is measured against: the same event loop library and framing, but no
/// envelope, no protobuf, no worker hop. The server echoes each frame back from the loop thread.
public final class RawEchoServer: @unchecked Sendable {
    private let loop = EventLoop(name: "raw-echo-loop")
    private var listener: TCPListener?
    public private(set) var address = ""

    public init() throws {
        let outcome: Result<TCPListener, RPCError> = loop.submit { [loop] in
            TCPListener.open(loop: loop, address: SocketAddress(host: "127.0.0.1", port: 0)!) { connection in
                connection.readFrames().onFrame = { [unowned connection] envelope in
                    connection.send(envelopeOfSize: envelope.count) { $0.copyMemory(from: envelope) }
                }
                connection.start()
            }
        }
        let listener = try outcome.get()
        self.listener = listener
        address = listener.address
    }

    public func shutdown() {
        loop.shutdown()
    }
}

/// Sends frames to a `RawEchoServer` over one connection; replies come back in order. Like
/// `TCPClientTransport`, a call registers itself and queues its frame from the caller's thread.
public final class RawEchoClient: @unchecked Sendable {
    private let connection: TCPConnection
    /// Callers waiting for their echo, oldest first, and why the connection closed once it has.
    private let state = Lock<(waiting: FIFO<UnsafeContinuation<[UInt8], any Error>>, closed: String?)>((FIFO(), nil))

    public init(endpoint: String, loop: EventLoop = .shared) async throws {
        let address = try Endpoint(parsing: endpoint).socketAddress
        connection = loop.submit { TCPConnection(loop: loop) }
        // Weak: the connection lives on the shared loop, which may finish closing it after this client is gone.
        connection.readFrames().onFrame = { [weak self] envelope in
            // The server echoes in order; a frame nobody waits for cannot come from it.
            self?.state.withLock { $0.waiting.popFirst() }?.resume(returning: Array(envelope))
        }
        connection.onClose = { [weak self] reason in
            guard let self else { return }
            var waiting = state.withLock { state in
                state.closed = reason
                defer { state.waiting = FIFO() }
                return state.waiting
            }
            while let caller = waiting.popFirst() {
                caller.resume(throwing: RPCError(.unavailable, "echo connection closed: \(reason)"))
            }
        }
        try await TCPConnection.connect(connection, to: address)
    }

    /// Sends `bytes` and waits for them to come back; throws UNAVAILABLE once the connection closed.
    public func echo(_ bytes: [UInt8]) async throws -> [UInt8] {
        try await withUnsafeThrowingContinuation { continuation in
            // Registered and queued under one lock, so replies match callers in order.
            let closed = state.withLock { state -> String? in
                if let reason = state.closed { return reason }
                state.waiting.append(continuation)
                connection.send(envelope: bytes)
                return nil
            }
            if let closed { continuation.resume(throwing: RPCError(.unavailable, "echo connection closed: \(closed)")) }
        }
    }

    public func close() {
        connection.loop.execute { [connection] in connection.close(reason: "benchmark done") }
    }
}
