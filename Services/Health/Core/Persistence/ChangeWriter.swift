import Foundation
import Storage

/// Writes one transaction's samples and deletions for one user: the rows, the rollup cells, the tombstones
/// and the anchors. Lives only inside a `Database.write` closure.
struct ChangeWriter {
    private let db: Connection
    private let user: Int64
    private let pulled: Bool
    /// The device store whose push this is (server only), recorded on the rows so its pull skips them.
    private let pushedBy: String?
    private(set) var anchor: Int64
    private var longest: [HealthType: Int64] = [:]
    private let findSample: Statement
    private let findTombstone: Statement
    private let insertSample: Statement
    private let addToCell: Statement
    private let removeSample: Statement
    private let insertTombstone: Statement

    init(db: Connection, user: Int64, pulled: Bool, pushedBy: String? = nil) throws {
        self.db = db
        self.user = user
        self.pulled = pulled
        self.pushedBy = pushedBy
        guard let current = try db.queryOne("SELECT last_anchor FROM users WHERE id = ?", [user])?.int64(0) else {
            throw HealthError.notFound("no user \(user)")
        }
        anchor = current
        findSample = try db.prepare(
            "SELECT \(HealthStore.sampleColumns), cell FROM samples WHERE user_id = ? AND uuid = ?")
        findTombstone = try db.prepare("SELECT 1 FROM tombstones WHERE user_id = ? AND uuid = ?")
        insertSample = try db.prepare(
            """
            INSERT INTO samples (user_id, uuid, type, value, start_ms, end_ms, source, zone, metadata, anchor, pulled, cell, pushed_by)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            """)
        addToCell = try db.prepare(
            """
            INSERT INTO cells (user_id, type, cell, total, count, minimum, maximum) VALUES (?1, ?2, ?3, ?4, 1, ?4, ?4)
            ON CONFLICT (user_id, type, cell) DO UPDATE SET total = total + excluded.total, count = count + 1,
                minimum = min(minimum, excluded.minimum), maximum = max(maximum, excluded.maximum)
            """)
        removeSample = try db.prepare("DELETE FROM samples WHERE user_id = ? AND uuid = ?")
        insertTombstone = try db.prepare(
            """
            INSERT INTO tombstones (user_id, uuid, type, start_ms, end_ms, anchor, pulled, deleted_ms, pushed_by)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
            """)
    }

    /// The 15-minute UTC cell a sample rolls up into, nil when it must be read on its own: a cumulative
    /// sample crossing a cell boundary (split in proportion at query time) or a category sample (merged).
    static func cell(of sample: HealthSample) -> Int64? {
        let size = HealthSchema.cellMilliseconds
        let (cell, _) = Timestamps.floorDivide(sample.start, size)
        switch sample.type.kind {
        case .category: return nil
        case .discrete: return cell
        case .cumulative: return sample.end <= (cell + 1) * size ? cell : nil
        }
    }

    mutating func insert(_ sample: HealthSample, serverWins: Bool, into result: inout WriteResult) throws {
        let key = sample.uuid.bytes
        if let row = try findSample.queryOne([user, key]) {
            let stored = try HealthStore.decodeSample(row)
            if stored.hasSameContent(as: sample) {
                result.duplicates += 1
                return
            }
            result.conflicts.append(
                SampleConflict(stored: serverWins ? sample : stored, rejected: serverWins ? stored : sample))
            guard serverWins else { return }
            try removeRow(stored, cell: row.int64(8))
        } else if try findTombstone.queryOne([user, key]) != nil {
            result.alreadyDeleted += 1
            return
        }
        anchor += 1
        let cell = Self.cell(of: sample)
        try insertSample.execute([
            user, key, sample.type.code, sample.value, sample.start, sample.end, sample.source, sample.timeZone,
            MetadataCoding.encode(sample.metadata), anchor, pulled, cell, pushedBy,
        ])
        if let cell { try addToCell.execute([user, sample.type.code, cell, sample.value]) }
        if sample.duration > longest[sample.type, default: 0] { longest[sample.type] = sample.duration }
        result.added += 1
    }

    mutating func delete(_ deletion: Deletion, strict: Bool, into result: inout WriteResult) throws {
        let key = deletion.uuid.bytes
        var tombstone = deletion
        if let row = try findSample.queryOne([user, key]) {
            let stored = try HealthStore.decodeSample(row)
            try removeRow(stored, cell: row.int64(8))
            tombstone = Deletion(uuid: stored.uuid, type: stored.type, start: stored.start, end: stored.end)
            result.deleted += 1
        } else if try findTombstone.queryOne([user, key]) != nil {
            result.duplicateDeletions += 1
            return
        } else if strict {
            throw HealthError.notFound("no sample \(deletion.uuid.uuidString.lowercased())")
        } else {
            // A sync's deletion of a sample this side never saw: keep the tombstone, so the sample, should it
            // arrive later from a device that has not heard of the deletion, stays deleted.
            result.duplicateDeletions += 1
        }
        anchor += 1
        try insertTombstone.execute([
            user, key, tombstone.type?.code, tombstone.start, tombstone.end, anchor, pulled, HealthStore.now(),
            pushedBy,
        ])
    }

    /// Records the new anchor and longest durations; call once, after the last change.
    func finish() throws {
        try db.execute("UPDATE users SET last_anchor = ? WHERE id = ?", [anchor, user])
        for (type, duration) in longest {
            try db.execute(
                """
                INSERT INTO type_spans (user_id, type, longest_ms) VALUES (?, ?, ?)
                ON CONFLICT (user_id, type) DO UPDATE SET longest_ms = max(longest_ms, excluded.longest_ms)
                """, [user, type.code, duration])
        }
    }

    /// Removes a stored sample's row and takes it out of its cell (recomputed: min and max cannot be undone).
    private func removeRow(_ stored: HealthSample, cell: Int64?) throws {
        try removeSample.execute([user, stored.uuid.bytes])
        guard let cell else { return }
        let size = HealthSchema.cellMilliseconds
        let row = try db.queryOne(
            """
            SELECT sum(value), count(*), min(value), max(value) FROM samples
            WHERE user_id = ? AND type = ? AND start_ms >= ? AND start_ms < ? AND cell = ?
            """, [user, stored.type.code, cell * size, (cell + 1) * size, cell])
        if let row, let count = row.int64(1), count > 0 {
            try db.execute(
                "UPDATE cells SET total = ?, count = ?, minimum = ?, maximum = ? WHERE user_id = ? AND type = ? AND cell = ?",
                [row.double(0), count, row.double(2), row.double(3), user, stored.type.code, cell])
        } else {
            try db.execute(
                "DELETE FROM cells WHERE user_id = ? AND type = ? AND cell = ?", [user, stored.type.code, cell])
        }
    }
}
