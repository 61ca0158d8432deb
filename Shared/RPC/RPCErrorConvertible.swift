/// An error that knows the status a call ending with it answers with: a domain error conforms (in the
/// service layer, when its core must not know RPC) instead of every handler wrapping its body in a mapping.
/// `RPCServer` answers with `rpcError`; one answering INTERNAL is logged in full and answered without its
/// details, as any other unexpected error.
public protocol RPCErrorConvertible: Error {
    /// The status code and message the caller sees.
    var rpcError: RPCError { get }
}
