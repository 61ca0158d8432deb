import Base

/// A failure of the health domain: its category (the status a caller gets) and a message for the user who sent
/// the request. The same shape as every service's domain error.
public struct HealthError: CategorizedError, Equatable, CustomStringConvertible {
    public let category: ErrorCategory
    public let message: String

    public init(_ category: ErrorCategory, _ message: String) {
        self.category = category
        self.message = message
    }

    static func invalid(_ message: String) -> HealthError { HealthError(.invalidArgument, message) }
    static func notFound(_ message: String) -> HealthError { HealthError(.notFound, message) }
}
