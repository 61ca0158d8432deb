import Base
import Foundation
import Storage

/// The guestbook's notes in one SQLite database, which replicas may share. Ids only grow (AUTOINCREMENT), so
/// "after id n" is a cursor that pages and watches can resume from without skipping a note.
public final class GuestbookStore: Sendable {
    public let database: Database

    public init(database: Database) { self.database = database }

    /// Opens (creating) the store at `path`.
    public convenience init(path: String) throws {
        self.init(database: try Database(path: path, migrations: GuestbookSchema.migrations))
    }

    /// A private store: in memory, or on the database `databases` opens (tests pass the backend they run on).
    public static func inMemory(using databases: DatabaseFactory = .inMemory) throws -> GuestbookStore {
        GuestbookStore(database: try databases.open(migrations: GuestbookSchema.migrations))
    }

    /// Stores a note after checking it (`EntryRules`); answers with it as stored.
    public func add(animalID: Int64, author: String, text: String, now: Date = Date()) async throws -> GuestbookEntry {
        try EntryRules.check(animalID: animalID, author: author, text: text)
        let createdMs = Int64((now.timeIntervalSince1970 * 1000).rounded())
        return try await database.write { db in
            try db.execute(
                "INSERT INTO entries (animal_id, author, text, created_ms) VALUES (?, ?, ?, ?)",
                [animalID, author, text, createdMs])
            return GuestbookEntry(
                id: db.lastInsertRowID, animalID: animalID, author: author, text: text, createdMs: createdMs)
        }
    }

    /// The note with this id; NOT_FOUND when there is none.
    public func entry(id: Int64) async throws -> GuestbookEntry {
        guard id > 0 else { throw GuestbookError.invalid("id", "must be a positive entry id, got \(id)") }
        let row = try await database.read { db in
            try db.queryOne("SELECT id, animal_id, author, text, created_ms FROM entries WHERE id = ?", [id])
        }
        guard let row else { throw GuestbookError.unknownEntry(id: id) }
        return try Self.entry(row)
    }

    /// Up to `limit` of an animal's notes with ids above `afterID`, oldest first.
    public func entries(animalID: Int64, afterID: Int64 = 0, limit: Int) async throws -> [GuestbookEntry] {
        try EntryRules.checkAnimalID(animalID)
        guard afterID >= 0 else { throw GuestbookError.invalid("after_id", "must not be negative, got \(afterID)") }
        guard limit > 0 else { return [] }
        let rows = try await database.read { db in
            try db.query(
                "SELECT id, animal_id, author, text, created_ms FROM entries WHERE animal_id = ? AND id > ? ORDER BY id LIMIT ?",
                [animalID, afterID, Int64(limit)])
        }
        return try rows.map(Self.entry)
    }

    /// Removes the note with this id; NOT_FOUND when there is none.
    public func delete(id: Int64) async throws {
        guard id > 0 else { throw GuestbookError.invalid("id", "must be a positive entry id, got \(id)") }
        let removed = try await database.write { db in
            try db.execute("DELETE FROM entries WHERE id = ?", [id])
            return db.changes
        }
        guard removed > 0 else { throw GuestbookError.unknownEntry(id: id) }
    }

    /// How many notes an animal has. Blocking: for a job, which runs on a thread of its own.
    public func count(animalID: Int64) throws -> Int64 {
        try EntryRules.checkAnimalID(animalID)
        let row = try database.read { db in
            try db.queryOne("SELECT count(*) FROM entries WHERE animal_id = ?", [animalID])
        }
        guard let row else { return 0 }
        return try row.value(at: 0)
    }

    private static func entry(_ row: Row) throws -> GuestbookEntry {
        GuestbookEntry(
            id: try row.value(at: 0), animalID: try row.value(at: 1), author: try row.value(at: 2),
            text: try row.value(at: 3),
            createdMs: try row.value(at: 4))
    }
}
