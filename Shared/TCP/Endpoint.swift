import RPC

/// `HOST:PORT` as flags, `MENAGERIE_ENDPOINTS` and compose's state spell an instance: a numeric IPv4 or IPv6
/// address (`[::1]:7100`, brackets optional) or `localhost`, and a port 0-65535. The one parser of endpoints
/// (TCP client transports, the raw echo client, the gateway's `--endpoint`).
public struct Endpoint: Sendable, Hashable, CustomStringConvertible {
    /// The address without IPv6 brackets.
    public let host: String
    public let port: Int

    /// Parses `text`; INVALID_ARGUMENT naming it when it is not an endpoint.
    public init(parsing text: String) throws {
        guard let colon = text.lastIndex(of: ":"), let port = Int(text[text.index(after: colon)...]) else {
            throw Self.invalid(text)
        }
        var host = Substring(text[..<colon])
        if host.hasPrefix("["), host.hasSuffix("]") { host = host.dropFirst().dropLast() }
        guard SocketAddress(host: String(host), port: port) != nil else { throw Self.invalid(text) }
        self.host = String(host)
        self.port = port
    }

    /// The socket address; it parsed when the endpoint did.
    package var socketAddress: SocketAddress { SocketAddress(host: host, port: port)! }

    /// Whether the address is this host's loopback (`127.0.0.0/8`, `::1`, `localhost`): what goes there never leaves the host.
    public var isLoopback: Bool {
        let lowered = host.lowercased()
        if lowered == "localhost" || lowered == "::1" { return true }
        let v4 = lowered.hasPrefix("::ffff:") ? String(lowered.dropFirst(7)) : lowered
        let octets = v4.split(separator: ".")
        return octets.count == 4 && octets.first == "127" && octets.allSatisfy { UInt8($0) != nil }
    }

    public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }

    private static func invalid(_ text: String) -> RPCError {
        RPCError(
            .invalidArgument,
            "endpoint \(text) is not HOST:PORT with a numeric address (or localhost) and a port 0-65535")
    }
}
