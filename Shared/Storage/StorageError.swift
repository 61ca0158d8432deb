import Base
import CSQLite

/// An error from the storage layer, with SQLite's extended result code and message when SQLite raised it.
public struct StorageError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What went wrong, coarse enough to act on.
    public enum Kind: Sendable, Hashable {
        /// The database file could not be opened or configured.
        case open
        /// A statement failed to compile.
        case prepare
        /// A statement failed while running.
        case step
        /// Another connection (maybe in another process) held the lock longer than the busy timeout.
        case busy
        /// A UNIQUE, NOT NULL, CHECK, PRIMARY KEY or FOREIGN KEY constraint was violated.
        case constraint
        /// The file is corrupt or not an SQLite database.
        case corrupt
        /// A migration failed, or the database's schema is newer than this program knows.
        case migration
        /// The storage API was used incorrectly (nested access, wrong argument count, escaped connection…).
        case misuse
        /// A column value could not be decoded as the requested Swift type.
        case typeMismatch
        /// A replicated database (dqlite) has no reachable leader now, or lost it in the middle of a transaction:
        /// nothing was written, and the work may be retried once a leader is elected.
        case unavailable
        /// A replicated database lost its leader after a commit was sent and before it was answered: the write
        /// may or may not have happened. Never repeated by the storage layer; the caller must check first.
        case outcomeUnknown
    }

    public var kind: Kind
    /// SQLite's extended result code (e.g. 2067 for `SQLITE_CONSTRAINT_UNIQUE`), or 0 when SQLite was not involved.
    public var code: Int32
    /// SQLite's message, or the storage layer's own.
    public var message: String
    /// The statement involved, when there is one.
    public var sql: String?

    public init(_ kind: Kind, code: Int32 = 0, message: String, sql: String? = nil) {
        self.kind = kind
        self.code = code
        self.message = message
        self.sql = sql
    }

    public var description: String {
        var text = "StorageError.\(kind)"
        if code != 0 { text += " (SQLite code \(code))" }
        text += ": \(message)"
        if let sql { text += " [SQL: \(sql)]" }
        return text
    }
}

/// A database another connection (or process) held longer than the busy timeout, or a replicated one without a
/// leader, is UNAVAILABLE, which clients retry elsewhere or later; a write whose outcome is unknown is
/// DEADLINE_EXCEEDED, gRPC's status for "may have completed"; anything else is an unexpected internal error,
/// logged and answered without its details (SQL, paths).
extension StorageError: CategorizedError {
    public var category: ErrorCategory {
        switch kind {
        case .busy, .unavailable: .unavailable
        case .outcomeUnknown: .deadlineExceeded
        default: .internal
        }
    }
}

extension StorageError {
    /// An error SQLite reported with `code`; `context` is the kind used when the code itself is not telling.
    init(sqliteCode code: Int32, message: String, sql: String?, context: Kind) {
        let kind: Kind =
            switch code & 0xFF {
            case SQLITE_BUSY, SQLITE_LOCKED: .busy
            case SQLITE_CONSTRAINT: .constraint
            case SQLITE_CORRUPT, SQLITE_NOTADB: .corrupt
            case SQLITE_MISUSE: .misuse
            default: context
            }
        self.init(kind, code: code, message: message, sql: sql)
    }
}
