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
    /// Makes a server-streaming call; the stream yields response bytes and ends with the status.
    func serverStreaming(_ head: CallHead, request: [UInt8]) -> AsyncThrowingStream<[UInt8], any Error>
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
