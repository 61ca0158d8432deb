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
        // Templates (and so their records) belong to a user; those made before belong to the admin. Names are unique
        // per user now, which needs a new table; SQLite renames references to a renamed table and cascades a dropped
        // one's rows (foreign keys cannot be turned off inside the migration's transaction), so all four tables are
        // copied, the old ones dropped children first, and the copies renamed, which points their references home.
        Migration(3, "templates belong to a user") { db in try db.executeScript(version3) },
        // Templates made before learned no shape or label (they are matched by position, as before), and values
        // saved before were never flagged.
        Migration(4, "values' shapes and labels; uncertain record values") { db in
            try db.executeScript(
                """
                ALTER TABLE template_values ADD COLUMN shape TEXT NOT NULL DEFAULT '';
                ALTER TABLE template_values ADD COLUMN label TEXT NOT NULL DEFAULT '';
                ALTER TABLE record_values ADD COLUMN uncertainty TEXT NOT NULL DEFAULT '';
                """)
        },
        // Values are stored normalised (`ValueText`) with the text as read beside them (empty for older values: the
        // same as the text) and their unit. Shapes learned before counted no digits (`#.#V` for 239.8 V): marked
        // legacy, they are compared as they were learned (`ValueShape.legacyMarker`).
        Migration(5, "record values' raw text and unit; legacy shapes") { db in
            try db.executeScript(
                """
                ALTER TABLE record_values ADD COLUMN raw TEXT NOT NULL DEFAULT '';
                ALTER TABLE record_values ADD COLUMN unit TEXT NOT NULL DEFAULT '';
                UPDATE template_values SET shape = '~' || shape WHERE shape <> '';
                """)
        },
    ]

    private static let version3 = """
        CREATE TABLE templates_new (
            id INTEGER PRIMARY KEY, owner TEXT NOT NULL, name TEXT NOT NULL, description TEXT NOT NULL DEFAULT '',
            created_ms INTEGER NOT NULL, UNIQUE (owner, name));
        INSERT INTO templates_new (id, owner, name, description, created_ms)
            SELECT id, 'admin', name, description, created_ms FROM templates;
        CREATE TABLE template_values_new (
            template_id INTEGER NOT NULL REFERENCES templates_new(id) ON DELETE CASCADE,
            position INTEGER NOT NULL, name TEXT NOT NULL, level TEXT NOT NULL,
            x REAL NOT NULL, y REAL NOT NULL, width REAL NOT NULL, height REAL NOT NULL,
            PRIMARY KEY (template_id, position), UNIQUE (template_id, name));
        INSERT INTO template_values_new SELECT template_id, position, name, level, x, y, width, height FROM template_values;
        CREATE TABLE records_new (
            id INTEGER PRIMARY KEY,
            template_id INTEGER NOT NULL REFERENCES templates_new(id) ON DELETE CASCADE,
            created_ms INTEGER NOT NULL, date_source TEXT NOT NULL DEFAULT 'upload');
        INSERT INTO records_new SELECT id, template_id, created_ms, date_source FROM records;
        CREATE TABLE record_values_new (
            record_id INTEGER NOT NULL REFERENCES records_new(id) ON DELETE CASCADE,
            position INTEGER NOT NULL, text TEXT NOT NULL, confidence REAL NOT NULL,
            PRIMARY KEY (record_id, position));
        INSERT INTO record_values_new SELECT record_id, position, text, confidence FROM record_values;
        DROP TABLE record_values;
        DROP TABLE records;
        DROP TABLE template_values;
        DROP TABLE templates;
        ALTER TABLE templates_new RENAME TO templates;
        ALTER TABLE records_new RENAME TO records;
        ALTER TABLE template_values_new RENAME TO template_values;
        ALTER TABLE record_values_new RENAME TO record_values;
        CREATE INDEX records_by_time ON records (template_id, created_ms, id);
        """

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
