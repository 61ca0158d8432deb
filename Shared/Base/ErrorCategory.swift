/// What kind of failure an error is, in the vocabulary of gRPC's status codes (without OK), so that a
/// domain or a library says what went wrong without knowing how it is answered: the RPC layer maps each
/// category to its status in one place, and a core, the storage layer and the work lane never import RPC.
///
/// Pick the most specific category that tells the caller what to do next. The raw value is gRPC's name
/// of the status it becomes, for logs and descriptions.
public enum ErrorCategory: String, Sendable, Hashable, CaseIterable, CustomStringConvertible {
    /// The request is wrong whatever the system's state (a malformed id, a negative radius, bytes that are no
    /// image). Retrying the same request cannot help.
    case invalidArgument = "INVALID_ARGUMENT"
    /// The thing the request names does not exist (an animal id, a template, a job).
    case notFound = "NOT_FOUND"
    /// The thing the request would create exists already (a template or user of that name).
    case alreadyExists = "ALREADY_EXISTS"
    /// The request is valid but the system is not in the state it needs, and will not get there by retrying
    /// (an animal without a map location to route to, a model that is not trained yet). The caller must
    /// change something first.
    case failedPrecondition = "FAILED_PRECONDITION"
    /// A value lies outside the range that exists now (a point off the zoo's map, a page past the end); unlike
    /// `invalidArgument` it might be valid once the system changes.
    case outOfRange = "OUT_OF_RANGE"
    /// The caller is known but not allowed to do this.
    case permissionDenied = "PERMISSION_DENIED"
    /// The caller is not known: a missing, unknown or expired credential.
    case unauthenticated = "UNAUTHENTICATED"
    /// A limit was reached: a full work queue, an upload larger than allowed, a quota. Retry later, or with less.
    case resourceExhausted = "RESOURCE_EXHAUSTED"
    /// A transient condition (a busy database, a service shutting down): retrying later or elsewhere, with
    /// backoff, is expected to succeed.
    case unavailable = "UNAVAILABLE"
    /// The time the caller allowed ran out before the work finished.
    case deadlineExceeded = "DEADLINE_EXCEEDED"
    /// A concurrent change got in the way (a conflicting transaction, a sequence check); retry the whole
    /// read-modify-write.
    case aborted = "ABORTED"
    /// The work was cancelled, usually because the caller asked to.
    case cancelled = "CANCELLED"
    /// The operation is not implemented or not supported here.
    case unimplemented = "UNIMPLEMENTED"
    /// An invariant broke: a bug, a failing library, a corrupt file. Its message is for the operator's log and
    /// is never answered (see `exposesMessage`).
    case `internal` = "INTERNAL"
    /// Data was lost or corrupted beyond repair; the message says what was lost, not how.
    case dataLoss = "DATA_LOSS"
    /// A failure nobody classified (an error from elsewhere without a category). Like `internal`, its message
    /// is logged, not answered.
    case unknown = "UNKNOWN"

    /// Whether a caller is told the error's message. `internal` and `unknown` errors describe the server's
    /// insides (SQL, paths, library messages): those are logged, and the caller gets a generic message.
    public var exposesMessage: Bool { self != .internal && self != .unknown }

    public var description: String { rawValue }
}

/// An error that knows its category and what to tell the caller: every domain, storage and lane error adopts
/// it, so one mapping (in RPC) answers each with its status and handlers never catch to translate.
///
/// A service's domain errors share one shape, a struct of `category` and `message`
/// (`ZooError(.notFound, "no animal with id 12")`), with static constructors for the common cases.
public protocol CategorizedError: Error, Sendable {
    var category: ErrorCategory { get }
    /// A sentence for the person who sent the request. Logged rather than answered when the category does not
    /// expose messages (`internal`, `unknown`).
    var message: String { get }
}

extension CategorizedError {
    /// `CATEGORY: message`, for logs and test failures.
    public var description: String { "\(category.rawValue): \(message)" }
}
