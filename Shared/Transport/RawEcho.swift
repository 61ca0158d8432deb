import Foundation
import RPC
import Synchronization

/// The floor the RPC path is measured against: the same event loop library and framing, but no
/// envelope, no protobuf, no worker hop. The server echoes each frame back from the loop thread.
public final class RawEchoServer: @unchecked Sendable {
    private let loop = EventLoop(name: "raw-echo-loop")
    private var listener: TCPListener?
    public private(set) var address = ""

    public init() throws {
        let outcome: Result<TCPListener, RPCError> = loop.submit { [loop] in
            TCPListener.open(loop: loop, address: SocketAddress(host: "127.0.0.1", port: 0)!) { connection in
                connection.onFrame = { [unowned connection] envelope in connection.send(envelope: envelope) }
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

/// Sends frames to a `RawEchoServer` over one connection; replies come back in order.
public final class RawEchoClient: @unchecked Sendable {
    private let loop: EventLoop
    private let connection: TCPConnection
    private var waiting: [CheckedContinuation<[UInt8], any Error>] = []  // loop thread
    private var head = 0

    public init(endpoint: String, loop: EventLoop = .shared) async throws {
        self.loop = loop
        let parts = endpoint.split(separator: ":")
        guard parts.count == 2, let port = Int(parts[1]), let address = SocketAddress(host: String(parts[0]), port: port) else {
            throw RPCError(.invalidArgument, "bad endpoint \(endpoint)")
        }
        connection = loop.submit { TCPConnection(loop: loop, maxFrameSize: FrameCodec.defaultMaxFrameSize) }
        try await TCPConnection.connect(connection, to: address)
        loop.execute { [self] in
            connection.onFrame = { [unowned self] envelope in
                waiting[head].resume(returning: envelope)
                head += 1
                if head > 1024, head * 2 > waiting.count {
                    waiting.removeFirst(head)
                    head = 0
                }
            }
        }
    }

    /// Sends `bytes` and waits for them to come back.
    public func echo(_ bytes: [UInt8]) async throws -> [UInt8] {
        return try await withCheckedThrowingContinuation { continuation in
            loop.execute { [self] in
                waiting.append(continuation)
                connection.send(envelope: bytes)
            }
        }
    }

    public func close() {
        loop.execute { [connection] in connection.close(reason: "benchmark done") }
    }
}
