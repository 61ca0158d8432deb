import Base

/// What went wrong talking to a dqlite cluster, sorted by what the caller can do about it.
///
/// The split that matters is `notCommitted` against `outcomeUnknown`: a write that failed before its COMMIT
/// reached the leader never happened and may be retried, while one whose COMMIT was sent and never answered
/// may or may not be in the database. The client never repeats the latter by itself; the caller must look.
public struct DqliteError: Error, Sendable, Hashable, CustomStringConvertible {
    public enum Kind: Sendable, Hashable {
        /// No node of the cluster could be reached, or none knows a leader (an election, no quorum).
        case noLeader
        /// The node stopped being the leader, or the connection broke, before the work was committed: nothing
        /// was written, and the work may be retried on the new leader.
        case notCommitted
        /// The connection or the leadership was lost after a COMMIT (or a write outside a transaction) was sent
        /// and before it was answered: the write may or may not be in the database.
        case outcomeUnknown
        /// SQLite refused the statement on the leader (a syntax error, a constraint); `code` is SQLite's.
        case sqlite
        /// The node answered something this client cannot read (a bug on one side, or not dqlite at all).
        case protocolViolation
        /// The node itself could not be created, started or stopped.
        case node
        /// The API was used wrongly (too many parameters, a bad address).
        case misuse
    }

    public var kind: Kind
    /// SQLite's (extended) result code for `.sqlite` and leadership failures, else 0.
    public var code: UInt64
    public var message: String

    public init(_ kind: Kind, code: UInt64 = 0, _ message: String) {
        self.kind = kind
        self.code = code
        self.message = message
    }

    public var description: String {
        "DqliteError.\(kind)\(code == 0 ? "" : " (code \(code))"): \(message)"
    }

    /// SQLite's extended codes with which dqlite reports that this node is not (or no longer) the leader; 1.11
    /// still answers the legacy ones (32 and 33 in the high byte), newer versions 40 and 41.
    static let leadershipCodes: Set<UInt64> = [10 | (32 << 8), 10 | (33 << 8), 10 | (40 << 8), 10 | (41 << 8)]
}

/// A cluster without a leader, or work that did not commit, is UNAVAILABLE: retrying later is expected to work.
/// A write whose outcome is unknown is DEADLINE_EXCEEDED, gRPC's status for "may have completed": the caller
/// must check before repeating it. A constraint violation is FAILED_PRECONDITION, anything else INTERNAL.
extension DqliteError: CategorizedError {
    public var category: ErrorCategory {
        switch kind {
        case .noLeader, .notCommitted: .unavailable
        case .outcomeUnknown: .deadlineExceeded
        case .sqlite where code & 0xFF == 19: .failedPrecondition  // SQLITE_CONSTRAINT
        case .sqlite, .protocolViolation, .node, .misuse: .internal
        }
    }
}
