import Foundation
import RPC
import WorkLane

/// The lane for blocking and CPU-bound work of a service: a `ThreadPool` sized to the cores with a bounded
/// queue, whose failures handlers can let through as statuses.
///
/// A handler runs on one of the server's workers (one per core) until it first suspends. One that parses a
/// large file or recognises a page for seconds holds its worker, and calls behind it (health checks too)
/// wait. `try await lane.run { … }` moves that work to the lane's threads and suspends the handler, so the
/// worker serves other calls meanwhile; when more work waits than the queue holds, the call is refused at
/// once with RESOURCE_EXHAUSTED instead of queueing without bound. Jobs (`JobRunner`) run on `pool`.
public struct HeavyWorkLane: Sendable {
    public let pool: ThreadPool

    public init(threads: Int = ProcessInfo.processInfo.activeProcessorCount, queueLimit: Int = 64) {
        pool = ThreadPool(name: "lane", threads: threads, queueLimit: queueLimit)
    }

    /// Runs `work` on a lane thread (see `ThreadPool.run`). A full queue throws RESOURCE_EXHAUSTED, a lane
    /// that shut down UNAVAILABLE, a call cancelled while its work waited CANCELLED.
    @discardableResult
    public func run<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        try await pool.run(work)
    }
}

/// A full lane refuses work: the caller may try again later or elsewhere.
extension ThreadPool.QueueFull: RPCErrorConvertible {
    public var rpcError: RPCError { RPCError(.resourceExhausted, description) }
}

/// A lane that shut down (the service is stopping).
extension ThreadPool.ShutDown: RPCErrorConvertible {
    public var rpcError: RPCError { RPCError(.unavailable, description) }
}
