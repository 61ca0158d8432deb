/// A way for calls to reach an `RPCServer`, shaped as grpc-swift-2's `ServerTransport`: it accepts
/// connections, speaks a wire protocol on them, and hands each call to the server as an
/// `IncomingCall`. The server alone routes, runs the built-in services and counts calls; what a
/// transport decides for itself (where and when a call runs, refusals under its limits, deadlines
/// it enforces) it reports through `IncomingCall`, so every call is counted once whoever answered it.
///
/// One transport serves one listening address, whatever protocols it speaks there: TCP picks the
/// protocol from each connection's first bytes, so HTTP or TLS later join it rather than adding
/// transports (see `TCPServer`).
public protocol ServerTransport: AnyObject, Sendable {
    /// `host:port` clients reach once it listens (the real port when asked for 0).
    var address: String { get }
    /// Starts accepting and hands every call to `server`; throws when it cannot (the address is
    /// taken). Called once, by `RPCServer.serve(over:)`.
    func listen(handingCallsTo server: RPCServer) throws
    /// Graceful shutdown: stops accepting, refuses new calls with UNAVAILABLE, gives calls in flight
    /// up to `grace` to finish and be answered, then closes. Calling it again returns at once.
    func shutdown(grace: Duration) async
}

extension RPCServer {
    /// Serves this server's calls over `transport`, which listens from now on; returns it (to shut
    /// it down later). Throws what `listen` throws.
    @discardableResult
    public func serve<Transport: ServerTransport>(over transport: Transport) throws -> Transport {
        try transport.listen(handingCallsTo: self)
        return transport
    }

    // MARK: What transports report

    /// A connection was accepted, and later closed; or refused at once (connection limits).
    package func connectionOpened() { stats.connectionOpened() }
    package func connectionClosed() { stats.connectionClosed() }
    package func connectionRefused() { stats.connectionRejected() }

    /// Where GetStats finds the transport's event-loop figures.
    package func reportLoop(_ figures: @escaping @Sendable () -> LoopFigures) { stats.reportLoop(figures) }
}
