import Foundation
import RPC
import ServerSeam
import TCP

/// The server's worker pool: runs the jobs the event loop hands it (one per call) on at most
/// `width` tasks of Swift's cooperative pool, one per core, never on the loop thread.
///
/// Workers take jobs until none is left, so under load a call costs a queue push, not a task and a
/// thread wake-up of its own. Jobs wait in one FIFO queue per connection (`CallQueue`), and workers
/// take from the queues in turn (round robin), so a client that pipelines a thousand slow calls
/// delays another client's call by at most one of its own, not by all of them. A queue whose
/// connection has more unread answers than its high-water mark (never above the memory budget:
/// `TCPConnection.callsWaitAbove`) is parked: its calls start again once the client reads
/// (`unpark`), so a client that never reads cannot make the server compute answers that only pile
/// up in memory. A job that starts async work (a call's handler) uses `Task.immediate`: the handler runs on the worker until its first suspension, and a
/// handler that waits (for a lock, I/O, a timer) does not hold the worker up.
///
/// Responses that quick jobs send in a burst are not written one by one: the connections are
/// flushed together when the queue runs dry, after a job that took `quickJob` or longer, once the
/// oldest waiting response is `burstDelay` old, and in any case within `maxFlushDelay` (the owner
/// calls `flushIfStale()` from a timer), so a long handler cannot hold back answers that are ready.
/// (Tests stretch `quickJob` and `burstDelay`, as unoptimised builds make every job slow.)
///
/// Workers are not preempted, so turns alone do not keep a quick call quick: a client pipelining
/// calls that compute for 40 ms each (an export) would hold every worker, and a search of half a
/// millisecond from anyone else would wait for one of them to end. So jobs are measured (per
/// method, `WorkerTime`), and those that held a worker for `longJob` or more take at most
/// `width - 1` workers together, however many clients send them: one worker (one core) is always
/// left for quick calls, which the long ones cannot then delay by more than the kernel's
/// time-slicing. The price is that long calls alone use one core fewer than there are.
package final class WorkerPool: Sendable {
    /// A unit of work: one call to serve. A class, so queueing one moves a reference (a closure
    /// would cost allocations for its context and for reabstraction on the way in and out).
    package typealias Job = any WorkerJob

    /// Workers running at most, normally the number of cores.
    package let width: Int
    /// Jobs a worker runs before it lets other tasks of the cooperative pool have the thread.
    private static let jobsPerTurn = 64
    /// A job at least this long has its responses written at once: batching saves nothing there.
    private let quickJob: Duration
    /// Jobs whose kind has held a worker this long or longer count as long (see above).
    private let longJob: Duration
    /// Workers long jobs may hold at once.
    private let longJobWorkers: Int
    /// How long quick jobs' responses may wait for more to write together.
    private let burstDelay: Duration
    /// Longest a sent response waits in a connection's outbox for its burst to end.
    package static let maxFlushDelay = Duration.milliseconds(1)
    fileprivate let state: Lock<State>
    /// What the connections a job writes to see on its worker's thread: their flushes wait in `state.unflushed`.
    private let burst: WriteBurst

    fileprivate struct State {
        /// Queues with jobs waiting, in the order they get their next turn.
        var ready = FIFO<CallQueue>()
        var workers = 0
        /// Workers running long jobs.
        var longJobs = 0
        /// Connections with responses queued by jobs, waiting for the burst to end.
        var unflushed: [TCPConnection] = []
        /// When the oldest of those was queued.
        var unflushedSince: ContinuousClock.Instant?
    }

    init(
        width: Int = ProcessInfo.processInfo.activeProcessorCount, quickJob: Duration = .microseconds(50),
        burstDelay: Duration = .microseconds(100), longJob: Duration = .milliseconds(5)
    ) {
        self.width = max(1, width)
        self.quickJob = quickJob
        self.burstDelay = burstDelay
        self.longJob = longJob
        longJobWorkers = max(1, self.width - 1)
        let state = Lock(State())
        self.state = state
        burst = WriteBurst { [state] connection in
            state.withLock { state in
                if state.unflushed.isEmpty { state.unflushedSince = .now }
                state.unflushed.append(connection)
            }
        }
    }

    /// The queue of jobs that belong to no connection.
    private let sharedQueue = CallQueue(connection: nil)

    /// Queues `job` in `queue` (in a queue of its own when nil); starts another worker when fewer
    /// than `width` are running.
    package func submit(_ job: Job, to queue: CallQueue? = nil) {
        submit(CollectionOfOne(job), to: queue)
    }

    /// Queues `jobs` in `queue` in order, under one lock (a connection hands over the calls of one
    /// read together); nothing when the queue was discarded.
    package func submit(_ jobs: some Collection<Job>, to queue: CallQueue? = nil) {
        let queue = queue ?? sharedQueue
        let startWorker = state.withLock { state -> Bool in
            guard !queue.isClosed else { return false }
            for job in jobs { queue.jobs.append(job) }
            guard !queue.isScheduled, !queue.isParked else { return false }
            queue.isScheduled = true
            state.ready.append(queue)
            return state.startWorker(width)
        }
        if startWorker { Task { await self.work() } }
    }

    /// Gives a parked queue its turns again: its connection's client read its answers.
    package func unpark(_ queue: CallQueue) {
        let startWorker = state.withLock { state -> Bool in
            guard queue.isParked, !queue.isClosed else { return false }
            queue.isParked = false
            guard !queue.jobs.isEmpty else { return false }
            queue.isScheduled = true
            state.ready.append(queue)
            return state.startWorker(width)
        }
        if startWorker { Task { await self.work() } }
    }

    /// Forgets the jobs waiting in `queue` and takes no more for it: its connection is gone, so
    /// they are not run at all (a worker that took one already finds its call over). The ring
    /// drops the queue at its next turn.
    package func discard(_ queue: CallQueue) {
        let dropped = state.withLock { _ -> FIFO<Job> in
            queue.isClosed = true
            queue.isParked = false
            var dropped = FIFO<Job>()
            swap(&dropped, &queue.jobs)
            return dropped
        }
        _ = dropped  // released here, outside the lock
    }

    /// Flushes connections whose responses have waited `maxFlushDelay` or more (any thread).
    package func flushIfStale() {
        let stale = state.withLock { state in
            state.unflushedSince.map { ContinuousClock.now - $0 >= Self.maxFlushDelay } ?? false
        }
        if stale { flushDeferred() }
    }

    /// Whether responses are waiting for their burst to end.
    package var hasDeferredFlushes: Bool { state.withLock { !$0.unflushed.isEmpty } }

    private func work() async {
        var ran = 0
        var jobStarted: ContinuousClock.Instant?
        var wasLong = false
        setCurrent(self)
        while true {
            let now = ContinuousClock.now
            let (job, isLong, due) = next(
                now: now, afterLongJob: jobStarted.map { now - $0 >= quickJob } ?? false, endedLong: wasLong)
            flush(due)
            guard let job else { break }
            jobStarted = now
            wasLong = isLong
            if job.run() { job.workerTime?.record(ContinuousClock.now - now) }
            ran += 1
            if ran % Self.jobsPerTurn == 0 {
                setCurrent(nil)
                flushDeferred()
                await Task.yield()
                setCurrent(self)
            }
        }
        setCurrent(nil)
    }

    /// The next job in turn (nil, and one worker fewer, when there is none it may run), whether it
    /// is long, and the connections whose responses are due to be written: after a long job, at the
    /// end of a burst, or when the oldest has waited `burstDelay`. One lock for all.
    ///
    /// `endedLong`: the worker's previous job was long. A queue whose next job is long while long
    /// jobs hold `longJobWorkers` keeps its place and is passed over; when only such queues are left
    /// the worker stops (the worker that ends a long job takes the next one).
    private func next(now: ContinuousClock.Instant, afterLongJob: Bool, endedLong: Bool) -> (
        Job?, Bool, [TCPConnection]
    ) {
        state.withLock { state in
            if endedLong { state.longJobs -= 1 }
            let queueEmpty = state.ready.isEmpty
            var due: [TCPConnection] = []
            if let since = state.unflushedSince, afterLongJob || queueEmpty || now - since >= burstDelay {
                swap(&due, &state.unflushed)
                state.unflushedSince = nil
            }
            var passedOver = 0
            while passedOver < state.ready.count, let queue = state.ready.popFirst() {
                if !queue.isClosed, let connection = queue.connection,
                    connection.pendingBytes.load(ordering: .relaxed) > connection.callsWaitAbove
                {
                    queue.isScheduled = false
                    queue.isParked = true
                    continue
                }
                let isLong = queue.jobs.first.map(isLongJob) ?? false
                if isLong && state.longJobs >= longJobWorkers {
                    state.ready.append(queue)
                    passedOver += 1
                    continue
                }
                let job = queue.jobs.popFirst()
                if queue.jobs.isEmpty {
                    queue.isScheduled = false
                } else {
                    state.ready.append(queue)
                }
                if let job {
                    if isLong { state.longJobs += 1 }
                    return (job, isLong, due)
                }
            }
            state.workers -= 1
            return (nil, false, due)
        }
    }

    private func isLongJob(_ job: Job) -> Bool {
        job.workerTime.map { $0.estimate >= longJob } ?? false
    }

    /// Has the loops write every response jobs queued.
    private func flushDeferred() {
        flush(
            state.withLock { state -> [TCPConnection] in
                state.unflushedSince = nil
                var due: [TCPConnection] = []
                swap(&due, &state.unflushed)
                return due
            })
    }

    /// Has the loops write what `connections` queued, one wake-up per loop.
    private func flush(_ connections: [TCPConnection]) {
        guard let loop = connections.first?.loop else { return }
        if connections.allSatisfy({ $0.loop === loop }) {
            loop.execute { for connection in connections { connection.flush() } }
        } else {
            // A server's connections live on several loops: still one wake-up each.
            var byLoop: [ObjectIdentifier: [TCPConnection]] = [:]
            for connection in connections { byLoop[ObjectIdentifier(connection.loop), default: []].append(connection) }
            for group in byLoop.values {
                group[0].loop.execute { for connection in group { connection.flush() } }
            }
        }
    }

    private func setCurrent(_ pool: WorkerPool?) {
        WriteBurst.setCurrent(pool?.burst)
    }
}

extension WorkerPool.State {
    /// Counts one more worker when fewer than `width` run: the caller must start it.
    fileprivate mutating func startWorker(_ width: Int) -> Bool {
        guard workers < width else { return false }
        workers += 1
        return true
    }
}

/// The jobs of one connection waiting for a worker (guarded by its pool's lock).
package final class CallQueue: @unchecked Sendable {
    /// The connection whose unread answers park this queue; nil for a queue never parked.
    package let connection: TCPConnection?
    fileprivate var jobs = FIFO<WorkerPool.Job>()
    /// In the pool's ready ring.
    fileprivate var isScheduled = false
    /// Out of the ring because its connection's outbox is above the high-water mark.
    fileprivate var isParked = false
    /// The connection closed (or failed): its jobs were dropped and no more are taken (`discard`).
    fileprivate var isClosed = false

    package init(connection: TCPConnection?) { self.connection = connection }
}
