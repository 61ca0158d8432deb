import Base

/// The one place an error's category becomes a status: a core, storage or lane error says what went wrong
/// (`CategorizedError`) and the RPC layer alone knows how that is answered.
extension StatusCode {
    /// The status a call failing with an error of `category` answers with.
    public init(_ category: ErrorCategory) {
        self =
            switch category {
            case .invalidArgument: .invalidArgument
            case .notFound: .notFound
            case .alreadyExists: .alreadyExists
            case .failedPrecondition: .failedPrecondition
            case .outOfRange: .outOfRange
            case .permissionDenied: .permissionDenied
            case .unauthenticated: .unauthenticated
            case .resourceExhausted: .resourceExhausted
            case .unavailable: .unavailable
            case .deadlineExceeded: .deadlineExceeded
            case .aborted: .aborted
            case .cancelled: .cancelled
            case .unimplemented: .unimplemented
            case .internal: .internalError
            case .dataLoss: .dataLoss
            case .unknown: .unknown
            }
    }
}

extension RPCError {
    /// The status a caller may be told for `error`: an `RPCError` itself, a `CategorizedError` its category's
    /// status with its message. Nil for anything else and for categories whose messages are not answered
    /// (`internal`, `unknown`): their details belong in the log, and the caller gets a generic INTERNAL.
    public init?(answering error: any Error) {
        switch error {
        case let error as RPCError:
            self = error
        case let error as any CategorizedError where error.category.exposesMessage:
            self.init(StatusCode(error.category), error.message)
        default:
            return nil
        }
    }
}
