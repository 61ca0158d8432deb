import Foundation

/// Work for a `WorkerPool`: runs on a worker, must not block for long before its first suspension.
protocol WorkerJob: AnyObject, Sendable {
    func run()
}

/// The server's worker pool: runs the jobs the event loop hands it (one per call) on at most
/// `width` tasks of Swift's cooperative pool, one per core, never on the loop thread.
///
/// Workers take jobs until none is left, so under load a call costs a queue push, not a task and a
/// thread wake-up of its own. Jobs wait in one FIFO queue per connection (`CallQueue`), and workers
/// take from the queues in turn (round robin), so a client that pipelines a thousand slow calls
/// delays another client's call by at most one of its own, not by all of them. A queue whose
/// connection has more unread answers than its high-water mark is parked: its calls start again
/// once the client reads (`unpark`), so a client that never reads cannot make the server compute
/// answers that only pile up in memory. A job that starts async work (a call's
/// handler) uses `Task.immediate`: the handler runs on the worker until its first suspension, and a
/// handler that waits (for a lock, I/O, a timer) does not hold the worker up.
///
/// Responses that quick jobs send in a burst are not written one by one: the connections are
/// flushed together when the queue runs dry, after a job that took `quickJob` or longer, once the
/// oldest waiting response is `burstDelay` old, and in any case within `maxFlushDelay` (the owner
/// calls `flushIfStale()` from a timer), so a long handler cannot hold back answers that are ready.
/// (Tests stretch `quickJob` and `burstDelay`, as unoptimised builds make every job slow.)
final class WorkerPool: Sendable {
    /// A unit of work: one call to serve. A class, so queueing one moves a reference (a closure
    /// would cost allocations for its context and for reabstraction on the way in and out).
    typealias Job = any WorkerJob

    /// Workers running at most, normally the number of cores.
    let width: Int
    /// Jobs a worker runs before it lets other tasks of the cooperative pool have the thread.
    private static let jobsPerTurn = 64
    /// A job at least this long has its responses written at once: batching saves nothing there.
    private let quickJob: Duration
    /// How long quick jobs' responses may wait for more to write together.
    private let burstDelay: Duration
    /// Longest a sent response waits in a connection's outbox for its burst to end.
    static let maxFlushDelay = Duration.milliseconds(1)
    fileprivate let state = Lock(State())

    fileprivate struct State {
        /// Queues with jobs waiting, in the order they get their next turn.
        var ready = FIFO<CallQueue>()
        var workers = 0
        /// Connections with responses queued by jobs, waiting for the burst to end.
        var unflushed: [TCPConnection] = []
        /// When the oldest of those was queued.
        var unflushedSince: ContinuousClock.Instant?
    }

    init(
        width: Int = ProcessInfo.processInfo.activeProcessorCount, quickJob: Duration = .microseconds(50),
        burstDelay: Duration = .microseconds(100)
    ) {
        self.width = max(1, width)
        self.quickJob = quickJob
        self.burstDelay = burstDelay
    }

    /// The queue of jobs that belong to no connection.
    private let sharedQueue = CallQueue(connection: nil)

    /// Queues `job` in `queue` (in a queue of its own when nil); starts another worker when fewer
    /// than `width` are running.
    func submit(_ job: Job, to queue: CallQueue? = nil) {
        let queue = queue ?? sharedQueue
        let startWorker = state.withLock { state -> Bool in
            queue.jobs.append(job)
            guard !queue.isScheduled, !queue.isParked else { return false }
            queue.isScheduled = true
            state.ready.append(queue)
            return state.startWorker(width)
        }
        if startWorker { Task { await self.work() } }
    }

    /// Gives a parked queue its turns again: its connection's client read its answers, or the
    /// connection closed (then its jobs run only to see that they are cancelled).
    func unpark(_ queue: CallQueue, closed: Bool = false) {
        let startWorker = state.withLock { state -> Bool in
            if closed { queue.isClosed = true }
            guard queue.isParked else { return false }
            queue.isParked = false
            guard !queue.jobs.isEmpty else { return false }
            queue.isScheduled = true
            state.ready.append(queue)
            return state.startWorker(width)
        }
        if startWorker { Task { await self.work() } }
    }

    /// The pool whose job is running on this thread, if any.
    static var current: WorkerPool? {
        pthread_getspecific(currentKey).map { Unmanaged<WorkerPool>.fromOpaque($0).takeUnretainedValue() }
    }

    /// Called by a connection when a job queued a frame on it: its flush waits for the burst's end.
    func deferFlush(of connection: TCPConnection) {
        state.withLock { state in
            if state.unflushed.isEmpty { state.unflushedSince = .now }
            state.unflushed.append(connection)
        }
    }

    /// Flushes connections whose responses have waited `maxFlushDelay` or more (any thread).
    func flushIfStale() {
        let stale = state.withLock { state in
            state.unflushedSince.map { ContinuousClock.now - $0 >= Self.maxFlushDelay } ?? false
        }
        if stale { flushDeferred() }
    }

    /// Whether responses are waiting for their burst to end.
    var hasDeferredFlushes: Bool { state.withLock { !$0.unflushed.isEmpty } }

    private func work() async {
        var ran = 0
        var jobStarted: ContinuousClock.Instant?
        setCurrent(self)
        while true {
            let now = ContinuousClock.now
            let (job, due) = next(now: now, afterLongJob: jobStarted.map { now - $0 >= quickJob } ?? false)
            flush(due)
            guard let job else { break }
            jobStarted = now
            job.run()
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

    /// The oldest queued job (nil, and one worker fewer, when there is none), and the connections
    /// whose responses are due to be written: after a long job, at the end of a burst, or when the
    /// oldest has waited `burstDelay`. One lock for both.
    private func next(now: ContinuousClock.Instant, afterLongJob: Bool) -> (Job?, [TCPConnection]) {
        state.withLock { state in
            let queueEmpty = state.ready.isEmpty
            var due: [TCPConnection] = []
            if let since = state.unflushedSince, afterLongJob || queueEmpty || now - since >= burstDelay {
                swap(&due, &state.unflushed)
                state.unflushedSince = nil
            }
            while let queue = state.ready.popFirst() {
                if !queue.isClosed, let connection = queue.connection,
                   connection.pendingBytes.load(ordering: .relaxed) > connection.highWater {
                    queue.isScheduled = false
                    queue.isParked = true
                    continue
                }
                let job = queue.jobs.popFirst()
                if queue.jobs.isEmpty {
                    queue.isScheduled = false
                } else {
                    state.ready.append(queue)
                }
                if let job { return (job, due) }
            }
            state.workers -= 1
            return (nil, due)
        }
    }

    /// Has the loops write every response jobs queued.
    private func flushDeferred() {
        flush(state.withLock { state -> [TCPConnection] in
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
            for connection in connections { connection.loop.execute { connection.flush() } }
        }
    }

    private func setCurrent(_ pool: WorkerPool?) {
        pthread_setspecific(Self.currentKey, pool.map { Unmanaged.passUnretained($0).toOpaque() })
    }

    private static let currentKey: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key, nil)
        return key
    }()
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
final class CallQueue: @unchecked Sendable {
    /// The connection whose unread answers park this queue; nil for a queue never parked.
    let connection: TCPConnection?
    fileprivate var jobs = FIFO<WorkerPool.Job>()
    /// In the pool's ready ring.
    fileprivate var isScheduled = false
    /// Out of the ring because its connection's outbox is above the high-water mark.
    fileprivate var isParked = false
    /// The connection closed: the jobs left run (and find themselves cancelled) whatever the outbox holds.
    fileprivate var isClosed = false

    init(connection: TCPConnection?) { self.connection = connection }
}
