import Storage

/// The guestbook's tables: `entries`, one row per note, read per animal in id order (the index).
public enum GuestbookSchema {
    public static let migrations: [Migration] = [
        Migration(1, "entries") { db in
            try db.executeScript(
                """
                CREATE TABLE entries (
                    id INTEGER PRIMARY KEY AUTOINCREMENT,
                    animal_id INTEGER NOT NULL,
                    author TEXT NOT NULL,
                    text TEXT NOT NULL,
                    created_ms INTEGER NOT NULL);
                CREATE INDEX entries_by_animal ON entries (animal_id, id);
                """)
        }
    ]
}
