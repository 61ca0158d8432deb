import Dqlite
import Synchronization
import WorkLane

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// An SQLite database: one writer connection and a small pool of reader connections, safe to share
/// between threads and tasks. Several processes (replicas of a service) may open the same file.
///
/// Writes serialize in-process on the single writer connection and across processes through
/// `BEGIN IMMEDIATE` plus the busy timeout. Readers see a consistent snapshot for the whole of a `read`.
/// `read` and `write` are not reentrant: calling either inside another's closure throws `.misuse`.
///
/// Each comes in two forms, as in GRDB: the synchronous one runs on the calling thread and blocks it while
/// SQLite waits (for a reader slot, the write lock, the disk); `try await read { }` / `write { }` run the
/// same closure on the database's own threads (one writer, one per reader) and suspend the calling task
/// meanwhile, so tasks on Swift's cooperative pool never block on the database. Async callers use the
/// async form; the synchronous one stays for code that already runs on a thread of its own.
public final class Database: Sendable {
    private let writer: ConnectionPool
    private let readers: ConnectionPool
    /// The threads behind the async `write` (one: writes serialize anyway) and `read` (one per reader).
    private let writeThread: WorkLane
    private let readThreads: WorkLane
    /// A connection that never writes, so its `PRAGMA data_version` moves with every other commit; on a
    /// cluster it is replaced when the leader changes, and `generation` counts those replacements.
    private let observer: Mutex<(handle: any StorageHandle, generation: Int64)>
    private let openObserver: @Sendable () throws -> any StorageHandle
    /// On a cluster: how long a read is tried again on the new leader after the old one went away.
    private let readRetryWindow: Duration?
    /// Threads currently inside `read` or `write`, to report nesting instead of deadlocking.
    private let activeThreads = Mutex<[pthread_t]>([])

    /// Opens (creating if needed) the database file at `path` in WAL mode, with `busy_timeout`,
    /// `foreign_keys=ON` and `synchronous=FULL`, then applies the pending `migrations`.
    ///
    /// Throws `.corrupt` for a file that is not an SQLite database and `.migration` when a migration fails
    /// or the file's schema is newer than the last of `migrations`.
    public convenience init(
        path: String, migrations: [Migration], readers: Int = 4, busyTimeout: Duration = .seconds(5)
    ) throws {
        try self.init(
            location: path, isMemory: false, migrations: migrations, readers: readers, busyTimeout: busyTimeout)
    }

    /// A database replicated by a dqlite cluster, reached through `client` (its leader): the same API, the
    /// same transactions, every statement a round trip to the leader. The `migrations` run once per cluster:
    /// each runs in an IMMEDIATE transaction on the leader that re-reads the version first, so replicas that
    /// start together apply each step once. Reads that lose the leader are run again on the new one (for up to
    /// the client's leaderWait); writes never are (`.unavailable` when nothing was written, `.outcomeUnknown`
    /// when a commit went unanswered).
    public convenience init(
        cluster client: DqliteClient, migrations: [Migration], readers: Int = 4, busyTimeout: Duration = .seconds(5)
    ) throws {
        try self.init(migrations: migrations, readers: readers, readRetryWindow: client.leaderWait) { role in
            try DqliteHandle(client: client, busyTimeout: busyTimeout, readOnly: role == .reader)
        }
    }

    /// A private in-memory SQLite database, shared by this instance's connections only. It has no WAL, so a commit
    /// waits for open reads to finish. (Tests that run on both backends open theirs through a `DatabaseFactory`.)
    public static func inMemory(migrations: [Migration] = []) throws -> Database {
        let name = "file:/menagerie-\(UInt64.random(in: .min ... .max))?vfs=memdb"
        return try Database(
            location: name, isMemory: true, migrations: migrations, readers: 4, busyTimeout: .seconds(5))
    }

    /// Whether this database is replicated by a dqlite cluster (rather than an SQLite file or memory): what a store
    /// that lays its data out differently on a cluster (payloads beside the rows rather than in them) asks.
    public var isReplicated: Bool { readRetryWindow != nil }

    private convenience init(
        location: String, isMemory: Bool, migrations: [Migration], readers: Int, busyTimeout: Duration
    ) throws {
        try self.init(migrations: migrations, readers: readers, readRetryWindow: nil) { role in
            let handle = try SQLiteHandle(location: location, uri: isMemory, busyTimeout: busyTimeout)
            try Self.configure(handle, as: role, walMode: !isMemory, busyTimeout: busyTimeout)
            return handle
        }
    }

    private init(
        migrations: [Migration], readers: Int, readRetryWindow: Duration?,
        open: @escaping @Sendable (Role) throws -> any StorageHandle
    ) throws {
        guard readers >= 1 else { throw StorageError(.misuse, message: "a Database needs at least one reader") }
        let writerHandle = try open(.writer)
        try Migration.run(migrations, on: writerHandle)
        writer = ConnectionPool(capacity: 1, idle: [writerHandle]) { try open(.writer) }
        self.readers = ConnectionPool(capacity: readers) { try open(.reader) }
        openObserver = { try open(.reader) }
        observer = Mutex((try open(.reader), 0))
        self.readRetryWindow = readRetryWindow
        // Queued work is bounded by the callers waiting for it, not by the pool.
        writeThread = WorkLane(name: "storage-writer", threads: 1, queueLimit: 1 << 40)
        readThreads = WorkLane(name: "storage-reader", threads: readers, queueLimit: 1 << 40)
    }

    /// Applies the pending `migrations` of a schema that shared code keeps beside the service's own (the jobs
    /// tables): its versions count in a track of their own, named `track`, not in `PRAGMA user_version`, so
    /// the service's migrations and the shared code's never have to agree on numbers. Safe to call from
    /// several processes at once, as `init`'s migrations are.
    public func migrate(_ migrations: [Migration], track: String) throws {
        try writer.withHandle { try Migration.run(migrations, on: $0, track: .named(track)) }
    }

    /// Runs `body` in a read-only transaction (`BEGIN DEFERRED … COMMIT`): it sees one consistent snapshot.
    /// On a cluster, a read cut off by a change of leader (`.unavailable`) runs again, whole, on the new one.
    public func read<T>(_ body: (Connection) throws -> T) throws -> T {
        try retryingOnCluster { try withConnection(from: readers, begin: "BEGIN DEFERRED", body) }
    }

    /// Runs `work` again while it fails `.unavailable` on a cluster (a lost leader), for up to the client's
    /// leaderWait; once on a file. Only for work that is safe to repeat.
    private func retryingOnCluster<T>(_ work: () throws -> T) throws -> T {
        guard let readRetryWindow else { return try work() }
        let giveUp = ContinuousClock.now + readRetryWindow
        var pause = Duration.milliseconds(10)
        while true {
            do {
                return try work()
            } catch let error as StorageError where error.kind == .unavailable && ContinuousClock.now + pause < giveUp {
                usleep(UInt32(pause / .microseconds(1)))
                pause = min(pause * 2, .milliseconds(500))
            }
        }
    }

    /// Runs `body` in a write transaction (`BEGIN IMMEDIATE … COMMIT`); any error it throws rolls everything back
    /// and is rethrown as is. Throws `.busy` when another process holds the write lock past the busy timeout.
    ///
    /// On a cluster, a write whose BEGIN found no leader (the pooled session was on the old one) starts again
    /// on the new leader: `body` had not run. Once `body` has run, nothing is repeated.
    public func write<T>(_ body: (Connection) throws -> T) throws -> T {
        guard let readRetryWindow else { return try withConnection(from: writer, begin: "BEGIN IMMEDIATE", body) }
        let giveUp = ContinuousClock.now + readRetryWindow
        var pause = Duration.milliseconds(10)
        while true {
            var started = false
            do {
                return try withConnection(from: writer, begin: "BEGIN IMMEDIATE") { connection in
                    started = true
                    return try body(connection)
                }
            } catch let error as StorageError
                where error.kind == .unavailable && !started && ContinuousClock.now + pause < giveUp
            {
                usleep(UInt32(pause / .microseconds(1)))
                pause = min(pause * 2, .milliseconds(500))
            }
        }
    }

    /// Runs `body` in a read-only transaction on one of the database's reader threads, suspending the calling
    /// task meanwhile. Cancelling the task before a thread took the read throws `CancellationError` without
    /// running it; a read cancelled while it runs finishes, and then throws `CancellationError` too.
    public func read<T: Sendable>(_ body: @escaping @Sendable (Connection) throws -> T) async throws -> T {
        try await readThreads.run {
            let result = try self.read(body)
            if WorkLane.isCurrentWorkCancelled { throw CancellationError() }
            return result
        }
    }

    /// Runs `body` in a write transaction on the database's writer thread, suspending the calling task
    /// meanwhile. An error thrown by `body` rolls everything back and is rethrown. Cancelling the task before
    /// the write started throws `CancellationError` without running it; a write cancelled while it runs is
    /// rolled back when `body` returns and throws `CancellationError`: a cancelled write never commits.
    public func write<T: Sendable>(_ body: @escaping @Sendable (Connection) throws -> T) async throws -> T {
        try await writeThread.run {
            try self.write { connection in
                let result = try body(connection)
                if WorkLane.isCurrentWorkCancelled { throw CancellationError() }
                return result
            }
        }
    }

    /// A token that changes whenever a transaction commits on this database, from this process or another:
    /// compare it with the last one seen to know when to reload in-memory caches.
    public var dataVersion: Int64 {
        get throws {
            try retryingOnCluster {
                try observer.withLock { observer in
                    if !observer.handle.isReusable {  // a cluster's session that lost its leader
                        observer = (try openObserver(), observer.generation + 1)
                    }
                    let version = try observer.handle.statement("PRAGMA data_version").run([], rows: .one)[0]
                        .value(at: 0, as: Int64.self)
                    return observer.generation << 40 | version
                }
            }
        }
    }

    private func withConnection<T>(
        from pool: ConnectionPool, begin: String, _ body: (Connection) throws -> T
    ) throws -> T {
        let thread = pthread_self()
        let isNested = activeThreads.withLock { threads in
            if threads.contains(where: { pthread_equal($0, thread) != 0 }) { return true }
            threads.append(thread)
            return false
        }
        guard !isNested else {
            throw StorageError(
                .misuse,
                message: "read/write called inside a read/write closure of the same Database; "
                    + "use the Connection that closure received")
        }
        defer { activeThreads.withLock { threads in threads.removeAll { pthread_equal($0, thread) != 0 } } }
        return try pool.withHandle { try $0.inTransaction(begin: begin, body) }
    }

    private enum Role { case writer, reader }

    /// Runs `body` again while it fails with SQLITE_BUSY, for up to `timeout`. Needed where SQLite
    /// answers BUSY without waiting: two connections switching a new file to WAL at once (replicas
    /// starting together) would deadlock, so one of them is refused at once, busy timeout or not.
    private static func retryingWhileBusy<T>(for timeout: Duration, _ body: () throws -> T) throws -> T {
        let giveUp = ContinuousClock.now + timeout
        var pause = Duration.milliseconds(1)
        while true {
            do {
                return try body()
            } catch let error as StorageError where error.kind == .busy && ContinuousClock.now + pause < giveUp {
                usleep(UInt32(pause / .microseconds(1)))
                pause = min(pause * 2, .milliseconds(50))
            }
        }
    }

    private static func configure(_ handle: SQLiteHandle, as role: Role, walMode: Bool, busyTimeout: Duration) throws {
        try handle.executeScript("PRAGMA foreign_keys = ON; PRAGMA synchronous = FULL")
        switch role {
        case .reader:
            try handle.executeScript("PRAGMA query_only = ON")
        case .writer where walMode:
            // Reads the file header: this is where a file that is not a database is caught.
            let mode = try retryingWhileBusy(for: busyTimeout) {
                try handle.prepared("PRAGMA journal_mode = WAL").run([], rows: .one).first?.string(0)
            }
            guard mode == "wal" else {
                throw StorageError(
                    .open, message: "could not switch to WAL mode (journal_mode is \(mode ?? "unknown"))")
            }
        case .writer:
            break
        }
    }
}
