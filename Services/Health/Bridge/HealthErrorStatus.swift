import HealthCore
import RPC

extension HealthError: RPCErrorConvertible {
    /// The status a call ending with this error answers with.
    public var rpcError: RPCError {
        let status: StatusCode =
            switch code {
            case .notFound: .notFound
            case .invalidArgument: .invalidArgument
            case .unauthenticated: .unauthenticated
            case .alreadyExists: .alreadyExists
            case .resourceExhausted: .resourceExhausted
            case .failedPrecondition: .failedPrecondition
            }
        return RPCError(status, message)
    }
}
