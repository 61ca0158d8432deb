import Storage

/// The health database's schema: the same file layout serves the server (many users) and a device's local
/// store (one user, plus its sync cursors), so both sides share the code that reads and writes samples.
///
/// - `samples`: one row per live sample, keyed by (user, client-chosen UUID); values in canonical units;
///   `anchor` is the user's change-log position of the insert; `pulled` marks rows a device got from the
///   server (they are not pushed back); `cell` is the 15-minute UTC cell the sample rolls up into, NULL for
///   cumulative samples that span a cell boundary and for categories (statistics read those one by one).
/// - `tombstones`: deleted UUIDs with the anchor of the deletion, so deletions travel through sync and a
///   deleted UUID is never revived.
/// - `cells`: per user, type and 15-minute UTC cell the sum, count, min and max of the samples whose `cell` it
///   is, kept in the same transaction as the samples. Every time zone in use today has an offset that is a
///   multiple of 15 minutes, so hour, day, week and month buckets in any zone are unions of whole cells, and a
///   year of minute-level steps (525,600 samples) is 35,040 cell rows to read instead of 525,600 samples.
/// - `type_spans`: the longest sample per user and type, the lower bound that lets an overlap query use the
///   start-time index (`start >= from - longest`).
/// - `users`, `tokens` (SHA-256 of the token only), `push_cursors` (server: how far each device's push has
///   been committed), `sync_state` (device: its own push anchor and the server anchor it pulled to, per scope).
/// - Version 2, a device store belongs to one user: `store_owners` (server: each device store's id bound to the
///   first user that synced it — the user, not the token); `device.owner_id`/`owner_name` (device: that user, as
///   the server named it) and `owner_tokens` (device: SHA-256 of tokens known to be the owner's, so local
///   commands check a known token offline). A server upgraded from version 1 binds each store that only one user
///   ever pushed from to that user; a store pushed under several users (the leak this closes) and a device store
///   without an owner are bound by their next sync.
/// - Version 3, `samples.pushed_by`/`tombstones.pushed_by` (server): the device store whose push wrote the row,
///   so that store's pull skips it (rows written before have none and are sent, as before).
public enum HealthSchema {
    public static let migrations: [Migration] = [
        Migration(1, "users, samples, change log, rollups, sync cursors") { db in try db.executeScript(version1) },
        Migration(2, "device stores bound to their owner") { db in try db.executeScript(version2) },
        Migration(3, "rows remember the device store that pushed them") { db in try db.executeScript(version3) },
    ]

    /// The cell length: 15 minutes, the granularity of every UTC offset in use.
    public static let cellMilliseconds: Int64 = 900_000

    private static let version1 = """
        CREATE TABLE users (
            id INTEGER PRIMARY KEY,
            name TEXT NOT NULL UNIQUE,
            created_ms INTEGER NOT NULL,
            -- The last anchor handed out in this user's change log; anchors only grow.
            last_anchor INTEGER NOT NULL DEFAULT 0);
        CREATE TABLE tokens (
            hash BLOB PRIMARY KEY,
            user_id INTEGER NOT NULL REFERENCES users (id) ON DELETE CASCADE,
            created_ms INTEGER NOT NULL,
            revoked_ms INTEGER);
        CREATE TABLE samples (
            user_id INTEGER NOT NULL REFERENCES users (id) ON DELETE CASCADE,
            uuid BLOB NOT NULL,
            type INTEGER NOT NULL,
            value REAL NOT NULL,
            start_ms INTEGER NOT NULL,
            end_ms INTEGER NOT NULL,
            source TEXT NOT NULL,
            zone TEXT,
            metadata TEXT,
            anchor INTEGER NOT NULL,
            pulled INTEGER NOT NULL DEFAULT 0,
            cell INTEGER,
            PRIMARY KEY (user_id, uuid));
        CREATE INDEX samples_by_time ON samples (user_id, type, start_ms);
        CREATE INDEX samples_by_anchor ON samples (user_id, anchor);
        CREATE INDEX samples_unrolled ON samples (user_id, type, start_ms) WHERE cell IS NULL;
        CREATE TABLE tombstones (
            user_id INTEGER NOT NULL REFERENCES users (id) ON DELETE CASCADE,
            uuid BLOB NOT NULL,
            type INTEGER,
            start_ms INTEGER,
            end_ms INTEGER,
            anchor INTEGER NOT NULL,
            pulled INTEGER NOT NULL DEFAULT 0,
            deleted_ms INTEGER NOT NULL,
            PRIMARY KEY (user_id, uuid));
        CREATE INDEX tombstones_by_anchor ON tombstones (user_id, anchor);
        CREATE TABLE cells (
            user_id INTEGER NOT NULL,
            type INTEGER NOT NULL,
            cell INTEGER NOT NULL,
            total REAL NOT NULL,
            count INTEGER NOT NULL,
            minimum REAL NOT NULL,
            maximum REAL NOT NULL,
            PRIMARY KEY (user_id, type, cell)) WITHOUT ROWID;
        CREATE TABLE type_spans (
            user_id INTEGER NOT NULL,
            type INTEGER NOT NULL,
            longest_ms INTEGER NOT NULL,
            PRIMARY KEY (user_id, type)) WITHOUT ROWID;
        CREATE TABLE push_cursors (
            user_id INTEGER NOT NULL REFERENCES users (id) ON DELETE CASCADE,
            device TEXT NOT NULL,
            scope TEXT NOT NULL,
            anchor INTEGER NOT NULL,
            PRIMARY KEY (user_id, device, scope));
        CREATE TABLE sync_state (
            scope TEXT PRIMARY KEY,
            pushed_anchor INTEGER NOT NULL DEFAULT 0,
            pulled_anchor INTEGER NOT NULL DEFAULT 0);
        CREATE TABLE device (id INTEGER PRIMARY KEY CHECK (id = 1), device_id TEXT NOT NULL);
        """

    private static let version2 = """
        CREATE TABLE store_owners (
            device TEXT PRIMARY KEY,
            user_id INTEGER NOT NULL REFERENCES users (id) ON DELETE CASCADE,
            bound_ms INTEGER NOT NULL);
        INSERT INTO store_owners (device, user_id, bound_ms)
            SELECT device, min(user_id), CAST(strftime('%s', 'now') AS INTEGER) * 1000 FROM push_cursors
            GROUP BY device HAVING count(DISTINCT user_id) = 1;
        ALTER TABLE device ADD COLUMN owner_id INTEGER;
        ALTER TABLE device ADD COLUMN owner_name TEXT;
        CREATE TABLE owner_tokens (hash BLOB PRIMARY KEY);
        """

    private static let version3 = """
        ALTER TABLE samples ADD COLUMN pushed_by TEXT;
        ALTER TABLE tombstones ADD COLUMN pushed_by TEXT;
        """
}
