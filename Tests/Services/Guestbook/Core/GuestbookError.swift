import Base

/// A failure of the guestbook domain: its category (the status a caller gets) and a message for the visitor who
/// sent the request. The same shape as every service's domain error; the constructors below are its cases.
public struct GuestbookError: CategorizedError, Equatable, CustomStringConvertible {
    public let category: ErrorCategory
    public let message: String

    public init(_ category: ErrorCategory, _ message: String) {
        self.category = category
        self.message = message
    }

    /// A value outside its limits; `field` is the request field's proto name, so the caller knows which.
    public static func invalid(_ field: String, _ problem: String) -> GuestbookError {
        GuestbookError(.invalidArgument, "\(field) \(problem)")
    }

    /// No entry has this id.
    public static func unknownEntry(id: Int64) -> GuestbookError {
        GuestbookError(.notFound, "no guestbook entry with id \(id)")
    }
}
