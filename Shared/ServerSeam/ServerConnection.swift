import RPC
import TCP

/// What the listener (`TCPServer`) needs of a connection it serves, whatever protocol it speaks and
/// whatever stream carries it: its socket (limits, memory budget, closing), how long it has been
/// quiet, and how to tell it to go. Seen once per sweep or accept, never per frame.
package protocol ServerConnection: AnyObject {
    /// The TCP connection underneath, which the listener accepted and counts.
    var socket: TCPConnection { get }
    /// When the last complete frame (request) arrived, and since when an unfinished one has waited.
    var lastFrameAt: ContinuousClock.Instant? { get }
    var partialFrameSince: ContinuousClock.Instant? { get }
    var openCalls: Int { get }
    /// Whether the client ever started a call here.
    var hasMadeCalls: Bool { get }
    /// Uploads (client-streaming calls) open here.
    var openUploads: Int { get }
    /// Ends the uploads that went quiet or too slow (`ServerLimits.uploadIdleTimeout`, `uploadMinimumRate`).
    func endStalledUploads(now: ContinuousClock.Instant)
    /// No longer counted against the server's connection limits (see `ConnectionHost.release`).
    var uncounted: Bool { get set }
    /// The connection's first byte says it speaks `kind`: it reads that protocol from now on, or is
    /// answered and closed when the protocol is not served here.
    func picked(_ kind: ProtocolSniffer.Kind)
    /// A connection-level error: tells the client why in its protocol, cancels every call, closes
    /// once that is written.
    func fail(_ code: StatusCode, _ message: String)
    /// The socket closed: its calls end.
    func closed(reason: String)
}

extension ServerConnection {
    /// Whether it is being closed (told why, flushing and lingering).
    package var isFailing: Bool { socket.closingSince != nil }
}

/// What a protocol's connection may ask of the server that accepted it, beyond its calls (`ConnectionCalls`): the
/// `RPCServer` its calls go to (its guard, its methods, its stats), the limits, and the connection accounting that
/// spans every connection. `TCPServer` is the one implementation; a protocol module sees only this.
package protocol ConnectionHost: AnyObject, Sendable {
    /// The server the calls go to (set once the server listens, before any connection is served).
    var rpcServer: RPCServer { get }
    var limits: ServerLimits { get }
    /// Stops counting `connection` against the connection limits: it closes, or is being closed (its loop's thread).
    func release(_ connection: any ServerConnection)
    /// A large frame of `connection`'s was refused for want of memory budget: the connection holding the most of it
    /// is closed too when it holds at least `bytes` (its loop's thread).
    func shedLargest(atLeast bytes: Int, sparing connection: any ServerConnection)
}
