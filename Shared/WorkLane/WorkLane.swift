import Base
import Foundation
import Synchronization

/// A fixed set of threads for blocking and CPU-bound work, with a bounded FIFO queue in front of them.
///
/// Swift's cooperative pool has one thread per core and expects every task to suspend rather than block:
/// a request handler that parses a large file, runs OCR or waits on SQLite holds one of those threads
/// for the whole time, and every other call on that core waits behind it. Work handed to a `WorkLane`
/// runs on threads of its own instead, while the task that asked for it is suspended (`run`), so the
/// cooperative threads stay free for the calls that only need them for microseconds.
///
/// Modelled on swift-nio's `NIOThreadPool`: threads take work items from one queue; an item cancelled
/// before a thread took it never runs (its body is told so instead). Unlike NIO's pool the queue is
/// bounded: past `queueLimit` waiting items, `submit` and `run` throw `WorkLane.QueueFull` at once, so a
/// flood of heavy requests is refused early (RESOURCE_EXHAUSTED at the RPC layer) instead of piling up
/// work nobody will wait for.
///
/// One abstraction, two instances in a service: its heavy-work lane (`environment.lane`, `--lane-threads`) and its
/// jobs' lane (`ServiceJobs`, `--job-threads`), so a flood of trainings never takes the threads a request needs.
/// The server's `WorkerPool` (ServerCore) is not a lane: it runs calls on Swift's cooperative threads, one per
/// core, and a handler moves blocking work from there onto the lane.
///
/// Threads start on first use and stop on `shutdown()` or when the lane is released.
public final class WorkLane: Sendable {
    /// Thrown by `submit` and `run` when `queueLimit` items are already waiting: resource exhausted, so the
    /// caller may try again later or elsewhere.
    public struct QueueFull: CategorizedError, CustomStringConvertible {
        public let pool: String
        public let limit: Int
        public var category: ErrorCategory { .resourceExhausted }
        public var message: String { "the \(pool) queue is full (\(limit) waiting); try again later" }
        public var description: String { message }
    }

    /// Thrown by `submit` and `run` after `shutdown()`: the service is stopping, so unavailable.
    public struct ShutDown: CategorizedError, CustomStringConvertible {
        public let pool: String
        public var category: ErrorCategory { .unavailable }
        public var message: String { "the \(pool) queue has shut down" }
        public var description: String { message }
    }

    /// The handle of one submitted item: cancelling it takes the item out of the queue if no thread
    /// has taken it yet.
    public struct Ticket: Sendable {
        fileprivate let id: UInt64
        fileprivate let core: Core

        /// Takes the item out of the queue and runs its body with `cancelled == true` on the calling
        /// thread; returns false (and does nothing) when a thread has already taken it or it ran.
        @discardableResult
        public func cancel() -> Bool {
            guard let item = core.remove(id) else { return false }
            item.body(true)
            return true
        }
    }

    /// Name used for the threads (`name-1`, …) and in errors.
    public let name: String
    /// Admits bulk work (`runBulk`) a few items at a time, so that it never fills the queue.
    private let bulk: AdmissionGate
    /// Threads running work at most.
    public let threads: Int
    /// Items that may wait for a thread; more are refused with `QueueFull`.
    public let queueLimit: Int
    private let core: Core

    /// A pool of `threads` threads (at least one) whose queue holds at most `queueLimit` waiting items.
    /// `bulkLimit` (default: the threads, at most half the queue) bounds the `runBulk` items queued or running at once.
    public init(
        name: String, threads: Int = ProcessInfo.processInfo.activeProcessorCount, queueLimit: Int = 256,
        bulkLimit: Int? = nil
    ) {
        self.name = name
        self.threads = max(1, threads)
        self.queueLimit = max(0, queueLimit)
        bulk = AdmissionGate(limit: bulkLimit ?? max(1, min(self.threads, self.queueLimit / 2)))
        core = Core(name: name, threads: self.threads, queueLimit: self.queueLimit)
    }

    deinit { core.shutdown() }

    /// Queues `body`; a thread runs it with `cancelled == false`, or `Ticket.cancel()` runs it on the
    /// cancelling thread with `cancelled == true`. Exactly one of the two happens.
    /// Throws `QueueFull` or `ShutDown` (without calling `body`).
    public func submit(_ body: @escaping @Sendable (_ cancelled: Bool) -> Void) throws -> Ticket {
        Ticket(id: try core.enqueue(body), core: core)
    }

    /// Runs `work` on one of the pool's threads and returns its result; the calling task is suspended
    /// meanwhile, so no cooperative thread waits.
    ///
    /// Cancelling the calling task while the work is still queued takes it out of the queue and throws
    /// `CancellationError`. Work already running is not interrupted (blocking code cannot be); it can
    /// poll `WorkLane.isCurrentWorkCancelled` between steps and stop early. Throws `QueueFull` at once
    /// when the queue is full.
    @discardableResult
    public func run<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        let flag = CancellationFlag()
        let ticket = Mutex<Ticket?>(nil)
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
                do {
                    let submitted = try submit { cancelled in
                        if cancelled {
                            continuation.resume(throwing: CancellationError())
                            return
                        }
                        continuation.resume(with: Result { try Self.withCurrentFlag(flag, work) })
                    }
                    ticket.withLock { $0 = submitted }
                    // Cancelled before the ticket existed: the handler found nothing to cancel.
                    if flag.isSet { submitted.cancel() }
                } catch {
                    continuation.resume(throwing: error)
                }
            }
        } onCancel: {
            flag.set()
            ticket.withLock { $0 }?.cancel()
        }
    }

    /// `run` for work a client paces and many clients may ask for at once — each page of a server stream: at most
    /// `bulkLimit` such items are queued or running; the rest wait suspended (in order, costing no queue slot), so
    /// the queue stays free for quick calls. Two hundred unread health `Pull`s, each building its first page on the
    /// lane, had filled a queue of 64 and every quick call was refused "the lane queue is full".
    public func runBulk<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        try await bulk.withAdmission { try await run(work) }
    }

    /// Bulk items (`runBulk`) queued or running, and those waiting for their turn.
    public var bulkCounts: (admitted: Int, waiting: Int) {
        let counts = bulk.counts
        return (counts.inside, counts.waiting)
    }

    /// Whether the task that handed the current thread's work to `run` was cancelled; false outside `run`.
    public static var isCurrentWorkCancelled: Bool {
        guard let raw = pthread_getspecific(currentFlagKey) else { return false }
        return Unmanaged<CancellationFlag>.fromOpaque(raw).takeUnretainedValue().isSet
    }

    /// The name of the pool whose thread this is; nil on any other thread (a cooperative one, say).
    public static var currentPoolName: String? {
        guard let raw = pthread_getspecific(currentPoolKey) else { return nil }
        return Unmanaged<NameBox>.fromOpaque(raw).takeUnretainedValue().name
    }

    fileprivate static let currentPoolKey: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key, nil)
        return key
    }()

    /// Items waiting for a thread.
    public var queued: Int { core.queuedCount }
    /// Items a thread is running.
    public var running: Int { core.runningCount }

    /// Stops taking work: queued items run their body with `cancelled == true`, threads finish the
    /// item they are running and exit. Returns without waiting for them.
    public func shutdown() { core.shutdown() }

    private static func withCurrentFlag<T>(_ flag: CancellationFlag, _ work: () throws -> T) throws -> T {
        pthread_setspecific(currentFlagKey, Unmanaged.passUnretained(flag).toOpaque())
        defer { pthread_setspecific(currentFlagKey, nil) }
        return try work()
    }

    private static let currentFlagKey: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key, nil)
        return key
    }()
}

/// A pool's name, for `currentPoolName`.
private final class NameBox: Sendable {
    let name: String
    init(_ name: String) { self.name = name }
}

/// Set once, read from any thread.
final class CancellationFlag: Sendable {
    private let value = Atomic<Bool>(false)
    var isSet: Bool { value.load(ordering: .acquiring) }
    func set() { value.store(true, ordering: .releasing) }
}

/// The queue and the threads, shared by the pool and its tickets (so a ticket outliving the pool still
/// finds the queue) and kept alive by the threads until they exit.
private final class Core: @unchecked Sendable {
    struct Item {
        let body: @Sendable (Bool) -> Void
    }

    let name: String
    let threadCount: Int
    let queueLimit: Int
    /// Guards everything below; threads wait on it for work.
    private let condition = NSCondition()
    private var items: [UInt64: Item] = [:]
    /// Ids in arrival order; ids of cancelled items stay until a thread skips them.
    private var order: [UInt64] = []
    private var head = 0
    private var nextID: UInt64 = 0
    private var started = 0
    private var idle = 0
    private var busy = 0
    private var stopped = false

    init(name: String, threads: Int, queueLimit: Int) {
        self.name = name
        threadCount = threads
        self.queueLimit = queueLimit
    }

    var queuedCount: Int { condition.withLock { items.count } }
    var runningCount: Int { condition.withLock { busy } }

    func enqueue(_ body: @escaping @Sendable (Bool) -> Void) throws -> UInt64 {
        let (id, startThread) = try condition.withLock { () throws -> (UInt64, Bool) in
            guard !stopped else { throw WorkLane.ShutDown(pool: name) }
            // Items a free thread (idle or not yet started) is about to take do not count against the limit.
            guard items.count < queueLimit + (threadCount - busy) else {
                throw WorkLane.QueueFull(pool: name, limit: queueLimit)
            }
            nextID += 1
            items[nextID] = Item(body: body)
            order.append(nextID)
            let start = items.count > idle && started < threadCount
            if start { started += 1 }
            condition.signal()
            return (nextID, start)
        }
        if startThread { spawn(number: condition.withLock { started }) }
        return id
    }

    func remove(_ id: UInt64) -> Item? {
        condition.withLock { items.removeValue(forKey: id) }
    }

    func shutdown() {
        let abandoned = condition.withLock { () -> [Item] in
            guard !stopped else { return [] }
            stopped = true
            let waiting = order[head...].compactMap { items[$0] }
            items.removeAll()
            order.removeAll()
            head = 0
            condition.broadcast()
            return waiting
        }
        for item in abandoned { item.body(true) }
    }

    private func spawn(number: Int) {
        let threadName = "\(name)-\(number)"
        let poolName = NameBox(name)
        let thread = Thread { [self] in
            // Named from inside: on Linux only the running thread's name reaches the OS (`top -H`, debuggers).
            Thread.current.name = threadName
            pthread_setspecific(WorkLane.currentPoolKey, Unmanaged.passUnretained(poolName).toOpaque())
            withExtendedLifetime(poolName) { work() }
        }
        thread.start()
    }

    /// A thread's loop: take the oldest item still queued, run it, repeat until shutdown.
    private func work() {
        while let item = next() {
            item.body(false)
            condition.withLock { busy -= 1 }
        }
    }

    private func next() -> Item? {
        condition.withLock {
            while true {
                while head < order.count {
                    let id = order[head]
                    head += 1
                    if let item = items.removeValue(forKey: id) {
                        compact()
                        busy += 1
                        return item
                    }
                }
                compact()
                if stopped { return nil }
                idle += 1
                condition.wait()
                idle -= 1
            }
        }
    }

    /// Drops the ids already taken from the front of `order` once they are most of it.
    private func compact() {
        if head == order.count {
            order.removeAll(keepingCapacity: true)
            head = 0
        } else if head > 64 && head * 2 > order.count {
            order.removeFirst(head)
            head = 0
        }
    }
}
