import Foundation
import Storage

/// A device's own store, like HealthKit's database on the phone: the same schema as the server's, holding
/// one user, plus the device's id and, per sync scope, the server anchor it has pulled to.
///
/// Samples added or deleted here are the device's changes; the ones it pulled from the server are marked
/// so and never pushed back.
public final class DeviceStore: Sendable {
    public let store: HealthStore
    /// The local user every sample belongs to.
    public let user: Int64 = 1
    /// Names this device to the server, which records how far each device's pushes have been committed.
    public let deviceID: String

    public init(store: HealthStore) throws {
        self.store = store
        deviceID = try store.database.write { db in
            try db.execute("INSERT OR IGNORE INTO users (id, name, created_ms) VALUES (1, 'device', ?)", [HealthStore.now()])
            if let id = try db.queryOne("SELECT device_id FROM device")?.string(0) { return id }
            let id = UUID().uuidString.lowercased()
            try db.execute("INSERT INTO device (id, device_id) VALUES (1, ?)", [id])
            return id
        }
    }

    /// Opens (creating) the device store at `path`.
    public convenience init(path: String) throws { try self.init(store: HealthStore(path: path)) }

    public static func inMemory() throws -> DeviceStore { try DeviceStore(store: .inMemory()) }

    public func add(_ samples: [HealthSample]) throws -> WriteResult { try store.add(samples, user: user) }
    public func delete(_ uuids: [UUID]) throws -> WriteResult { try store.delete(uuids, user: user) }
    public func samples(_ query: SampleQuery) throws -> [HealthSample] { try store.samples(query, user: user) }
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
        return try apply(batch.changes, user: user, origin: .client(strictDeletes: false)) { db, _ in
            try db.execute(
                """
                INSERT INTO push_cursors (user_id, device, scope, anchor) VALUES (?, ?, ?, ?)
                ON CONFLICT (user_id, device, scope) DO UPDATE SET anchor = max(anchor, excluded.anchor)
                """, [user, device, scope, batch.through])
        }
    }
}
