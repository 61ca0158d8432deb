/// One way of reaching one server endpoint: a TCP connection, or a server in the same process.
public protocol ClientTransport: Sendable {
    /// `host:port`, or a name for in-process servers; used in errors and logs.
    var endpoint: String { get }
    /// False while the transport is backing off after failing to connect; the client then prefers
    /// other endpoints.
    var isAvailable: Bool { get }
    /// Makes a unary call and returns the response bytes, or throws `RPCError` (or `ConnectFailure`
    /// when the request never left this process).
    func unary(_ head: CallHead, request: [UInt8]) async throws -> [UInt8]
    /// Opens a streaming call. With `request`, that is the call's only request, sent as it opens
    /// (server streaming); without, requests follow through the call's `send` and `closeRequests`
    /// (client and bidirectional streaming).
    func stream(_ head: CallHead, request: [UInt8]?) -> any ClientCall
    /// Closes connections; calls still open fail with UNAVAILABLE.
    func close()
}

/// A call that failed before its request was sent (no connection could be made), so it is safe to
/// try again elsewhere whatever the method does.
public struct ConnectFailure: Error, CustomStringConvertible {
    public var endpoint: String
    public var reason: String

    public init(endpoint: String, reason: String) {
        self.endpoint = endpoint
        self.reason = reason
    }

    public var description: String { "cannot connect to \(endpoint): \(reason)" }
}
