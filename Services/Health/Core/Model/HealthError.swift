/// Domain errors of the health core. `code` is a status-like category the service layer maps one-to-one
/// onto RPC status codes; the core never imports RPC, so it cannot name them itself.
public struct HealthError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Coarse category, spelled like the RPC status it becomes.
    public enum Code: String, Sendable, Equatable {
        case notFound = "NOT_FOUND"
        case invalidArgument = "INVALID_ARGUMENT"
        case unauthenticated = "UNAUTHENTICATED"
        case alreadyExists = "ALREADY_EXISTS"
        case resourceExhausted = "RESOURCE_EXHAUSTED"
        case failedPrecondition = "FAILED_PRECONDITION"
    }

    public var code: Code
    public var message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "\(code.rawValue): \(message)" }

    static func invalid(_ message: String) -> HealthError { HealthError(.invalidArgument, message) }
    static func notFound(_ message: String) -> HealthError { HealthError(.notFound, message) }
}
