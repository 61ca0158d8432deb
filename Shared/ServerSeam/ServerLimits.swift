import Foundation
import RPC

/// Limits that protect a server from clients that misbehave or are simply too many (`TCPServer.Limits`): one value,
/// given to the server and read by each layer that enforces its part — the listener (connections), the protocols
/// (frame and message sizes), the server core (calls, uploads, workers).
public struct ServerLimits: Sendable {
    /// Largest frame a client may send (`FrameCodec.defaultMaxFrameSize`, held equal by a test); a larger one gets
    /// RESOURCE_EXHAUSTED, then the connection closes.
    public var maxFrameSize = 16 << 20
    /// Largest request message of a client-streaming call, joined from MESSAGE frames; a larger
    /// one ends its call with RESOURCE_EXHAUSTED.
    public var maxMessageSize = FlowControl.defaultMaxMessageSize
    /// Connections served at once. A connection beyond it (or beyond `maxConnectionsPerPeer`)
    /// takes the place of the connection with no open call that has been quiet longest (told
    /// UNAVAILABLE); when every connection has a call open it is refused with RESOURCE_EXHAUSTED.
    public var maxConnections = 1024
    /// Connections from one client address served at once (see `maxConnections`).
    public var maxConnectionsPerPeer = 256
    /// Calls one connection may have open at once, as gRPC's MAX_CONCURRENT_STREAMS; a call
    /// beyond it is answered RESOURCE_EXHAUSTED under its own id.
    public var maxConcurrentCalls = 100
    /// Bytes of large frames still arriving plus answers not yet taken by their clients, over all
    /// connections; see `MemoryBudget`.
    public var memoryBudget = 256 << 20
    /// Handlers that run at once on the worker pool (those waiting for something do not count);
    /// more calls wait in its queue.
    public var workers = ProcessInfo.processInfo.activeProcessorCount
    /// Event loops doing socket I/O, connections spread over them (see `TCPServer`). One here, as
    /// before loops were several; the services' `--loops` defaults to one per core.
    public var loops = 1
    /// Answer batching of the worker pool (see `WorkerPool`); only tests change these.
    package var quickCall: Duration = .microseconds(50)
    package var answerBatchingWindow: Duration = .microseconds(100)
    /// Calls whose method has held a worker this long count as long: together they take at most
    /// `workers - 1` workers, so quick calls always find one (see `WorkerPool`).
    package var longCall: Duration = .milliseconds(5)
    /// A connection with no open call and no frame either way for this long is closed.
    public var idleTimeout: Duration = .seconds(300)
    /// A connection must complete its first frame, and any frame it started, within this time.
    public var frameTimeout: Duration = .seconds(10)
    /// Unwritten response bytes per connection above which the server stops reading from it
    /// and streaming handlers wait.
    public var writeHighWater = 4 << 20
    /// An upload (a client-streaming call) with no request message for this long ends
    /// DEADLINE_EXCEEDED and what it sent is discarded.
    public var uploadIdleTimeout: Duration = .seconds(30)
    /// Bytes per second an upload must average over each `uploadRateWindow` (slowloris for
    /// streams: a message of one byte every ten seconds is never idle for long).
    public var uploadMinimumRate = 1024
    public var uploadRateWindow: Duration = .seconds(60)
    /// Uploads open at once, over all connections and from one client address; past them an
    /// upload is refused RESOURCE_EXHAUSTED (other calls are not).
    public var maxUploads = 256
    public var maxUploadsPerPeer = 64
    /// Past the connection limit with no idle connection, a newcomer takes the place of the busy
    /// connection that has sent nothing for longest, if that is at least this long.
    public var reclaimAfterQuiet: Duration = .seconds(2)

    public init() {}
}
