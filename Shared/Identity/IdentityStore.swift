import Base
import Foundation
import Storage
import Synchronization
import TLS

/// The stack's users and their tokens, in one SQLite file every replica of every service opens (compose
/// keeps it in its state, `identity.sqlite`): a shared user table, so any replica checks a token without
/// calling another service, and a revocation written by one process is seen by all at their next refresh.
///
/// Only SHA-256 hashes of tokens are stored (as health always did), so the file leaks no credential.
/// Users are never deleted — `revokeUser` revokes them — so a name always means the same person to the data
/// recorded under it (OCR templates, classification datasets).
public final class IdentityStore: Sendable {
    public let database: Database
    /// Counts this process's writes, so a verifier over this store sees them on its next check without waiting
    /// for its interval (a token revoked through this replica is refused by it at once).
    let localWrites = Atomic<Int>(0)
    /// The name of the stack's administrator, whose token compose creates (`MENAGERIE_ADMIN_TOKEN`); data made
    /// before owners existed belongs to it.
    public static let adminName = "admin"

    /// A user as `users()` lists it.
    public struct User: Sendable, Hashable {
        public let name: String
        public let isAdmin: Bool
        public let isRevoked: Bool
        public let createdMs: Int64
        /// Tokens neither revoked nor expired.
        public let liveTokens: Int
    }

    /// One live token as a verifier keeps it in memory.
    public struct TokenEntry: Sendable, Hashable {
        public let user: String
        public let isAdmin: Bool
        /// Milliseconds since 1970 after which the token is refused; nil = never expires.
        public let expiresMs: Int64?
        /// Revoked (itself or its user): kept so the refusal can say so and count against the user.
        public let isRevoked: Bool
    }

    static let migrations = [
        Migration(1, "users and tokens") { db in
            try db.executeScript(
                """
                CREATE TABLE users (
                    id INTEGER PRIMARY KEY,
                    name TEXT NOT NULL UNIQUE,
                    admin INTEGER NOT NULL DEFAULT 0,
                    created_ms INTEGER NOT NULL,
                    revoked_ms INTEGER);
                CREATE TABLE tokens (
                    hash BLOB PRIMARY KEY,
                    user_id INTEGER NOT NULL REFERENCES users (id),
                    created_ms INTEGER NOT NULL,
                    expires_ms INTEGER,
                    revoked_ms INTEGER);
                CREATE INDEX tokens_by_user ON tokens (user_id);
                """)
        },
        // Every change to a token or a user takes the next number of `changes`, so a verifier reads what changed
        // since it last looked rather than the whole table: with 26,000 users, re-reading it after every sign-up held
        // other replicas' authenticated calls for hundreds of milliseconds (issue 38).
        Migration(2, "change numbers") { db in
            try db.executeScript(
                """
                CREATE TABLE changes (id INTEGER PRIMARY KEY CHECK (id = 1), seq INTEGER NOT NULL);
                INSERT INTO changes (id, seq) VALUES (1, 0);
                ALTER TABLE tokens ADD COLUMN seq INTEGER NOT NULL DEFAULT 0;
                ALTER TABLE users ADD COLUMN seq INTEGER NOT NULL DEFAULT 0;
                CREATE INDEX tokens_by_seq ON tokens (seq);
                CREATE INDEX users_by_seq ON users (seq);
                CREATE TRIGGER token_added AFTER INSERT ON tokens BEGIN
                    UPDATE changes SET seq = seq + 1;
                    UPDATE tokens SET seq = (SELECT seq FROM changes) WHERE hash = NEW.hash;
                END;
                CREATE TRIGGER token_changed AFTER UPDATE OF user_id, expires_ms, revoked_ms ON tokens BEGIN
                    UPDATE changes SET seq = seq + 1;
                    UPDATE tokens SET seq = (SELECT seq FROM changes) WHERE hash = NEW.hash;
                END;
                CREATE TRIGGER user_changed AFTER UPDATE OF name, admin, revoked_ms ON users BEGIN
                    UPDATE changes SET seq = seq + 1;
                    UPDATE users SET seq = (SELECT seq FROM changes) WHERE id = NEW.id;
                END;
                """)
        },
        // What each name looks like (`skeleton`), so a new user cannot take a look-alike of an existing one.
        Migration(3, "name skeletons") { db in
            try db.execute("ALTER TABLE users ADD COLUMN skeleton TEXT")
            try db.execute("CREATE INDEX users_by_skeleton ON users (skeleton)")
            for row in try db.query("SELECT id, name FROM users") {
                try db.execute(
                    "UPDATE users SET skeleton = ? WHERE id = ?", [skeleton(row.string(1) ?? ""), row.int64(0) ?? 0])
            }
        },
    ]

    public init(path: String) throws {
        database = try Database(path: path, migrations: Self.migrations, readers: 1)
    }

    init(database: Database) { self.database = database }

    /// A private store: in memory, or on the database `databases` opens (tests pass the backend they run on).
    public static func inMemory(using databases: DatabaseFactory = .inMemory) throws -> IdentityStore {
        IdentityStore(database: try databases.open(migrations: migrations))
    }

    // MARK: Users

    /// Creates a user and its first token (returned: it is stored only as a hash, so this is the one time it
    /// is seen). ALREADY_EXISTS for a taken name, INVALID_ARGUMENT for a bad one.
    public func createUser(name: String, admin: Bool = false, expiresMs: Int64? = nil) throws -> String {
        // One spelling per name: "é" typed precomposed or as "e" and an accent is the same user.
        let name = name.precomposedStringWithCanonicalMapping
        try Self.validate(name: name)
        let skeleton = Self.skeleton(name)
        return try write { db in
            guard try db.queryOne("SELECT 1 FROM users WHERE name = ?", [name]) == nil else {
                throw IdentityError(.alreadyExists, "user \"\(name)\" already exists")
            }
            if let twin = try db.queryOne("SELECT name FROM users WHERE skeleton = ?", [skeleton])?.string(0) {
                throw IdentityError(
                    .alreadyExists,
                    "user \"\(name)\" looks like the existing user \"\(twin)\": choose a name that does not")
            }
            try db.execute(
                "INSERT INTO users (name, admin, created_ms, skeleton) VALUES (?, ?, ?, ?)",
                [name, admin ? 1 : 0, Self.now(), skeleton])
            return try Self.insertToken(user: db.lastInsertRowID, expiresMs: expiresMs, db)
        }
    }

    /// Every user, by name.
    public func users() throws -> [User] {
        let now = Self.now()
        return try database.read { db in
            try db.query(
                """
                SELECT name, admin, revoked_ms IS NOT NULL, created_ms,
                       (SELECT count(*) FROM tokens WHERE user_id = users.id AND revoked_ms IS NULL
                        AND (expires_ms IS NULL OR expires_ms > ?))
                FROM users ORDER BY name
                """, [now]
            ).map { row in
                User(
                    name: row.string(0) ?? "", isAdmin: row.int(1) == 1, isRevoked: row.int(2) == 1,
                    createdMs: row.int64(3) ?? 0,
                    liveTokens: row.int(4) ?? 0)
            }
        }
    }

    /// Gives `name` the admin role (or takes it away). NOT_FOUND for an unknown user.
    public func setAdmin(_ name: String, _ admin: Bool = true) throws {
        try write { db in
            try db.execute("UPDATE users SET admin = ? WHERE name = ? AND revoked_ms IS NULL", [admin ? 1 : 0, name])
            guard db.changes == 1 else { throw IdentityError(.notFound, "no user \"\(name)\" (or it was revoked)") }
        }
    }

    /// Revokes a user and every token of theirs: each replica refuses them from its next refresh on. The name
    /// stays taken. NOT_FOUND for an unknown or already revoked user.
    public func revokeUser(_ name: String) throws {
        let now = Self.now()
        try write { db in
            try db.execute("UPDATE users SET revoked_ms = ? WHERE name = ? AND revoked_ms IS NULL", [now, name])
            guard db.changes == 1 else { throw IdentityError(.notFound, "no user \"\(name)\" (or already revoked)") }
            try db.execute(
                "UPDATE tokens SET revoked_ms = ? WHERE revoked_ms IS NULL AND user_id = (SELECT id FROM users WHERE name = ?)",
                [now, name])
        }
    }

    // MARK: Tokens

    /// A further token for `user`, valid until `expiresMs` (nil: until revoked). NOT_FOUND for an unknown or
    /// revoked user; INVALID_ARGUMENT for an expiry already past.
    public func createToken(user: String, expiresMs: Int64? = nil) throws -> String {
        if let expiresMs, expiresMs <= Self.now() {
            throw IdentityError(.invalidArgument, "the expiry is already past")
        }
        return try write { db in
            guard
                let id = try db.queryOne("SELECT id FROM users WHERE name = ? AND revoked_ms IS NULL", [user])?.int64(0)
            else {
                throw IdentityError(.notFound, "no user \"\(user)\" (or it was revoked)")
            }
            return try Self.insertToken(user: id, expiresMs: expiresMs, db)
        }
    }

    /// Revokes one token (with `user`: only one of theirs). NOT_FOUND for an unknown or already revoked one, or
    /// another user's.
    public func revokeToken(_ token: String, user: String? = nil) throws {
        try write { db in
            try db.execute(
                """
                UPDATE tokens SET revoked_ms = ? WHERE hash = ? AND revoked_ms IS NULL
                AND (?3 IS NULL OR user_id = (SELECT id FROM users WHERE name = ?3))
                """, [Self.now(), Self.hash(token), user])
            guard db.changes == 1 else { throw IdentityError(.notFound, "no such token (or already revoked)") }
        }
    }

    /// Records a token known only by its hash for `user` (created if missing, never an admin by this): how an
    /// older store's tokens (health's) move over, so they keep working. Idempotent.
    public func adopt(hash: [UInt8], user: String, createdMs: Int64, revokedMs: Int64?) throws {
        try Self.validate(name: user)
        try write { db in
            try db.execute(
                "INSERT OR IGNORE INTO users (name, created_ms, skeleton) VALUES (?, ?, ?)",
                [user, createdMs, Self.skeleton(user)])
            try db.execute(
                """
                INSERT OR IGNORE INTO tokens (hash, user_id, created_ms, revoked_ms)
                SELECT ?, id, ?, ? FROM users WHERE name = ?
                """, [hash, createdMs, revokedMs, user])
        }
    }

    /// Makes sure the administrator exists and that `token` (compose's, or `MENAGERIE_ADMIN_TOKEN`) is one of
    /// its tokens, so the admin is a user like the others (listed, owning data) and its name can never be taken.
    public func ensureAdmin(token: String) throws {
        try write { db in
            try db.execute(
                "INSERT OR IGNORE INTO users (name, admin, created_ms, skeleton) VALUES (?, 1, ?, ?)",
                [Self.adminName, Self.now(), Self.skeleton(Self.adminName)])
            try db.execute("UPDATE users SET admin = 1 WHERE name = ?", [Self.adminName])
            try db.execute(
                "INSERT OR IGNORE INTO tokens (hash, user_id, created_ms) SELECT ?, id, ? FROM users WHERE name = ?",
                [Self.hash(token), Self.now(), Self.adminName])
        }
    }

    /// Every token by hash: what a verifier holds. Revoked and expired ones stay in, so a refusal says why
    /// and counts against their user's failures.
    public func tokens() throws -> [[UInt8]: TokenEntry] {
        try tokenChanges(since: nil).entries
    }

    /// The tokens whose entry changed after change number `since` (a token added, revoked or given another expiry;
    /// its user renamed, made admin or revoked), or every token for nil; and the change number they are as of. Reads
    /// only those rows (indexed by change number), so a verifier keeps up with sign-ups at the cost of the sign-ups.
    public func tokenChanges(since: Int64?) throws -> (entries: [[UInt8]: TokenEntry], seq: Int64) {
        try database.read { db in
            let columns = """
                SELECT tokens.hash, users.name, users.admin, tokens.expires_ms,
                       tokens.revoked_ms IS NOT NULL OR users.revoked_ms IS NOT NULL
                FROM tokens JOIN users ON users.id = tokens.user_id
                """
            // The number first: a change committed between the two reads is in the rows and read again next time,
            // which merging makes harmless.
            let seq = try db.queryOne("SELECT seq FROM changes")?.int64(0) ?? 0
            let rows =
                try since.map { since in
                    try db.query(
                        "\(columns) WHERE tokens.seq > ? UNION ALL \(columns) WHERE users.seq > ?", [since, since])
                } ?? db.query(columns)
            var entries: [[UInt8]: TokenEntry] = [:]
            for row in rows {
                guard let hash = row.blob(0), let name = row.string(1) else { continue }
                entries[hash] = TokenEntry(
                    user: name, isAdmin: row.int(2) == 1, expiresMs: row.int64(3), isRevoked: row.int(4) == 1)
            }
            return (entries, seq)
        }
    }

    // MARK: Helpers

    private func write<T>(_ body: (Connection) throws -> T) throws -> T {
        defer { localWrites.add(1, ordering: .releasing) }
        return try database.write(body)
    }

    /// A new token: `mnt_` and 256 random bits in hex (getrandom(2)), so guessing one is infeasible and a
    /// token is recognisable in a leaked file or log.
    public static func newToken() -> String {
        var generator = SystemRandomNumberGenerator()
        return "mnt_" + (0..<32).map { _ in UInt8.random(in: 0...255, using: &generator) }.hexString
    }

    public static func hash(_ token: String) -> [UInt8] { SHA256.hash(token.utf8) }

    /// What a name looks like, for telling look-alikes apart: its compatibility form (NFKC: full-width and styled
    /// letters as plain ones), every script transliterated to Latin and then to ASCII (Cyrillic "аdmin" is "admin"),
    /// lowercased, with the look-alike digits 0 and 1 as o and l. An approximation of Unicode's UTS #39 skeleton from
    /// the ICU transforms Foundation carries; letters no transform maps (Cherokee "Ꭺ") stay themselves.
    public static func skeleton(_ name: String) -> String {
        let compatible = name.precomposedStringWithCompatibilityMapping
        let latin =
            compatible.applyingTransform(StringTransform("Any-Latin; Latin-ASCII; Lower"), reverse: false)
            ?? compatible.lowercased()
        return String(latin.map { $0 == "0" ? "o" : $0 == "1" ? "l" : $0 })
    }

    static func now() -> Int64 { Int64(Date().timeIntervalSince1970 * 1000) }

    public static func validate(name: String) throws(IdentityError) {
        let allowed = name.unicodeScalars.allSatisfy {
            $0.properties.isAlphabetic || $0.properties.numericType != nil || "-_.@".unicodeScalars.contains($0)
        }
        guard !name.isEmpty, name.utf8.count <= 128, allowed else {
            throw IdentityError(
                .invalidArgument, "a user name is 1–128 bytes of letters, digits and - _ . @ (got \"\(name)\")")
        }
    }

    private static func insertToken(user: Int64, expiresMs: Int64?, _ db: Connection) throws -> String {
        let token = newToken()
        try db.execute(
            "INSERT INTO tokens (hash, user_id, created_ms, expires_ms) VALUES (?, ?, ?, ?)",
            [hash(token), user, now(), expiresMs])
        return token
    }
}

/// What identity refuses, with the category the RPC server answers it with.
public struct IdentityError: CategorizedError, Sendable, Equatable {
    public let category: ErrorCategory
    public let message: String

    public init(_ category: ErrorCategory, _ message: String) {
        self.category = category
        self.message = message
    }
}
