import Storage

/// The ocr service's tables. Value definitions and record values are keyed by the value's position, so renaming a
/// value leaves every record's values with it.
public enum OCRSchema {
    public static let migrations: [Migration] = [
        Migration(1, "templates, their values and records") { db in try db.executeScript(version1) },
        // Records saved before had the upload time (the gateway offered no date), so that is their source.
        Migration(2, "where a record's date came from") { db in
            try db.executeScript("ALTER TABLE records ADD COLUMN date_source TEXT NOT NULL DEFAULT 'upload';")
        },
        // Templates made before learned no shape or label (they are matched by position, as before), and values
        // saved before were never flagged.
        Migration(3, "values' shapes and labels; uncertain record values") { db in
            try db.executeScript(
                """
                ALTER TABLE template_values ADD COLUMN shape TEXT NOT NULL DEFAULT '';
                ALTER TABLE template_values ADD COLUMN label TEXT NOT NULL DEFAULT '';
                ALTER TABLE record_values ADD COLUMN uncertainty TEXT NOT NULL DEFAULT '';
                """)
        },
    ]

    private static let version1 = """
        CREATE TABLE templates (
            id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, description TEXT NOT NULL DEFAULT '',
            created_ms INTEGER NOT NULL);
        CREATE TABLE template_values (
            template_id INTEGER NOT NULL REFERENCES templates(id) ON DELETE CASCADE,
            position INTEGER NOT NULL, name TEXT NOT NULL, level TEXT NOT NULL,
            x REAL NOT NULL, y REAL NOT NULL, width REAL NOT NULL, height REAL NOT NULL,
            PRIMARY KEY (template_id, position), UNIQUE (template_id, name));
        CREATE TABLE records (
            id INTEGER PRIMARY KEY,
            template_id INTEGER NOT NULL REFERENCES templates(id) ON DELETE CASCADE,
            created_ms INTEGER NOT NULL);
        CREATE INDEX records_by_time ON records (template_id, created_ms, id);
        CREATE TABLE record_values (
            record_id INTEGER NOT NULL REFERENCES records(id) ON DELETE CASCADE,
            position INTEGER NOT NULL, text TEXT NOT NULL, confidence REAL NOT NULL,
            PRIMARY KEY (record_id, position));
        """
}
