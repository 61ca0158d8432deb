import Base
import Foundation
import Storage
import TLS

/// A user of the service.
public struct HealthUser: Sendable, Hashable {
    public let id: Int64
    public let name: String
}

/// Samples, tombstones and change logs per user, over one SQLite database: the server's store (many users)
/// and, through `DeviceStore`, a device's local one (a single user).
///
/// Every write is one transaction that also advances the user's anchor, so a batch and its anchor commit
/// together or not at all. Writes serialize (one writer, `BEGIN IMMEDIATE` across processes), so anchors
/// become visible in order: a reader that sees anchor n also sees every change below n, and an anchored read
/// never skips a change committed late.
public final class HealthStore: Sendable {
    public let database: Database
    public let limits: SampleLimits

    public init(database: Database, limits: SampleLimits = .standard) {
        self.database = database
        self.limits = limits
    }

    /// Opens (creating) the store at `path`.
    public convenience init(path: String, limits: SampleLimits = .standard) throws {
        self.init(database: try Database(path: path, migrations: HealthSchema.migrations), limits: limits)
    }

    /// A private store: in memory, or on the database `databases` opens (tests pass the backend they run on).
    public static func inMemory(limits: SampleLimits = .standard, using databases: DatabaseFactory = .inMemory) throws
        -> HealthStore
    {
        HealthStore(database: try databases.open(migrations: HealthSchema.migrations), limits: limits)
    }

    static func now() -> EpochMilliseconds { EpochMilliseconds((Date().timeIntervalSince1970 * 1000).rounded()) }

    // MARK: Users and tokens

    /// Creates a user and its first token. ALREADY_EXISTS when the name is taken.
    /// The token is returned once; only its SHA-256 is stored.
    public func createUser(name: String) throws -> (user: HealthUser, token: String) {
        guard !name.isEmpty, name.utf8.count <= 128 else {
            throw HealthError.invalid("a user name is 1–128 bytes")
        }
        return try database.write { db in
            guard try db.queryOne("SELECT 1 FROM users WHERE name = ?", [name]) == nil else {
                throw HealthError(.alreadyExists, "user \"\(name)\" already exists")
            }
            try db.execute("INSERT INTO users (name, created_ms) VALUES (?, ?)", [name, Self.now()])
            let user = HealthUser(id: db.lastInsertRowID, name: name)
            return (user, try Self.insertToken(for: user.id, db))
        }
    }

    /// A further token for an existing user (a second device). NOT_FOUND for an unknown user.
    public func issueToken(userName: String) throws -> String {
        try database.write { db in
            guard let id = try db.queryOne("SELECT id FROM users WHERE name = ?", [userName])?.int64(0) else {
                throw HealthError.notFound("no user \"\(userName)\"")
            }
            return try Self.insertToken(for: id, db)
        }
    }

    /// The user a token belongs to; UNAUTHENTICATED for a missing, unknown or revoked token.
    public func authenticate(token: String) throws -> HealthUser {
        guard !token.isEmpty else { throw HealthError(.unauthenticated, "no token") }
        let row = try database.read { db in
            try db.queryOne(
                """
                SELECT users.id, users.name FROM tokens JOIN users ON users.id = tokens.user_id
                WHERE tokens.hash = ? AND tokens.revoked_ms IS NULL
                """, [Self.tokenHash(token)])
        }
        guard let row, let id = row.int64(0), let name = row.string(1) else {
            throw HealthError(.unauthenticated, "unknown or revoked token")
        }
        return HealthUser(id: id, name: name)
    }

    /// Revokes a token: calls with it are UNAUTHENTICATED from now on. NOT_FOUND for an unknown or already
    /// revoked one, or (with `user`) one of another user.
    public func revoke(token: String, user: Int64? = nil) throws {
        try database.write { db in
            try db.execute(
                "UPDATE tokens SET revoked_ms = ? WHERE hash = ? AND revoked_ms IS NULL AND (?3 IS NULL OR user_id = ?3)",
                [Self.now(), Self.tokenHash(token), user])
            guard db.changes == 1 else { throw HealthError.notFound("no such token (or already revoked)") }
        }
    }

    /// How many live samples the user has.
    public func sampleCount(user: Int64) throws -> Int {
        try database.read { try $0.queryOne("SELECT count(*) FROM samples WHERE user_id = ?", [user])?.int(0) ?? 0 }
    }

    /// The user named `name`, made (without a token) if missing: a user of the shared identity becomes a user
    /// here on their first call, as the identity, not this store, holds their tokens now.
    public func user(namedOrNew name: String) throws -> HealthUser {
        if let id = try database.read({ try $0.queryOne("SELECT id FROM users WHERE name = ?", [name])?.int64(0) }) {
            return HealthUser(id: id, name: name)
        }
        return try database.write { db in
            try db.execute("INSERT OR IGNORE INTO users (name, created_ms) VALUES (?, ?)", [name, Self.now()])
            guard let id = try db.queryOne("SELECT id FROM users WHERE name = ?", [name])?.int64(0) else {
                throw HealthError.notFound("no user \"\(name)\"")
            }
            return HealthUser(id: id, name: name)
        }
    }

    /// Every token this store issued before the shared identity held them (hash, user, when made and revoked),
    /// so they can move there and keep working.
    public func storedTokens() throws -> [(hash: [UInt8], user: String, createdMs: Int64, revokedMs: Int64?)] {
        try database.read { db in
            try db.query(
                "SELECT tokens.hash, users.name, tokens.created_ms, tokens.revoked_ms FROM tokens JOIN users ON users.id = tokens.user_id"
            )
            .compactMap { row in
                guard let hash = row.blob(0), let name = row.string(1) else { return nil }
                return (hash, name, row.int64(2) ?? 0, row.int64(3))
            }
        }
    }

    /// The user named `name`, NOT_FOUND otherwise.
    public func user(named name: String) throws -> HealthUser {
        guard let id = try database.read({ try $0.queryOne("SELECT id FROM users WHERE name = ?", [name])?.int64(0) })
        else { throw HealthError.notFound("no user \"\(name)\"") }
        return HealthUser(id: id, name: name)
    }

    private static func insertToken(for user: Int64, _ db: Connection) throws -> String {
        var generator = SystemRandomNumberGenerator()  // getrandom(2): cryptographically secure
        let token = (0..<32).map { _ in UInt8.random(in: 0...255, using: &generator) }.hexString
        try db.execute(
            "INSERT INTO tokens (hash, user_id, created_ms) VALUES (?, ?, ?)", [tokenHash(token), user, now()])
        return token
    }

    static func tokenHash(_ token: String) -> [UInt8] { SHA256.hash(token.utf8) }

    // MARK: Writes

    /// Adds samples (idempotently: a UUID stored with the same content counts as a duplicate).
    public func add(_ samples: [HealthSample], user: Int64) throws -> WriteResult {
        try apply(ChangeSet(samples: samples), user: user, origin: .client(strictDeletes: true))
    }

    /// Deletes samples by UUID, leaving tombstones. NOT_FOUND (and nothing deleted) when one of them is not
    /// this user's; deleting an already deleted sample again is fine.
    public func delete(_ uuids: [UUID], user: Int64) throws -> WriteResult {
        try apply(
            ChangeSet(deletions: uuids.map { Deletion(uuid: $0) }), user: user, origin: .client(strictDeletes: true))
    }

    /// Validates `changes` whole (one bad sample rejects them all), then writes them in one transaction with
    /// the anchor they advance to and, when given, the cursor a sync records with them (`cursor` runs inside
    /// the transaction: a pushed batch and the device's push position commit together).
    public func apply(
        _ changes: ChangeSet, user: Int64, origin: WriteOrigin,
        cursor: (@Sendable (Connection, WriteResult) throws -> Void)? = nil
    ) throws -> WriteResult {
        guard changes.count <= limits.maxBatchSamples else {
            throw HealthError(
                .resourceExhausted,
                "a batch of \(changes.count) changes is over the limit of \(limits.maxBatchSamples); split it")
        }
        try HealthSample.validate(batch: changes.samples, limits)
        return try database.write { db in
            var pushedBy: String?
            if case .push(let device) = origin { pushedBy = device }
            var writer = try ChangeWriter(
                db: db, user: user, pulled: { if case .server = origin { true } else { false } }(), pushedBy: pushedBy)
            var result = WriteResult()
            for sample in changes.samples {
                try writer.insert(
                    sample, serverWins: { if case .server = origin { true } else { false } }(), into: &result)
            }
            let strict = { if case .client(let strict) = origin { strict } else { false } }()
            for deletion in changes.deletions {
                try writer.delete(deletion, strict: strict, into: &result)
            }
            try writer.finish()
            result.anchor = writer.anchor
            try cursor?(db, result)
            return result
        }
    }

    /// The user's current anchor (the last change's position; 0 for none).
    public func anchor(user: Int64) throws -> Int64 {
        try database.read { try $0.queryOne("SELECT last_anchor FROM users WHERE id = ?", [user])?.int64(0) ?? 0 }
    }

    // MARK: Reads

    static let sampleColumns = "uuid, type, value, start_ms, end_ms, source, zone, metadata"

    static func decodeSample(_ row: Row) throws -> HealthSample {
        guard let uuid = row.blob(0).flatMap(UUID.init(bytes:)), let code = row.int(1),
            let type = HealthType(code: code),
            let value = row.double(2), let start = row.int64(3), let end = row.int64(4), let source = row.string(5)
        else { throw StorageError(.typeMismatch, message: "a samples row this program cannot read: \(row.values)") }
        return HealthSample(
            uuid: uuid, type: type, value: value, start: start, end: end, source: source, timeZone: row.string(6),
            metadata: MetadataCoding.decode(row.string(7)))
    }

    /// One sample of this user; NOT_FOUND when it is not theirs (even if another user has that UUID).
    public func sample(_ uuid: UUID, user: Int64) throws -> HealthSample {
        let row = try database.read { db in
            try db.queryOne(
                "SELECT \(Self.sampleColumns) FROM samples WHERE user_id = ? AND uuid = ?", [user, uuid.bytes])
        }
        guard let row else { throw HealthError.notFound("no sample \(uuid.uuidString.lowercased())") }
        return try Self.decodeSample(row)
    }

    /// Samples matching `query`, as HealthKit's sample query with a date predicate would return them.
    public func samples(_ query: SampleQuery, user: Int64) throws -> [HealthSample] {
        try query.validate()
        return try database.read { db in try Self.samples(query, user: user, db).map(Self.decodeSample) }
    }

    /// One page of the samples matching `query` (its `limit`, default 1,000), in its order, after its `after`
    /// cursor, and the cursor of the next page when more match: a list never stops short without saying so.
    public func page(_ query: SampleQuery, user: Int64) throws -> SamplePage {
        try query.validate()
        var probe = query
        let limit = query.limit ?? 1000
        probe.limit = limit + 1  // one more than the page: whether there is a next one
        var samples = try database.read { db in try Self.samples(probe, user: user, db).map(Self.decodeSample) }
        guard samples.count > limit else { return SamplePage(samples: samples, next: nil) }
        samples.removeLast(samples.count - limit)
        return SamplePage(samples: samples, next: samples.last.map { SampleCursor(start: $0.start, uuid: $0.uuid) })
    }

    static func samples(_ query: SampleQuery, user: Int64, _ db: Connection, columns: String = sampleColumns) throws
        -> [Row]
    {
        var conditions = ["user_id = ?"]
        var arguments: [(any SQLConvertible)?] = [user]
        let types = query.types.isEmpty ? HealthType.allCases : query.types.sorted()
        conditions.append("type IN (\(types.map { String($0.code) }.joined(separator: ",")))")
        if let from = query.from {
            if query.options.contains(.strictStartDate) {
                conditions.append("start_ms >= ?")
                arguments.append(from)
            } else {
                // The longest sample bounds how early an overlapping one can start: keeps the index range tight.
                let placeholders = types.map { String($0.code) }.joined(separator: ",")
                let longest =
                    try db.queryOne(
                        "SELECT max(longest_ms) FROM type_spans WHERE user_id = ? AND type IN (\(placeholders))", [user]
                    )?.int64(0) ?? 0
                conditions.append("start_ms >= ?")
                arguments.append(from - longest)
                if query.options.contains(.strictEndDate) {
                    conditions.append("end_ms >= ?")
                } else {
                    // Overlapping: ends after `from`, or is an instant at or after it.
                    conditions.append("(end_ms > ? OR start_ms >= ?)")
                    arguments.append(from)
                }
                arguments.append(from)
            }
        }
        if let to = query.to {
            if query.options.contains(.strictEndDate) {
                conditions.append("end_ms <= ? AND start_ms < ?")
                arguments += [to, to]
            } else {
                conditions.append("start_ms < ?")
                arguments.append(to)
            }
        }
        if let sources = query.sources, !sources.isEmpty {
            conditions.append("source IN (\(sources.map { _ in "?" }.joined(separator: ",")))")
            arguments += sources.map { $0 as (any SQLConvertible)? }
        }
        if let after = query.after {
            // Keyset paging on the order's own key (start, uuid): stable while samples are added or deleted.
            let comparison = query.ascending ? ">" : "<"
            conditions.append("(start_ms \(comparison) ? OR (start_ms = ? AND uuid \(comparison) ?))")
            arguments += [after.start, after.start, after.uuid.bytes]
        }
        var sql = "SELECT \(columns) FROM samples WHERE \(conditions.joined(separator: " AND "))"
        sql += query.ascending ? " ORDER BY start_ms, uuid" : " ORDER BY start_ms DESC, uuid DESC"
        if let limit = query.limit {
            sql += " LIMIT ?"
            arguments.append(limit)
        }
        return try db.prepare(sql).query(arguments)
    }

    /// The user's changes after `since`, at most `limit` of them (samples and deletions counted together),
    /// in anchor order. `pushable` leaves out what the device pulled from the server (it has it already);
    /// `filter` drops changes out of scope, and `device` those that device store pushed (it has them: a first
    /// sync after an import pulled back everything it had just pushed), though the returned anchor moves past them.
    public func changes(
        user: Int64, since: Int64, limit: Int, filter: SyncFilter = .everything, pushable: Bool = false,
        device: String? = nil
    ) throws -> ChangeBatch {
        guard limit > 0 else { throw HealthError.invalid("a change page needs a limit above 0") }
        let pulledCondition = pushable ? " AND pulled = 0" : ""
        return try database.read { db in
            let sampleRows = try db.prepare(
                "SELECT \(Self.sampleColumns), anchor, pushed_by FROM samples WHERE user_id = ? AND anchor > ?\(pulledCondition) ORDER BY anchor LIMIT ?"
            ).query([user, since, limit + 1])
            let tombstoneRows = try db.prepare(
                "SELECT uuid, type, start_ms, end_ms, anchor, pushed_by FROM tombstones WHERE user_id = ? AND anchor > ?\(pulledCondition) ORDER BY anchor LIMIT ?"
            ).query([user, since, limit + 1])
            enum Change { case sample(HealthSample), deletion(Deletion), own }
            var merged: [(Int64, Change)] = []
            merged.reserveCapacity(sampleRows.count + tombstoneRows.count)
            func own(_ pushedBy: String?) -> Bool { device != nil && pushedBy == device }
            for row in sampleRows {
                merged.append((row.int64(8) ?? 0, own(row.string(9)) ? .own : .sample(try Self.decodeSample(row))))
            }
            for row in tombstoneRows {
                guard let uuid = row.blob(0).flatMap(UUID.init(bytes:)) else { continue }
                let deletion = Deletion(
                    uuid: uuid, type: row.int(1).flatMap(HealthType.init(code:)), start: row.int64(2), end: row.int64(3)
                )
                merged.append((row.int64(4) ?? 0, own(row.string(5)) ? .own : .deletion(deletion)))
            }
            merged.sort { $0.0 < $1.0 }
            let page = merged.prefix(limit)
            var changes = ChangeSet()
            for (_, change) in page {
                switch change {
                case .sample(let sample) where filter.matches(sample): changes.samples.append(sample)
                case .deletion(let deletion) where filter.matches(deletion): changes.deletions.append(deletion)
                default: break
                }
            }
            return ChangeBatch(changes: changes, anchor: page.last?.0 ?? since, hasMore: merged.count > limit)
        }
    }
}

/// HealthKit's `HKQueryOptions` for a date predicate.
public struct QueryOptions: OptionSet, Sendable, Hashable {
    public let rawValue: Int
    public init(rawValue: Int) { self.rawValue = rawValue }
    /// The sample starts within the range (`from ≤ start < to`).
    public static let strictStartDate = QueryOptions(rawValue: 1)
    /// The sample ends within the range (`from ≤ end ≤ to`) and starts before `to` (an instant at `to` is out).
    public static let strictEndDate = QueryOptions(rawValue: 2)
}

/// A sample query: types (none = all), a time range with HealthKit's options (none = overlapping),
/// sources, a limit and an order by start time.
public struct SampleQuery: Sendable, Hashable {
    public var types: [HealthType]
    public var from: EpochMilliseconds?
    public var to: EpochMilliseconds?
    public var options: QueryOptions
    public var sources: [String]?
    public var limit: Int?
    public var ascending: Bool
    /// Continues after this sample (a page's `next`), in the same order.
    public var after: SampleCursor?

    public init(
        types: [HealthType] = [], from: EpochMilliseconds? = nil, to: EpochMilliseconds? = nil,
        options: QueryOptions = [], sources: [String]? = nil, limit: Int? = nil, ascending: Bool = true,
        after: SampleCursor? = nil
    ) {
        self.after = after
        self.types = types
        self.from = from
        self.to = to
        self.options = options
        self.sources = sources
        self.limit = limit
        self.ascending = ascending
    }

    func validate() throws(HealthError) {
        if let from, let to, from > to {
            throw .invalid("query range ends (\(Timestamps.format(to))) before it starts (\(Timestamps.format(from)))")
        }
        if let limit, limit <= 0 { throw .invalid("a query limit must be above 0, not \(limit)") }
    }
}

/// Where a page of samples ended: its last sample's start and UUID, the order's key. Its text,
/// `START_MS:UUID`, is what a client passes back for the next page.
public struct SampleCursor: Sendable, Hashable {
    public var start: EpochMilliseconds
    public var uuid: UUID

    public init(start: EpochMilliseconds, uuid: UUID) {
        self.start = start
        self.uuid = uuid
    }

    public init(text: String) throws(HealthError) {
        let parts = text.split(separator: ":", maxSplits: 1)
        guard parts.count == 2, let start = Int64(parts[0]), let uuid = UUID(uuidString: String(parts[1])) else {
            throw .invalid("\"\(text)\" is not a page cursor (START_MS:UUID, as a page's next gives it)")
        }
        self.init(start: start, uuid: uuid)
    }

    public var text: String { "\(start):\(uuid.uuidString.lowercased())" }
}

/// A page of samples and, when more match, the cursor of the next.
public struct SamplePage: Sendable, Hashable {
    public var samples: [HealthSample]
    public var next: SampleCursor?
}
