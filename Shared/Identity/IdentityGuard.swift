import Base
import RPC
import Schema

/// What a service's guard asks of each method: the level its proto declares (`option (menagerie.rpc.v1.access)`,
/// carried in `ProtoMethodInfo.access`), except for the few methods a service serves at another level than its
/// proto says. Those are the methods of an API several services share whose level depends on the service (Jobs:
/// the zoo's jobs are its imports, which every visitor may follow; an OCR user's jobs are that user's). Keep them
/// few and say why beside them: every other method's level is read from the proto, by the server and the clients.
/// An override may open a method or move it between user and admin, never close a public one: a client sends no
/// token where the proto says public.
public struct AccessRules: Sendable {
    /// Levels that replace the proto's, by method path (`/menagerie.jobs.v1.Jobs/GetJob`).
    public var overrides: [String: MethodAccess]

    /// The proto's levels, without exception.
    public static let declared = AccessRules()

    public init(overriding overrides: [String: MethodAccess] = [:]) {
        self.overrides = overrides
    }

    public func access(for method: ProtoMethodInfo) -> MethodAccess { overrides[method.path] ?? method.access }
}

/// The RPC server's `CallGuard` over the stack's identity: takes the method's access level from its proto (through
/// the service's `AccessRules`) and, where it needs a user, checks `authorization: Bearer <token>` (a header on
/// HTTP, metadata on the binary protocol — the same for the server) with the `TokenVerifier`. A missing or refused
/// token is UNAUTHENTICATED; a valid one without the role the method needs is PERMISSION_DENIED; a failing token from a
/// client address, network or user backing off after failures (`FailedAuthThrottle`) is RESOURCE_EXHAUSTED with the
/// seconds to wait — a valid token never is.
public struct IdentityGuard: CallGuard {
    public let rules: AccessRules
    public let verifier: TokenVerifier
    public let throttle: FailedAuthThrottle

    public init(rules: AccessRules = .declared, verifier: TokenVerifier, throttle: FailedAuthThrottle) {
        self.rules = rules
        self.verifier = verifier
        self.throttle = throttle
    }

    public func admit(_ head: CallHead, to method: ProtoMethodInfo) throws(RPCError) -> Caller? {
        let access = rules.access(for: method)
        // A public method ignores credentials: a stale token never keeps anyone from reading.
        guard access != .public else { return nil }
        let token: String
        switch Self.bearer(head.metadata["authorization"]) {
        case .success(let found): token = found
        case .failure(let error): throw error
        }
        let caller: Caller
        do {
            caller = try verifier.verify(token)
        } catch {
            // A token is checked before any back-off, so a valid one is never refused for others' failures — everyone
            // behind one NAT or proxy, or a user whose old token someone keeps trying. Failures count against the
            // address, its network (so guesses spread over many addresses meet a limit too, a looser one) and the
            // user an expired or revoked token names; while any of them backs off, a failure is answered with the wait.
            let host = Self.host(of: head.peer)
            var keys = [
                ("address " + host, nil as Int?),
                ("network " + Self.network(of: host), throttle.policy.freeFailures * 4),
            ]
            if let user = error.user { keys.append(("user " + user, nil)) }
            if let wait = keys.compactMap({ throttle.backoff(for: $0.0) }).max() { throw Self.backingOff(wait) }
            for (key, free) in keys { throttle.recordFailure(key, reason: error.message, freeFailures: free) }
            throw RPCError(.unauthenticated, "\(error.message): \(head.method) needs a valid token")
        }
        throttle.recordSuccess("user " + caller.name)
        if access == .admin, !caller.isAdmin {
            throw RPCError(
                .permissionDenied,
                "\(head.method) changes data every user shares: it needs an admin token, and \(caller.name) is no admin"
            )
        }
        return caller
    }

    /// The token of an `authorization` value `Bearer <token>` (scheme case-insensitive, as RFC 6750 says).
    static func bearer(_ header: String?) -> Result<String, RPCError> {
        guard let header, !header.isEmpty else {
            return .failure(RPCError(.unauthenticated, "no token: send `authorization: Bearer <token>`"))
        }
        let parts = header.split(separator: " ", maxSplits: 1)
        guard parts.count == 2, parts[0].lowercased() == "bearer" else {
            return .failure(RPCError(.unauthenticated, "authorization is not `Bearer <token>`"))
        }
        return .success(parts[1].trimmingCharacters(in: " \t"))
    }

    /// `127.0.0.1` of `127.0.0.1:50312`, `::1` of `[::1]:50312`: failures count per address, not per connection.
    package static func host(of peer: String) -> String {
        if peer.hasPrefix("["), let end = peer.firstIndex(of: "]") {
            return String(peer[peer.index(after: peer.startIndex)..<end])
        }
        if let colon = peer.lastIndex(of: ":"), peer.firstIndex(of: ":") == colon { return String(peer[..<colon]) }
        return peer
    }

    /// The network an address belongs to for throttling: its /24 (IPv4) or /64 (IPv6), where one client's addresses,
    /// a proxy's or a NAT's clients live.
    package static func network(of host: String) -> String {
        if host.contains(":") {
            let groups = host.split(separator: ":", omittingEmptySubsequences: false)
            return groups.prefix(4).joined(separator: ":") + "::/64"
        }
        let octets = host.split(separator: ".")
        guard octets.count == 4 else { return host }
        return octets.prefix(3).joined(separator: ".") + ".0/24"
    }

    static func backingOff(_ wait: Duration) -> RPCError {
        let seconds = max(
            1, Int((Double(wait.components.seconds) + Double(wait.components.attoseconds) / 1e18).rounded(.up)))
        return RPCError(.resourceExhausted, "too many failed authentications: retry in \(seconds) s")
    }
}

extension StringProtocol {
    fileprivate func trimmingCharacters(in set: String) -> String {
        var slice = Substring(self)
        while let first = slice.first, set.contains(first) { slice.removeFirst() }
        while let last = slice.last, set.contains(last) { slice.removeLast() }
        return String(slice)
    }
}
