import RPC
import Storage

/// The one place a storage failure gets its status: a database another connection (or process) held longer
/// than the busy timeout is UNAVAILABLE, which clients retry elsewhere or later; anything else is an
/// unexpected INTERNAL error, logged and answered without its details. Here because ServiceKit is the
/// layer that sees both RPC and Storage; every service runs through it.
extension StorageError: RPCErrorConvertible {
    public var rpcError: RPCError {
        kind == .busy ? RPCError(.unavailable, "the database is busy: \(message)") : RPCError(.internalError, description)
    }
}
