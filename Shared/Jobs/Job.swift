import Base
import Foundation

/// Where a job is in its life. `queued` and `running` are active; the other three are end states that never
/// change again.
public enum JobState: String, Sendable, CaseIterable, Codable {
    case queued, running, succeeded, failed, cancelled

    public var isActive: Bool { self == .queued || self == .running }
    public var isFinished: Bool { !isActive }
}

/// What a succeeded job produced: an encoded message and its full protobuf type name. The jobs machinery
/// never looks inside; the rpc that started the job documents the type.
public struct JobResult: Sendable, Hashable {
    public var typeName: String
    public var bytes: [UInt8]

    public init(typeName: String, bytes: [UInt8]) {
        self.typeName = typeName
        self.bytes = bytes
    }
}

/// Why a job failed or was cancelled, as a call status (gRPC's numeric code and a message), so a client
/// handles a failed job as it handles a failed call.
public struct JobFailure: Error, Sendable, Hashable, CustomStringConvertible {
    public var code: UInt32
    public var message: String

    public init(code: UInt32, message: String) {
        self.code = code
        self.message = message
    }

    /// gRPC's codes that the jobs machinery itself uses (it does not depend on the RPC module).
    public static let cancelledCode: UInt32 = 1
    public static let internalCode: UInt32 = 13
    public static let unavailableCode: UInt32 = 14

    public var description: String { "status \(code): \(message)" }
}

/// An error a job's work can throw to fail with a status of its choosing (INVALID_ARGUMENT for a file that
/// cannot be read, say); any other error fails the job with what the runner's failure mapping makes of it.
public protocol JobFailureConvertible: Error {
    var jobFailure: JobFailure { get }
}

extension JobFailure: JobFailureConvertible {
    public var jobFailure: JobFailure { self }
}

/// One job as recorded in the service's database.
public struct Job: Sendable, Hashable {
    public var id: String
    /// What the job does, e.g. `zoo.import`.
    public var kind: String
    public var state: JobState
    /// 0…1.
    public var progress: Double
    public var message: String
    public var createdAt: Date
    public var startedAt: Date?
    public var finishedAt: Date?
    /// Set once the job succeeded (when its work produced a result).
    public var result: JobResult?
    /// Set once the job failed or was cancelled.
    public var failure: JobFailure?
    /// Whether someone asked to cancel it.
    public var cancelRequested: Bool
    /// The runner (one per process) that owns the job: see `JobOwner`.
    public var owner: String
    /// The user who started it (nil: a call without a user, or a job from before users): only they and admins
    /// see it, as its result may be their data (an OCR batch's text).
    public var startedBy: String?

    public init(
        id: String, kind: String, state: JobState = .queued, progress: Double = 0, message: String = "",
        createdAt: Date = Date(), startedAt: Date? = nil, finishedAt: Date? = nil, result: JobResult? = nil,
        failure: JobFailure? = nil, cancelRequested: Bool = false, owner: String, startedBy: String? = nil
    ) {
        self.startedBy = startedBy
        self.id = id
        self.kind = kind
        self.state = state
        self.progress = progress
        self.message = message
        self.createdAt = createdAt
        self.startedAt = startedAt
        self.finishedAt = finishedAt
        self.result = result
        self.failure = failure
        self.cancelRequested = cancelRequested
        self.owner = owner
    }
}

/// How a job ended.
public enum JobOutcome: Sendable, Hashable {
    case succeeded(JobResult?)
    case failed(JobFailure)
    case cancelled(JobFailure)

    public var state: JobState {
        switch self {
        case .succeeded: .succeeded
        case .failed: .failed
        case .cancelled: .cancelled
        }
    }

    public var result: JobResult? {
        if case .succeeded(let result) = self { result } else { nil }
    }

    public var failure: JobFailure? {
        switch self {
        case .succeeded: nil
        case .failed(let failure), .cancelled(let failure): failure
        }
    }
}

/// Thrown for a job id the service does not know (not found).
public struct JobNotFound: CategorizedError, CustomStringConvertible {
    public let id: String
    public init(id: String) { self.id = id }
    public var category: ErrorCategory { .notFound }
    public var message: String { "no job with id \(id)" }
    public var description: String { message }
}
