import RPC
import ServerSeam
import Synchronization
import TCP

/// What the calls of every connection of one server share, whatever protocol brought them: the `RPCServer` they go
/// to, the limits, the workers, and the counts that hold over all connections (calls in flight, uploads open in all
/// and per client address, draining). The listener (`TCPServer`) owns one and makes each connection's table from it
/// (`calls(over:on:queue:)`); a protocol sees that table only through `ConnectionCalls`.
package final class CallServer: @unchecked Sendable {  // `rpc` is set before any connection is served
    package let limits: ServerLimits
    /// Where handlers run.
    package let workers: WorkerPool
    /// The server calls go to, from `serve` on.
    package private(set) var rpc: RPCServer!
    /// Calls being served or queued, over all connections.
    package let inFlight = Atomic<Int>(0)
    /// Uploads open, over all connections (see `ServerLimits.maxUploads`), and per client address.
    package let uploadsOpen = Atomic<Int>(0)
    private let uploadsPerPeer = Mutex<[String: Int]>([:])
    private let draining = Atomic<Bool>(false)

    package init(limits: ServerLimits) {
        self.limits = limits
        workers = WorkerPool(
            width: limits.workers, quickJob: limits.quickCall, burstDelay: limits.answerBatchingWindow,
            longJob: limits.longCall)
    }

    /// Calls go to `rpc` from now on (nil: the server stopped before it served any).
    package func serve(_ rpc: RPCServer?) { self.rpc = rpc }

    /// The calls of a connection that `wire` answers on, served on `loop` (the connection's), queued in `queue`.
    package func calls(over wire: any CallWire, on loop: LoopCalls, queue: CallQueue) -> ServerCallTable {
        ServerCallTable(wire: wire, server: self, loop: loop, queue: queue)
    }

    /// Whether new calls are refused (UNAVAILABLE) because the server is shutting down.
    package var isDraining: Bool { draining.load(ordering: .acquiring) }

    /// Starts refusing new calls; false when it had started already.
    package func drain() -> Bool { !draining.exchange(true, ordering: .acquiringAndReleasing) }

    /// An upload opened or ended on a connection from `host` (any thread).
    func uploadOpened(from host: String) {
        uploadsOpen.add(1, ordering: .relaxed)
        uploadsPerPeer.withLock { $0[host, default: 0] += 1 }
    }

    func uploadEnded(from host: String) {
        uploadsOpen.subtract(1, ordering: .relaxed)
        uploadsPerPeer.withLock { uploads in
            if let count = uploads[host], count > 1 { uploads[host] = count - 1 } else { uploads[host] = nil }
        }
    }

    /// Uploads open on the connections from `host`, over every loop.
    func uploadsOpen(from host: String) -> Int { uploadsPerPeer.withLock { $0[host] ?? 0 } }
}
