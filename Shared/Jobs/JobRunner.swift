import Base
import Dispatch
import Foundation
import Storage
import Synchronization
import WorkLane

/// How many jobs of a service run at once and how many may be queued or running (`--job-threads`,
/// `--max-jobs`, `--max-jobs-per-user`).
public struct JobLimits: Sendable {
    public var threads: Int
    public var maxActive: Int
    public var maxActivePerSubmitter: Int

    public init(
        threads: Int = max(1, ProcessInfo.processInfo.activeProcessorCount / 2), maxActive: Int = 256,
        maxActivePerSubmitter: Int = 16
    ) {
        self.threads = threads
        self.maxActive = maxActive
        self.maxActivePerSubmitter = maxActivePerSubmitter
    }
}

/// Runs jobs of one process: records each in the store, runs its work on the heavy-work lane, keeps its
/// progress in the database (throttled), honours cancellation (from this replica or, through the database,
/// from another) and records the outcome.
///
/// Progress is kept in memory as the work reports it and written every `progressInterval` by one
/// background task for all of the runner's jobs, never from the work's own thread: the work may be inside
/// a write transaction of the same database (an import), where a write of its own would deadlock. Readers
/// on this replica see the in-memory figures at once (`snapshot`); other replicas see them once written.
public final class JobRunner: Sendable {
    public struct Options: Sendable {
        /// How often reported progress is written (and cancel requests from other replicas are read).
        public var progressInterval: Duration = .milliseconds(250)
        /// How often the owner's heartbeat is refreshed while the runner has active jobs.
        public var heartbeatInterval: Duration = .seconds(5)
        /// How long an owner that the OS cannot be asked about (another pid namespace) counts as alive
        /// after its last heartbeat.
        public var lease: TimeInterval = 30
        /// How often `watch` looks at the job.
        public var watchInterval: Duration = .milliseconds(200)
        /// Jobs queued or running at once on this runner, and from one submitter (a user, or a client
        /// address where calls carry no identity); past them `start` throws `JobQueueFull`.
        public var maxActiveJobs = JobLimits().maxActive
        public var maxActiveJobsPerSubmitter = JobLimits().maxActivePerSubmitter

        public init() {}
    }

    public let store: JobStore
    public let lane: WorkLane
    public let options: Options
    public let owner: JobOwner
    /// Turns what a job's work threw into the status it fails with.
    private let failureMapping: @Sendable (any Error) -> JobFailure
    private let state = Mutex(State())

    private struct State {
        var jobs: [String: ActiveJob] = [:]
        var tickerRunning = false
        var registered = false
        /// Set by `shutDown`: new jobs are refused.
        var stopping = false
        /// Jobs queued or running per submitter, and over all (slots are taken before anything is recorded).
        var activePerSubmitter: [String: Int] = [:]
        var activeSlots = 0
    }

    /// Thrown by `start` when this runner (or the submitter) has as many jobs queued or running as it
    /// may: RESOURCE_EXHAUSTED, with when to try again.
    public struct JobQueueFull: CategorizedError, CustomStringConvertible {
        public let limit: Int
        public let submitter: String?
        public var category: ErrorCategory { .resourceExhausted }
        public var message: String {
            let whose =
                submitter.map { "\($0) has \(limit) jobs queued or running" }
                ?? "\(limit) jobs are queued or running on this replica"
            return "\(whose), the most it takes; retry once one has finished (watch them with `jobs list`)"
        }
        public var description: String { message }
    }

    /// Thrown by `start` once the runner is shutting down with its service.
    public struct Stopped: CategorizedError, CustomStringConvertible {
        public var category: ErrorCategory { .unavailable }
        public var message: String { "the service is shutting down and starts no more jobs; try another replica" }
        public var description: String { message }
    }

    /// A runner whose jobs run on `lane`. `failureMapping` turns an error thrown by a job's work into its
    /// status (the RPC layer passes one that knows its error types); by default `JobFailureConvertible`
    /// errors carry their own and anything else is INTERNAL.
    public init(
        store: JobStore, lane: WorkLane, options: Options = Options(),
        failureMapping: @escaping @Sendable (any Error) -> JobFailure = JobRunner.defaultFailure
    ) {
        self.store = store
        self.lane = lane
        self.options = options
        self.failureMapping = failureMapping
        owner = JobOwner.current()
    }

    public static let defaultFailure: @Sendable (any Error) -> JobFailure = { error in
        (error as? any JobFailureConvertible)?.jobFailure
            ?? JobFailure(code: JobFailure.internalCode, message: "\(error)")
    }

    /// Registers this runner as a job owner and fails the jobs that processes now gone left active: call
    /// once when the service starts (before it serves), so a restarted replica reports the jobs it was
    /// running when it died as failed. Returns the ids it failed.
    @discardableResult
    public func recoverAbandonedJobs() async throws -> [String] {
        try await registerOnce()
        return try await store.failAbandoned(lease: options.lease)
    }

    // MARK: Starting and cancelling

    /// Records a job of `kind` (QUEUED) and queues `work` on the lane; returns the job at once. The work runs
    /// on a lane thread (it may block) and reports through its `JobContext`; what it returns is the job's
    /// result, what it throws its failure (`CancellationError` after a cancel request: CANCELLED).
    /// Throws `WorkLane.QueueFull` (and records nothing) when the lane's queue is full.
    /// `submitter` (the caller's user, else its address) is held to `maxActiveJobsPerSubmitter`.
    /// `user` is recorded as who started it (see `Job.startedBy`).
    public func start(
        kind: String, submitter: String? = nil, user: String? = nil,
        work: @escaping @Sendable (JobContext) throws -> JobResult?
    ) async throws -> Job {
        guard !state.withLock({ $0.stopping }) else { throw Stopped() }
        try takeSlot(submitter)
        var slotHeld = true
        defer { if slotHeld { releaseSlot(submitter) } }
        // With a fresh heartbeat: after a quiet spell the last one may be older than the lease.
        try await store.register(
            JobOwner(
                id: owner.id, machine: owner.machine, pid: owner.pid, processStart: owner.processStart,
                heartbeatAt: Date()))
        state.withLock { $0.registered = true }
        let job = Job(id: UUID().uuidString.lowercased(), kind: kind, owner: owner.id, startedBy: user)
        try await store.insert(job)
        let active = ActiveJob(job, submitter: submitter)
        // Checked again with the job added, in one step: a shutdown that began meanwhile must see every job.
        let admitted = state.withLock { state -> Bool in
            guard !state.stopping else { return false }
            state.jobs[job.id] = active
            return true
        }
        guard admitted else {
            try? await store.delete(job.id)
            throw Stopped()
        }
        do {
            let ticket = try lane.submit { cancelled in
                if cancelled {
                    self.endWithoutRunning(active)
                } else {
                    self.execute(active, work)
                }
            }
            active.setTicket(ticket)
        } catch {
            state.withLock { _ = $0.jobs.removeValue(forKey: job.id) }
            try? await store.delete(job.id)
            throw error
        }
        slotHeld = false  // the job's now: `done` gives it back
        startTickerIfNeeded()
        return job
    }

    /// Asks job `id` to stop and returns it as it is then. A queued job of this runner ends CANCELLED before
    /// this returns; a running one when its work next checks; one of another replica when that replica reads
    /// the request (within its `progressInterval`). Throws `JobNotFound`.
    public func cancel(_ id: String) async throws -> Job {
        guard try await store.requestCancel(id) != nil else { throw JobNotFound(id: id) }
        if let active = state.withLock({ $0.jobs[id] }) {
            active.requestCancel()
            // A queued job ends at once; wait for that to be recorded (briefly: a running job may take long).
            await active.waitUntilEnded(orAfter: .milliseconds(500))
        }
        return try await snapshot(id)
    }

    // MARK: Reading

    /// Job `id` as it is now: from the database (failing it first when its process is gone), with the
    /// progress its work reported in memory when it runs here. Throws `JobNotFound`.
    public func snapshot(_ id: String) async throws -> Job {
        try await store.failAbandoned(only: id, lease: options.lease)
        guard var job = try await store.job(id) else { throw JobNotFound(id: id) }
        if job.state == .running, let active = state.withLock({ $0.jobs[id] }) {
            let (progress, message) = active.progress
            job.progress = progress
            job.message = message
        }
        return job
    }

    /// Sends job `id` now, then each time it changes (looking every `watchInterval`), until it has ended;
    /// the last job sent is in an end state. Throws `JobNotFound`, or what `send` throws.
    public func watch(_ id: String, _ send: (Job) async throws -> Void) async throws {
        var last: Job?
        while true {
            let job = try await snapshot(id)
            if job != last {
                try await send(job)
                last = job
            }
            if job.state.isFinished { return }
            try await Task.sleep(for: options.watchInterval)
        }
    }

    /// Jobs newest first (see `JobStore.list`), after failing those of processes gone.
    public func list(
        states: Set<JobState> = [], kind: String? = nil, startedBy: String? = nil, limit: Int, before: Int64? = nil
    ) async throws
        -> (jobs: [Job], next: Int64?)
    {
        try await store.failAbandoned(lease: options.lease)
        return try await store.list(states: states, kind: kind, startedBy: startedBy, limit: limit, before: before)
    }

    /// Ids of the jobs this runner has queued or running.
    public var activeJobIDs: [String] { state.withLock { Array($0.jobs.keys) } }

    // MARK: Shutting down

    /// Stops the runner as its service shuts down, so that no job of this process is left RUNNING or lost:
    /// new jobs are refused (`Stopped`), queued ones leave the lane, running ones are asked to stop (their
    /// work sees `isCancelled`) and get up to `grace` to notice. Each ends FAILED with UNAVAILABLE and
    /// `shutdownFailure`'s message, unless it finished first; one whose work still runs after `grace` is
    /// recorded so all the same (its work's own end then changes nothing). FAILED with UNAVAILABLE, as for
    /// a replica that was killed, rather than CANCELLED: nobody asked for it, and the code tells a client to
    /// try again. Calling it again only waits again.
    public func shutDown(grace: Duration) async {
        let jobs = state.withLock { state -> [ActiveJob] in
            state.stopping = true
            return Array(state.jobs.values)
        }
        for job in jobs { job.requestShutdown() }
        let deadline = ContinuousClock.now + grace
        for job in jobs { await job.waitUntilEnded(orAfter: deadline - .now) }
        for job in state.withLock({ Array($0.jobs.values) }) {
            let failure = JobFailure(
                code: JobFailure.unavailableCode,
                message: Self.shutdownFailure.message + " (its work did not stop within the \(grace) grace period)")
            for attempt in 0..<Self.recordAttempts {
                if (try? await store.finishing(job.id, .failed(failure))) != nil { break }
                try? await Task.sleep(for: Self.pause(attempt))
            }
        }
    }

    /// How a job stopped by `shutDown` ends.
    public static let shutdownFailure = JobFailure(
        code: JobFailure.unavailableCode, message: "the service shut down before the job finished; start it again")

    /// The runner as a background service of its service: it waits while the service serves and, when the
    /// service stops, ends the runner's jobs (`shutDown(grace:)`).
    public func backgroundService(grace: Duration) -> any BackgroundService {
        JobsShutdown(runner: self, grace: grace)
    }

    // MARK: Running

    /// On a lane thread: marks the job running, runs the work, records the outcome.
    private func execute(_ active: ActiveJob, _ work: @Sendable (JobContext) throws -> JobResult?) {
        defer { done(active) }
        if active.isCancelRequested {
            record(active, active.stoppedOutcome)
            return
        }
        do {
            guard try store.markRunning(active.id) else { return }  // ended meanwhile (cancelled elsewhere)
        } catch {
            record(
                active,
                .failed(JobFailure(code: JobFailure.unavailableCode, message: "could not start the job: \(error)")))
            return
        }
        active.markRunning()
        let outcome: JobOutcome
        do {
            outcome = .succeeded(try work(JobContext(active)))
        } catch is CancellationError where active.isCancelRequested {
            outcome = active.stoppedOutcome
        } catch {
            outcome = .failed(failureMapping(error))
        }
        record(active, outcome)
    }

    /// The lane let go of a queued job without running it: cancelled, or the lane shut down.
    private func endWithoutRunning(_ active: ActiveJob) {
        let outcome: JobOutcome =
            active.isCancelRequested
            ? active.stoppedOutcome
            : .failed(JobFailure(code: JobFailure.unavailableCode, message: "the service stopped before the job ran"))
        Task {
            defer { self.done(active) }
            for attempt in 0..<Self.recordAttempts {
                do {
                    try await self.store.finishing(active.id, outcome)
                    return
                } catch {
                    try? await Task.sleep(for: Self.pause(attempt))
                }
            }
        }
    }

    /// Records the outcome, retrying while the database is busy: a job whose end is never written would
    /// look RUNNING for as long as this process lives.
    private func record(_ active: ActiveJob, _ outcome: JobOutcome) {
        for attempt in 0..<Self.recordAttempts {
            do {
                try store.finish(active.id, outcome)
                return
            } catch {
                usleep(UInt32(Self.pause(attempt) / .microseconds(1)))
            }
        }
    }

    private static let recordAttempts = 20
    private static func pause(_ attempt: Int) -> Duration { .milliseconds(min(50 << min(attempt, 5), 1000)) }

    private func done(_ active: ActiveJob) {
        state.withLock { _ = $0.jobs.removeValue(forKey: active.id) }
        releaseSlot(active.submitter)
        active.markEnded()
    }

    /// Takes a place for one more job of `submitter`, or throws `JobQueueFull`.
    private func takeSlot(_ submitter: String?) throws {
        try state.withLock { state throws(JobQueueFull) in
            guard state.activeSlots < options.maxActiveJobs else {
                throw JobQueueFull(limit: options.maxActiveJobs, submitter: nil)
            }
            if let submitter {
                let held = state.activePerSubmitter[submitter, default: 0]
                guard held < options.maxActiveJobsPerSubmitter else {
                    throw JobQueueFull(limit: options.maxActiveJobsPerSubmitter, submitter: submitter)
                }
                state.activePerSubmitter[submitter] = held + 1
            }
            state.activeSlots += 1
        }
    }

    private func releaseSlot(_ submitter: String?) {
        state.withLock { state in
            state.activeSlots -= 1
            if let submitter {
                let held = state.activePerSubmitter[submitter, default: 1] - 1
                state.activePerSubmitter[submitter] = held > 0 ? held : nil
            }
        }
    }

    static let cancelledFailure = JobFailure(code: JobFailure.cancelledCode, message: "the job was cancelled")

    // MARK: Background writes

    private func registerOnce() async throws {
        guard !state.withLock({ $0.registered }) else { return }
        try await store.register(owner)
        state.withLock { $0.registered = true }
    }

    private func startTickerIfNeeded() {
        let start = state.withLock { state -> Bool in
            guard !state.tickerRunning, !state.jobs.isEmpty else { return false }
            state.tickerRunning = true
            return true
        }
        if start { Task { await self.tick() } }
    }

    /// While the runner has active jobs: writes their progress, refreshes the heartbeat and picks up cancel
    /// requests made through the database.
    private func tick() async {
        var lastHeartbeat = ContinuousClock.now
        while true {
            try? await Task.sleep(for: options.progressInterval)
            let jobs = state.withLock { state -> [ActiveJob]? in
                if state.jobs.isEmpty {
                    state.tickerRunning = false
                    return nil
                }
                return Array(state.jobs.values)
            }
            guard let jobs else { return }
            let updates = jobs.compactMap { $0.takeDirtyProgress() }
            do {
                try await store.recordProgress(updates)
            } catch {
                for update in updates { jobs.first { $0.id == update.id }?.markDirty() }
            }
            if ContinuousClock.now - lastHeartbeat >= options.heartbeatInterval {
                lastHeartbeat = .now
                try? await store.heartbeat(owner.id)
            }
            if let requested = try? await store.cancelRequests(owner: owner.id) {
                for id in requested { jobs.first { $0.id == id }?.requestCancel() }
            }
        }
    }
}

/// Ends a runner's jobs when its service stops (`JobRunner.backgroundService`).
private struct JobsShutdown: BackgroundService {
    let runner: JobRunner
    let grace: Duration
    var name: String { "job runner" }

    func run() async {
        await waitUntilCancelled()
        await runner.shutDown(grace: grace)
    }
}

/// What a job's work uses to report progress and learn of a cancel request.
public struct JobContext: Sendable {
    fileprivate let active: ActiveJob

    fileprivate init(_ active: ActiveJob) { self.active = active }

    public var jobID: String { active.id }

    /// Records how far the job is (0…1, clamped) and what it is doing; cheap, call it as often as you like
    /// (the runner writes the latest figures every `progressInterval`).
    public func report(progress: Double, message: String) {
        active.report(progress: progress, message: message)
    }

    /// Whether someone asked to cancel the job; long work checks between steps.
    public var isCancelled: Bool { active.isCancelRequested }

    /// Throws `CancellationError` once someone asked to cancel the job (it then ends CANCELLED).
    public func checkCancellation() throws {
        if isCancelled { throw CancellationError() }
    }
}

/// A job this runner has queued or running.
final class ActiveJob: Sendable {
    let id: String
    private let cancelRequested = Atomic<Bool>(false)
    /// Whether the stop was asked by the runner's shutdown rather than by someone cancelling the job.
    private let stoppedByShutdown = Atomic<Bool>(false)
    private let mutable = Mutex(Mutable())

    private struct Mutable {
        var ticket: WorkLane.Ticket?
        var progress = 0.0
        var message = ""
        var dirty = false
        var ended = false
    }

    /// Whose job it is, for the per-submitter bound.
    let submitter: String?

    init(_ job: Job, submitter: String?) {
        id = job.id
        self.submitter = submitter
    }

    var isCancelRequested: Bool { cancelRequested.load(ordering: .acquiring) }

    var progress: (Double, String) { mutable.withLock { ($0.progress, $0.message) } }

    func setTicket(_ ticket: WorkLane.Ticket) {
        mutable.withLock { $0.ticket = ticket }
        if isCancelRequested { ticket.cancel() }  // cancelled before the ticket was known
    }

    /// Flags the job; a job still queued leaves the lane's queue at once.
    func requestCancel() {
        cancelRequested.store(true, ordering: .releasing)
        mutable.withLock { $0.ticket }?.cancel()
    }

    /// Asks the job to stop because the service shuts down; a job someone cancelled already stays cancelled.
    func requestShutdown() {
        if !isCancelRequested { stoppedByShutdown.store(true, ordering: .releasing) }
        requestCancel()
    }

    /// How the job ends when its work stops because it was asked to.
    var stoppedOutcome: JobOutcome {
        stoppedByShutdown.load(ordering: .acquiring)
            ? .failed(JobRunner.shutdownFailure) : .cancelled(JobRunner.cancelledFailure)
    }

    func markRunning() {
        mutable.withLock { $0.ticket = nil }
    }

    func report(progress: Double, message: String) {
        let clamped = progress.isFinite ? min(max(progress, 0), 1) : 0
        mutable.withLock {
            $0.progress = clamped
            $0.message = message
            $0.dirty = true
        }
    }

    func takeDirtyProgress() -> (id: String, progress: Double, message: String)? {
        mutable.withLock { state in
            guard state.dirty else { return nil }
            state.dirty = false
            return (id, state.progress, state.message)
        }
    }

    func markDirty() { mutable.withLock { $0.dirty = true } }

    func markEnded() { mutable.withLock { $0.ended = true } }

    /// Returns once the job's end is recorded, or after `timeout`.
    func waitUntilEnded(orAfter timeout: Duration) async {
        let giveUp = ContinuousClock.now + timeout
        while !mutable.withLock({ $0.ended }), ContinuousClock.now < giveUp {
            try? await Task.sleep(for: .milliseconds(5))
        }
    }
}
