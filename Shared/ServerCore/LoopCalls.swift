import Base
import RPC
import TCP

/// The calls of one event loop's connections, as the server core watches them on that loop's thread: their deadlines
/// (one timer at the earliest) and the flush timer that writes what workers answered while calls are in flight. The
/// listener's loop (`ServerLoop`, Transport) owns one and starts and stops it with its own timers.
package final class LoopCalls {
    package let loop: EventLoop
    private unowned let server: CallServer
    /// Deadlines of calls, earliest first (loop thread), and the timer that fires at the first.
    private var deadlines = DeadlineQueue<WatchedCall>()
    private var deadlineTimer: LoopTimer?
    private var deadlineTimerDue: ContinuousClock.Instant?
    /// Runs while calls are in flight: writes responses a long handler would otherwise hold back.
    private var flushTimer: LoopTimer?
    private var flushTimerRunning = false

    package init(loop: EventLoop, server: CallServer) {
        self.loop = loop
        self.server = server
    }

    /// Makes the timers (loop thread).
    package func start() {
        loop.assertInLoop()
        flushTimer = LoopTimer(loop: loop) { [weak self] in self?.flushStaleResponses() }
        deadlineTimer = LoopTimer(loop: loop) { [weak self] in self?.expireDeadlines() }
    }

    /// Stops the timers and forgets the deadlines (loop thread; shutting down).
    package func stop() {
        loop.assertInLoop()
        flushTimer?.close()
        flushTimer = nil
        deadlineTimer?.close()
        deadlineTimer = nil
        deadlines = DeadlineQueue()
    }

    /// Answers DEADLINE_EXCEEDED for call `id` (numbered `serial`) of `calls` once `deadline`
    /// passes, unless it finished (loop thread).
    func watch(
        _ deadline: ContinuousClock.Instant, of id: UInt64, serial: UInt64, method: String, in calls: any CallDeadlines
    ) {
        loop.assertInLoop()
        let watched = WatchedCall(id: id, serial: serial, method: method, calls: calls)
        deadlines.add(watched, at: deadline, liveCalls: server.inFlight.load(ordering: .relaxed)) { call in
            call.calls.map { !$0.isOpen(call.id, serial: call.serial) } ?? true
        }
        if let due = deadlineTimerDue, due <= deadline { return }
        deadlineTimerDue = deadline
        deadlineTimer?.start(after: max(.zero, deadline - .now))
    }

    private func expireDeadlines() {
        loop.assertInLoop()
        deadlineTimerDue = nil
        let now = ContinuousClock.now
        for call in deadlines.popExpired(at: now) {
            call.calls?.end(
                call.id, serial: call.serial,
                error: RPCError(.deadlineExceeded, "deadline exceeded while serving \(call.method)"))
        }
        if let next = deadlines.earliest {
            deadlineTimerDue = next
            deadlineTimer?.start(after: max(.zero, next - now))
        }
    }

    /// Makes sure responses queued by workers are written within `WorkerPool.maxFlushDelay` (loop thread).
    func callStarted() {
        loop.assertInLoop()
        guard !flushTimerRunning, let flushTimer else { return }
        flushTimerRunning = true
        flushTimer.start(after: WorkerPool.maxFlushDelay, every: WorkerPool.maxFlushDelay)
    }

    private func flushStaleResponses() {
        loop.assertInLoop()
        server.workers.flushIfStale()
        if server.inFlight.load(ordering: .relaxed) == 0, !server.workers.hasDeferredFlushes {
            flushTimer?.stop()
            flushTimerRunning = false
        }
    }
}

/// A call whose deadline its connection's loop watches.
private struct WatchedCall {
    let id: UInt64
    let serial: UInt64
    let method: String
    weak var calls: (any CallDeadlines)?
}
