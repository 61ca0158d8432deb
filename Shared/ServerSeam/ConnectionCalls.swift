import RPC
import TCP

/// How one wire protocol writes what the calls of a connection answer: the encoding half of a
/// protocol on the server (its decoding half drives the connection's `ConnectionCalls`). A value, stored in the
/// server core's table, which knows no protocol: answering a call makes one dynamic call into it. Any thread.
package protocol CallWire: Sendable {
    associatedtype Stream: ByteStream
    /// The stream the calls' answers are written to.
    var stream: Stream { get }
    /// Call `id` is over: its status, with its only response (`message`) when it answers with one
    /// (unary and client-streaming calls), or its error.
    func writeStatus(_ id: UInt64, message: [UInt8]?, error: RPCError?)
    /// One response message of streaming call `id`, or a chunk of one (`continues`: more follow).
    func writeMessage(_ id: UInt64, _ chunk: [UInt8], continues: Bool)
    /// The handler of client-streaming call `id` read `bytes` of requests: the client may send as
    /// many more (a protocol without flow control of its own writes nothing).
    func writeRequestCredit(_ id: UInt64, bytes: Int)
    /// Whether the client grants credit for responses (our frames' WINDOW_UPDATE); without it a
    /// stream's credit is renewed as each message is written, and the socket's back-pressure alone
    /// paces it (`waitUntilWritable`).
    var clientGrantsResponseCredit: Bool { get }
}

extension CallWire {
    package var clientGrantsResponseCredit: Bool { true }
}

/// The seam between a wire protocol and the server core, per connection, shaped as grpc-swift-2's
/// `ServerTransport.listen(streamHandler:)`: a protocol's reader decodes its bytes into calls and hands each to the
/// server through this (`open`, then its requests, credit and cancellation), and the core serves them — admission,
/// the guard, deadlines, workers, flow control, stats — answering through the protocol's `CallWire`. The server
/// core's `ServerCallTable` is the implementation; a protocol module names only this protocol, so it links no server
/// internals, and the core links no protocol.
///
/// Protocol connections are generic over their calls (never `any ConnectionCalls`), and the table is one concrete
/// class, compiled whole in its module: the seam costs a frame a witness call, not generic code run unspecialised
/// across modules. Loop thread, except `run`, `jobEnded` and the sending side.
package protocol ConnectionCalls: AnyObject, Sendable {
    /// Calls open (or being answered), uploads among them, and whether the client ever started one.
    var openCalls: Int { get }
    var openUploads: Int { get }
    var hasMadeCalls: Bool { get }

    /// The client opened call `id`: it is served (or answered at once when it may not run). `clientStreams`: its
    /// requests come as messages (`receiveMessage`), else `payload` is its only one. `decoder`: the requests are as
    /// the door received them (compressed, JSON), decoded on a worker once the guard admitted the call.
    func open(_ id: UInt64, _ head: CallHead, clientStreams: Bool, payload: [UInt8], decoder: RequestDecoder?)
        -> CallOpening
    /// Answers call `id`, which is not opened, with `error` at once; the server counts it.
    func refuse(_ id: UInt64, _ head: CallHead, _ error: RPCError)
    /// Hands the calls opened since the last time to the workers: a reader calls it when it decoded one read.
    func startQueued()
    /// A request message (or a chunk of one, `continues`) of call `id`.
    func receiveMessage(_ id: UInt64, _ chunk: [UInt8], continues: Bool)
    /// The client sent call `id`'s last request.
    func endRequests(_ id: UInt64)
    /// The client read `bytes` of call `id`'s responses: its handler may send as many more.
    func grantResponseCredit(_ id: UInt64, bytes: Int)
    /// The client cancelled call `id`; false when no call `id` is open.
    @discardableResult
    func cancel(_ id: UInt64) -> Bool
    /// Ends open call `id` from the server's side with `error` (answered now, its handler cancelled).
    func end(_ id: UInt64, error: RPCError)
    /// Cancels every open call (the connection is failing): none is answered.
    func cancelAll()
    /// Ends the uploads that went quiet or too slow (`ServerLimits.uploadIdleTimeout`, `uploadMinimumRate`).
    func endStalledUploads(now: ContinuousClock.Instant)
    /// The connection closed: its calls end.
    func closed(reason: String)
    /// Runs `job` on the workers in this connection's turn, as its calls are (an HTTP route), counted in flight
    /// until it reports `jobEnded()`, so a draining server waits for it. Any thread.
    func run(_ job: any WorkerJob)
    func jobEnded()
}

extension ConnectionCalls {
    /// Opens a call whose requests need no decoding.
    package func open(_ id: UInt64, _ head: CallHead, clientStreams: Bool, payload: [UInt8]) -> CallOpening {
        open(id, head, clientStreams: clientStreams, payload: payload, decoder: nil)
    }
}

/// What became of a call the client opened.
package enum CallOpening {
    /// Started, or answered at once (refused: the server drains, too many calls are open).
    case opened
    /// Its id names an open call: the protocol decides (ours fails the connection, as HTTP/2
    /// does a reused stream id). The earlier call is left as it was.
    case idInUse
}

/// Work for the server's workers: runs on one, must not block for long before its first suspension.
package protocol WorkerJob: AnyObject, Sendable {
    /// Runs the job; false when it found nothing to do (a call cancelled while it waited), which
    /// then does not count as a measure of its kind.
    func run() -> Bool
    /// How long jobs of this kind (a call's method) have held a worker, measured by the pool; nil
    /// for work never measured (taken as quick).
    var workerTime: WorkerTime? { get }
}
