import Schema

/// Who is calling, as a `CallGuard` established it from the call's credentials: what a handler asks
/// (`context.caller`) to decide whose data a call sees, instead of reading tokens itself.
public struct Caller: Sendable, Hashable, CustomStringConvertible {
    /// The user's name, unique in the stack's identity: data a user owns is recorded under it.
    public let name: String
    /// Whether the user may change the data every user shares (imports, models).
    public let isAdmin: Bool

    public init(name: String, isAdmin: Bool) {
        self.name = name
        self.isAdmin = isAdmin
    }

    public var description: String { isAdmin ? "\(name) (admin)" : name }
}

/// The seam where a server decides, before a handler runs, whether a call may run at all (an
/// interceptor, after gRPC's): it reads the call's head (metadata, peer) and the method's description (its
/// proto's `access` level) and either returns the caller (nil: anonymous, for a method everyone may call) or
/// throws an `RPCError` (UNAUTHENTICATED, PERMISSION_DENIED, RESOURCE_EXHAUSTED), which the server answers
/// without running the handler. Health, reflection and stats never pass through it, so probes work without
/// credentials.
public protocol CallGuard: Sendable {
    func admit(_ head: CallHead, to method: ProtoMethodInfo) throws(RPCError) -> Caller?
}
