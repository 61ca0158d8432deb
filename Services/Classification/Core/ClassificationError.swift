import Base

/// A failure of the classification domain: its category (the status a caller gets) and a message for the user who
/// sent the request. The same shape as every service's domain error.
public struct ClassificationError: CategorizedError, Equatable, CustomStringConvertible {
    public let category: ErrorCategory
    public let message: String

    public init(_ category: ErrorCategory, _ message: String) {
        self.category = category
        self.message = message
    }

    public static func invalid(_ message: String) -> ClassificationError {
        ClassificationError(.invalidArgument, message)
    }
}
