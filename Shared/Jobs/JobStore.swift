import Foundation
import Storage

/// The jobs of one service, in its database (shared by its replicas): what the Jobs rpcs read and the
/// runner writes.
///
/// The tables belong to the jobs machinery, not to the service: they are created by migrations of their own
/// track (`Database.migrate(_:track:)`), so a service adds jobs without renumbering its own migrations.
public struct JobStore: Sendable {
    public let database: Database

    /// The store on `database`, creating or upgrading its tables.
    public init(database: Database) throws {
        self.database = database
        try database.migrate(Self.migrations, track: "jobs")
    }

    static let migrations = [
        Migration(1, "jobs and their owners") { connection in
            try connection.executeScript(
                """
                CREATE TABLE job_owners (
                    id TEXT PRIMARY KEY,
                    machine TEXT NOT NULL,
                    pid INTEGER NOT NULL,
                    process_start INTEGER NOT NULL,
                    heartbeat_at REAL NOT NULL
                );
                CREATE TABLE jobs (
                    seq INTEGER PRIMARY KEY AUTOINCREMENT,
                    id TEXT NOT NULL UNIQUE,
                    kind TEXT NOT NULL,
                    state TEXT NOT NULL CHECK (state IN ('queued', 'running', 'succeeded', 'failed', 'cancelled')),
                    progress REAL NOT NULL DEFAULT 0,
                    message TEXT NOT NULL DEFAULT '',
                    created_at REAL NOT NULL,
                    started_at REAL,
                    finished_at REAL,
                    result_type TEXT,
                    result BLOB,
                    error_code INTEGER,
                    error_message TEXT,
                    cancel_requested INTEGER NOT NULL DEFAULT 0,
                    owner TEXT NOT NULL REFERENCES job_owners (id)
                );
                CREATE INDEX jobs_active ON jobs (state) WHERE state IN ('queued', 'running');
                CREATE INDEX jobs_kind ON jobs (kind, seq);
                """)
        },
        // Jobs recorded before have no user: admins see them.
        Migration(2, "the user who started a job") { connection in
            try connection.executeScript("ALTER TABLE jobs ADD COLUMN started_by TEXT;")
        },
    ]

    // MARK: Owners

    /// Records `owner` (or refreshes its row).
    public func register(_ owner: JobOwner) async throws {
        try await database.write { connection in
            try connection.execute(
                """
                INSERT INTO job_owners (id, machine, pid, process_start, heartbeat_at) VALUES (?, ?, ?, ?, ?)
                ON CONFLICT (id) DO UPDATE SET heartbeat_at = excluded.heartbeat_at
                """,
                [
                    owner.id, owner.machine, Int64(owner.pid), owner.processStart,
                    owner.heartbeatAt.timeIntervalSince1970,
                ])
        }
    }

    /// Refreshes `owner`'s heartbeat.
    public func heartbeat(_ ownerID: String, at now: Date = Date()) async throws {
        try await database.write { connection in
            try connection.execute(
                "UPDATE job_owners SET heartbeat_at = ? WHERE id = ?", [now.timeIntervalSince1970, ownerID])
        }
    }

    // MARK: Reading

    /// The job with `id`, or nil.
    public func job(_ id: String) async throws -> Job? {
        try await database.read { try $0.queryOne("SELECT * FROM jobs WHERE id = ?", [id]).map(Self.job(from:)) }
    }

    /// Jobs newest first: those in `states` (any when empty) of `kind` (any when nil), older than the job
    /// numbered `before` (a page token), at most `limit`; plus the token of the next page when there is one.
    /// `startedBy`: only the jobs that user started.
    public func list(
        states: Set<JobState> = [], kind: String? = nil, startedBy: String? = nil, limit: Int, before: Int64? = nil
    ) async throws
        -> (jobs: [Job], next: Int64?)
    {
        var conditions: [String] = []
        var arguments: [(any SQLConvertible)?] = []
        if let startedBy {
            conditions.append("started_by = ?")
            arguments.append(startedBy)
        }
        if !states.isEmpty {
            let sorted = states.map(\.rawValue).sorted()
            conditions.append("state IN (\(sorted.map { _ in "?" }.joined(separator: ", ")))")
            arguments += sorted.map { $0 }
        }
        if let kind {
            conditions.append("kind = ?")
            arguments.append(kind)
        }
        if let before {
            conditions.append("seq < ?")
            arguments.append(before)
        }
        let filter = conditions.isEmpty ? "" : "WHERE " + conditions.joined(separator: " AND ")
        let query = "SELECT * FROM jobs \(filter) ORDER BY seq DESC LIMIT ?"
        let rows = try await database.read { [arguments] in try $0.query(query, arguments + [limit + 1]) }
        let page = rows.prefix(limit)
        let jobs = try page.map(Self.job(from:))
        return (jobs, rows.count > limit ? page.last?.int64("seq") : nil)
    }

    // MARK: The runner's writes

    /// Records a new job (normally queued).
    public func insert(_ job: Job) async throws {
        try await database.write { connection in
            try connection.execute(
                "INSERT INTO jobs (id, kind, state, progress, message, created_at, owner, started_by) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    job.id, job.kind, job.state.rawValue, job.progress, job.message,
                    job.createdAt.timeIntervalSince1970, job.owner, job.startedBy,
                ])
        }
    }

    /// Removes a job that never ran (its lane refused it).
    public func delete(_ id: String) async throws {
        try await database.write { try $0.execute("DELETE FROM jobs WHERE id = ?", [id]) }
    }

    /// Moves a queued job to running; false when it is no longer queued (cancelled, or given up for dead).
    /// Synchronous: the runner calls it on the lane thread that is about to run the job.
    public func markRunning(_ id: String, at now: Date = Date()) throws -> Bool {
        try database.write { connection in
            try connection.execute(
                "UPDATE jobs SET state = 'running', started_at = ? WHERE id = ? AND state = 'queued'",
                [now.timeIntervalSince1970, id])
            return connection.changes == 1
        }
    }

    /// Records the progress of running jobs (one transaction for all of them); ended jobs are left alone.
    public func recordProgress(_ updates: [(id: String, progress: Double, message: String)]) async throws {
        guard !updates.isEmpty else { return }
        try await database.write { [updates] connection in
            let statement = try connection.prepare(
                "UPDATE jobs SET progress = ?, message = ? WHERE id = ? AND state = 'running'")
            for update in updates { try statement.execute([update.progress, update.message, update.id]) }
        }
    }

    /// Ends an active job: `succeeded` with `result`, or `failed`/`cancelled` with `failure`. Returns false
    /// when the job had already ended (e.g. given up for dead while it ran); its record is then kept.
    /// Synchronous, for the lane thread that ran the job; `finishing` is the async form.
    @discardableResult
    public func finish(_ id: String, _ outcome: JobOutcome, at now: Date = Date()) throws -> Bool {
        try database.write { try Self.finish(id, outcome, now, $0) }
    }

    /// `finish` for callers on Swift's cooperative pool.
    @discardableResult
    public func finishing(_ id: String, _ outcome: JobOutcome, at now: Date = Date()) async throws -> Bool {
        try await database.write { try Self.finish(id, outcome, now, $0) }
    }

    private static func finish(_ id: String, _ outcome: JobOutcome, _ now: Date, _ connection: Connection) throws
        -> Bool
    {
        try connection.execute(
            """
            UPDATE jobs SET state = ?, finished_at = ?, progress = coalesce(?, progress),
                result_type = ?, result = ?, error_code = ?, error_message = ?
            WHERE id = ? AND state IN ('queued', 'running')
            """,
            [
                outcome.state.rawValue, now.timeIntervalSince1970, outcome.state == .succeeded ? 1.0 : nil,
                outcome.result?.typeName, outcome.result?.bytes, outcome.failure.map { Int64($0.code) },
                outcome.failure?.message, id,
            ])
        return connection.changes == 1
    }

    /// Asks for a job to be cancelled (its owner's runner sees the flag); returns the job, nil when unknown.
    public func requestCancel(_ id: String) async throws -> Job? {
        try await database.write { connection in
            try connection.execute(
                "UPDATE jobs SET cancel_requested = 1 WHERE id = ? AND state IN ('queued', 'running')", [id])
            return try connection.queryOne("SELECT * FROM jobs WHERE id = ?", [id]).map(Self.job(from:))
        }
    }

    /// Active jobs of `owner` that someone asked to cancel.
    public func cancelRequests(owner: String) async throws -> [String] {
        try await database.read { connection in
            try connection.query(
                "SELECT id FROM jobs WHERE owner = ? AND cancel_requested = 1 AND state IN ('queued', 'running')",
                [owner]
            ).compactMap { $0.string(0) }
        }
    }

    // MARK: Jobs of dead processes

    /// Fails every active job (or only job `id`) whose owner's process is gone (see `JobOwner`), with
    /// UNAVAILABLE; returns the ids it failed. Cheap when there is nothing to do: one read of the active jobs.
    @discardableResult
    public func failAbandoned(only id: String? = nil, lease: TimeInterval, now: Date = Date()) async throws -> [String]
    {
        let active = try await database.read { connection in
            try connection.query(
                """
                SELECT jobs.id, jobs.owner, o.machine, o.pid, o.process_start, o.heartbeat_at
                FROM jobs LEFT JOIN job_owners o ON o.id = jobs.owner
                WHERE jobs.state IN ('queued', 'running') AND (? IS NULL OR jobs.id = ?)
                """, [id, id])
        }
        var dead: [(id: String, owner: String, why: String)] = []
        for row in active {
            guard let jobID = row.string(0), let ownerID = row.string(1) else { continue }
            guard let machine = row.string(2), let pid = row.int64(3), let start = row.int64(4),
                let beat = row.double(5)
            else {
                dead.append((jobID, ownerID, "its runner is not recorded"))
                continue
            }
            let owner = JobOwner(
                id: ownerID, machine: machine, pid: Int32(truncatingIfNeeded: pid), processStart: start,
                heartbeatAt: Date(timeIntervalSince1970: beat))
            if !owner.isAlive(now: now, lease: lease) {
                let why =
                    machine == ProcessLiveness.machine
                    ? "the replica running it (pid \(pid)) stopped before it finished"
                    : "the replica running it (pid \(pid) elsewhere) sent no heartbeat for \(Int(now.timeIntervalSince(owner.heartbeatAt))) s"
                dead.append((jobID, ownerID, why))
            }
        }
        guard !dead.isEmpty else { return [] }
        return try await database.write { [dead] connection in
            var failed: [String] = []
            for job in dead {
                // Only if the same owner still has it active: it may have finished since the read.
                try connection.execute(
                    """
                    UPDATE jobs SET state = 'failed', finished_at = ?, error_code = ?, error_message = ?
                    WHERE id = ? AND owner = ? AND state IN ('queued', 'running')
                    """,
                    [now.timeIntervalSince1970, Int64(JobFailure.unavailableCode), job.why, job.id, job.owner])
                if connection.changes == 1 { failed.append(job.id) }
            }
            return failed
        }
    }

    // MARK: Rows

    static func job(from row: Row) throws -> Job {
        let state = try row.value("state", as: String.self)
        guard let jobState = JobState(rawValue: state) else {
            throw StorageError(.typeMismatch, message: "unknown job state \"\(state)\"")
        }
        let result = row.string("result_type").map { JobResult(typeName: $0, bytes: row.blob("result") ?? []) }
        let failure = row.int64("error_code").map {
            JobFailure(code: UInt32(truncatingIfNeeded: $0), message: row.string("error_message") ?? "")
        }
        return Job(
            id: try row.value("id", as: String.self), kind: try row.value("kind", as: String.self), state: jobState,
            progress: row.double("progress") ?? 0, message: row.string("message") ?? "",
            createdAt: Date(timeIntervalSince1970: try row.value("created_at", as: Double.self)),
            startedAt: row.double("started_at").map(Date.init(timeIntervalSince1970:)),
            finishedAt: row.double("finished_at").map(Date.init(timeIntervalSince1970:)),
            result: result, failure: failure, cancelRequested: row.bool("cancel_requested") ?? false,
            owner: try row.value("owner", as: String.self), startedBy: row.string("started_by"))
    }
}
