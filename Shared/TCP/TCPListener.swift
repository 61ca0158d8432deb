import CLibUV
import Foundation
import RPC

/// A listening TCP socket on an event loop; hands each accepted connection to a closure (loop thread).
package final class TCPListener: @unchecked Sendable {
    private let handle: UnsafeMutablePointer<uv_tcp_t>
    private let onAccept: (TCPConnection) -> Void
    private let makeConnection: () -> TCPConnection
    private let loop: EventLoop
    /// `host:port` actually bound (the real port when asked for 0).
    package private(set) var address = ""

    private init(loop: EventLoop, highWater: Int, onAccept: @escaping (TCPConnection) -> Void) {
        handle = allocateHandle(uv_tcp_t.self)
        uv_tcp_init(loop.raw, handle)
        self.onAccept = onAccept
        self.loop = loop
        makeConnection = { TCPConnection(loop: loop, highWater: highWater) }
        handle.pointee.data = Unmanaged.passRetained(self as AnyObject).toOpaque()
    }

    /// Binds and listens (loop thread).
    package static func open(
        loop: EventLoop, address: SocketAddress, highWater: Int = 4 << 20, onAccept: @escaping (TCPConnection) -> Void
    ) -> Result<TCPListener, RPCError> {
        loop.assertInLoop()
        let listener = TCPListener(loop: loop, highWater: highWater, onAccept: onAccept)
        var result = address.withSockaddr { uv_tcp_bind(listener.handle, $0, 0) }
        if result == 0 {
            result = uv_listen(cast(listener.handle, to: uv_stream_t.self), 511) { stream, status in
                let listener =
                    Unmanaged<AnyObject>.fromOpaque(stream!.pointee.data).takeUnretainedValue() as! TCPListener
                listener.accept(status: status)
            }
        }
        guard result == 0 else {
            listener.close()
            return .failure(RPCError(.unavailable, "cannot listen on \(address): \(uvError(result))"))
        }
        listener.address = TCPConnection.address(of: listener.handle, peer: false) ?? address.description
        return .success(listener)
    }

    private func accept(status: Int32) {
        loop.assertInLoop()
        guard status == 0, !isClosed else { return }
        guard !isPaused else {
            // As for a turn's budget below: libuv holds this connection and watches no more until
            // `resume` takes it.
            acceptWhenResumed = true
            return
        }
        guard loop.mayAccept() else {
            // Not accepting it now makes libuv stop watching the socket (so this is not called again
            // meanwhile); `uv_accept` in the next turn takes this connection and watches again, and
            // the kernel queues the others.
            loop.afterThisTurn { [self] in accept(status: 0) }
            return
        }
        let connection = makeConnection()
        guard uv_accept(cast(handle, to: uv_stream_t.self), connection.stream) == 0 else {
            connection.close(reason: "accept failed")
            return
        }
        onAccept(connection)
    }

    private var isClosed = false
    private var isPaused = false
    private var acceptWhenResumed = false

    /// Accepts nothing until `resume`: newcomers wait in the kernel's queue (loop thread).
    package func pause() {
        loop.assertInLoop()
        isPaused = true
    }

    /// Accepts again after `pause`, from the loop's next wake-up on (loop thread; nothing when not paused).
    package func resume() {
        loop.assertInLoop()
        guard isPaused else { return }
        isPaused = false
        guard acceptWhenResumed else { return }
        acceptWhenResumed = false
        loop.execute { [self] in accept(status: 0) }
    }

    /// Stops listening; connections already accepted stay open.
    package func close() {
        isClosed = true
        closeHandle(handle)
    }
}
