/// Which calls a server's HTTP face may answer again from the bytes it sent before, without running the handler:
/// methods without side effects, and REST routes (`HTTPBinding`, by their name `GET /api/animals`), whose answer
/// depends on nothing but the request and the service's data — not on the caller, the clock or chance — keyed by
/// that data's version. A search of the zoo's catalogue is one: the same query on the same snapshot gives the same
/// bytes, and sending them again costs no task, no search and no transcoding to JSON (what FastAPI is given in
/// `menagerie-bench http`). One cache serves both: a Connect call's answer and a route's are kept alike.
///
/// Calls still pass the server's `CallGuard` before a kept answer is sent, and count in the method's stats (and in
/// its `kept`).
public struct AnswerCachePolicy: Sendable {
    /// The methods' paths (`/package.Service/Method`) and the routes' names (`GET /api/animals`); a method with side
    /// effects is never answered from the cache.
    public let methods: Set<String>
    /// The version of the data the answers are made from, or nil when it is not known now without the check a
    /// handler makes (the call then runs, and its answer is not kept). Called on a loop thread for every call of
    /// `methods`: it must not block.
    public let version: @Sendable () -> Int64?
    /// The version after making the check a handler makes (it may read storage): asked on a worker, after the
    /// guard, for a route whose `version` was nil on the loop, so that the one request of each recheck is answered
    /// from the cache too when the data did not change, rather than rebuilding a large answer. Nil: no such check.
    public let checkedVersion: (@Sendable () throws -> Int64?)?
    /// Bytes of answers kept at most; when full, the cache starts over.
    public let maxBytes: Int

    public init(
        methods: [String], maxBytes: Int = 16 << 20, version: @escaping @Sendable () -> Int64?,
        checkedVersion: (@Sendable () throws -> Int64?)? = nil
    ) {
        self.methods = Set(methods)
        self.maxBytes = maxBytes
        self.version = version
        self.checkedVersion = checkedVersion
    }
}
