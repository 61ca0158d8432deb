/// A domain failure of the classification service. The service layer maps `category` onto an RPC status;
/// this module stays free of RPC, so the category is its own small enum named after the statuses it becomes.
public struct ClassificationError: Error, Equatable, CustomStringConvertible, Sendable {
    public enum Category: String, Sendable {
        case invalidArgument, notFound, alreadyExists, failedPrecondition, resourceExhausted, cancelled, `internal`
    }

    public let category: Category
    public let message: String

    public init(_ category: Category, _ message: String) {
        self.category = category
        self.message = message
    }

    public static func invalid(_ message: String) -> ClassificationError { ClassificationError(.invalidArgument, message) }

    public var description: String { "\(category.rawValue): \(message)" }
}
