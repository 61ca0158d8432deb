import Foundation
import Storage

/// A device's own store, like HealthKit's database on the phone: the same schema as the server's, holding
/// one user, plus the device's id and, per sync scope, the server anchor it has pulled to.
///
/// Samples added or deleted here are the device's changes; the ones it pulled from the server are marked
/// so and never pushed back.
///
/// The store belongs to the account that first synced it (`owner`, recorded once the server accepted it): a
/// sync with another user's token is refused before anything is sent (`HealthSync`), and the server refuses it
/// too (`HealthStore.bindStore`). A store that was never synced has no owner yet.
public final class DeviceStore: Sendable {
    public let store: HealthStore
    /// The local user every sample belongs to.
    public let user: Int64 = 1
    /// Names this device to the server, which records how far each device's pushes have been committed.
    public let deviceID: String

    public init(store: HealthStore) throws {
        self.store = store
        deviceID = try store.database.write { db in
            try db.execute(
                "INSERT OR IGNORE INTO users (id, name, created_ms) VALUES (1, 'device', ?)", [HealthStore.now()])
            if let id = try db.queryOne("SELECT device_id FROM device")?.string(0) { return id }
            let id = UUID().uuidString.lowercased()
            try db.execute("INSERT INTO device (id, device_id) VALUES (1, ?)", [id])
            return id
        }
    }

    /// Opens (creating) the device store at `path`.
    public convenience init(path: String) throws { try self.init(store: HealthStore(path: path)) }

    /// A private device store: in memory, or on the database `databases` opens (tests pass the backend they run on).
    public static func inMemory(using databases: DatabaseFactory = .inMemory) throws -> DeviceStore {
        try DeviceStore(store: .inMemory(using: databases))
    }

    /// The account this store belongs to; nil until its first sync.
    public func owner() throws -> StoreOwner? {
        try store.database.read { db in
            guard let row = try db.queryOne("SELECT owner_id, owner_name FROM device WHERE owner_name IS NOT NULL")
            else { return nil }
            return StoreOwner(id: row.int64(0) ?? 0, name: row.string(1) ?? "")
        }
    }

    /// Records the store's owner, once (a later call for the same user refreshes the name and id), and
    /// remembers `token` as one of the owner's. PERMISSION_DENIED for another user than the recorded one.
    public func claim(for account: StoreOwner, token: String?) throws {
        try store.database.write { db in
            if let row = try db.queryOne("SELECT owner_id, owner_name FROM device WHERE owner_name IS NOT NULL") {
                let recorded = StoreOwner(id: row.int64(0) ?? 0, name: row.string(1) ?? "")
                guard recorded.isSameUser(as: account) else {
                    throw HealthError.storeOwned(by: recorded.name, device: deviceID)
                }
            }
            try db.execute(
                "UPDATE device SET owner_id = ?, owner_name = ?", [account.id == 0 ? nil : account.id, account.name])
            if let token {
                try db.execute("INSERT OR IGNORE INTO owner_tokens (hash) VALUES (?)", [HealthStore.tokenHash(token)])
            }
        }
    }

    /// Whether `token` is known to be the owner's (it synced this store, or the server said whose it is).
    public func isOwnerToken(_ token: String) throws -> Bool {
        try store.database.read { db in
            try db.queryOne("SELECT 1 FROM owner_tokens WHERE hash = ?", [HealthStore.tokenHash(token)]) != nil
        }
    }

    /// PERMISSION_DENIED unless `account` may use this store: it has no owner yet, or `account` is its owner.
    public func checkOwner(_ account: StoreOwner) throws {
        if let owner = try owner(), !owner.isSameUser(as: account) {
            throw HealthError.storeOwned(by: owner.name, device: deviceID)
        }
    }

    public func add(_ samples: [HealthSample]) throws -> WriteResult { try store.add(samples, user: user) }
    public func delete(_ uuids: [UUID]) throws -> WriteResult { try store.delete(uuids, user: user) }
    public func samples(_ query: SampleQuery) throws -> [HealthSample] { try store.samples(query, user: user) }
    public func page(_ query: SampleQuery) throws -> SamplePage { try store.page(query, user: user) }
    public func sample(_ uuid: UUID) throws -> HealthSample { try store.sample(uuid, user: user) }
    public func statistics(_ request: StatisticsRequest) throws -> StatisticsResult {
        try store.statistics(request, user: user)
    }

    /// The server anchor this device has pulled to, for a sync scope.
    public func pulledAnchor(scope: String) throws -> Int64 {
        try store.database.read { db in
            try db.queryOne("SELECT pulled_anchor FROM sync_state WHERE scope = ?", [scope])?.int64(0) ?? 0
        }
    }

    /// The local anchor the last acknowledged push reached, for a sync scope (informational: the server's
    /// cursor is what a sync resumes from).
    public func pushedAnchor(scope: String) throws -> Int64 {
        try store.database.read { db in
            try db.queryOne("SELECT pushed_anchor FROM sync_state WHERE scope = ?", [scope])?.int64(0) ?? 0
        }
    }

    func recordPushed(scope: String, anchor: Int64) throws {
        try store.database.write { db in
            try db.execute(
                """
                INSERT INTO sync_state (scope, pushed_anchor) VALUES (?, ?)
                ON CONFLICT (scope) DO UPDATE SET pushed_anchor = max(pushed_anchor, excluded.pushed_anchor)
                """, [scope, anchor])
        }
    }

    /// Applies one pulled page and the server anchor it reaches in one transaction: a sync killed between two
    /// pages resumes after the last committed one, neither losing nor re-applying anything.
    func applyPulled(_ batch: ChangeBatch, scope: String) throws -> WriteResult {
        try store.apply(batch.changes, user: user, origin: .server) { db, _ in
            try db.execute(
                """
                INSERT INTO sync_state (scope, pulled_anchor) VALUES (?, ?)
                ON CONFLICT (scope) DO UPDATE SET pulled_anchor = max(pulled_anchor, excluded.pulled_anchor)
                """, [scope, batch.anchor])
        }
    }
}

extension HealthStore {
    /// Binds the device store `device` to `user` unless it is bound already, and answers PERMISSION_DENIED when
    /// it is bound to another user: a store belongs to the user (not the token) that first synced it, so a
    /// phone's store never pushes one person's samples into another's account. Idempotent.
    public func bindStore(device: String, user: Int64) throws {
        guard !device.isEmpty, device.utf8.count <= 128 else { throw HealthError.invalid("a device id is 1–128 bytes") }
        let owner: (id: Int64, name: String)? = try database.write { db in
            try db.execute(
                "INSERT OR IGNORE INTO store_owners (device, user_id, bound_ms) VALUES (?, ?, ?)",
                [device, user, Self.now()])
            let row = try db.queryOne(
                "SELECT users.id, users.name FROM store_owners JOIN users ON users.id = store_owners.user_id WHERE device = ?",
                [device])
            return row.flatMap { row in row.int64(0).map { ($0, row.string(1) ?? "?") } }
        }
        if let owner, owner.id != user { throw HealthError.storeOwned(by: owner.name, device: device) }
    }

    /// How far a device's pushes for `scope` have been committed (its local anchor; 0 for none).
    public func pushedAnchor(user: Int64, device: String, scope: String) throws -> Int64 {
        try database.read { db in
            try db.queryOne(
                "SELECT anchor FROM push_cursors WHERE user_id = ? AND device = ? AND scope = ?", [user, device, scope]
            )?.int64(0) ?? 0
        }
    }

    /// Commits one pushed batch together with the device's push position: the server half of a push.
    /// Conflicts keep the stored version and are reported; deletions of unknown UUIDs leave tombstones.
    public func commitPush(_ batch: PushBatch, user: Int64, device: String, scope: String) throws -> WriteResult {
        guard !device.isEmpty, device.utf8.count <= 128 else { throw HealthError.invalid("a device id is 1–128 bytes") }
        return try apply(batch.changes, user: user, origin: .push(device: device)) { db, _ in
            try db.execute(
                """
                INSERT INTO push_cursors (user_id, device, scope, anchor) VALUES (?, ?, ?, ?)
                ON CONFLICT (user_id, device, scope) DO UPDATE SET anchor = max(anchor, excluded.anchor)
                """, [user, device, scope, batch.through])
        }
    }
}

/// The account a device store belongs to, as the server names it.
public struct StoreOwner: Sendable, Hashable {
    /// The user's id on the server; 0 when the server did not say (one older than store binding).
    public var id: Int64
    public var name: String

    public init(id: Int64, name: String) {
        self.id = id
        self.name = name
    }

    /// The same user: by id when both know it (a name alone could be reused after its user is gone), else by name.
    public func isSameUser(as other: StoreOwner) -> Bool {
        id != 0 && other.id != 0 ? id == other.id : name == other.name
    }
}

extension HealthError {
    /// A device store used with another user's account: says whose it is and how to start another.
    public static func storeOwned(by owner: String, device: String) -> HealthError {
        HealthError(
            .permissionDenied,
            "this device store (\(device)) belongs to \(owner); it syncs only with \(owner)'s account. "
                + "Start another store for this account with --store PATH")
    }
}
