import Foundation
import Synchronization
import TestSupport
import Testing
import WorkLane

@Suite struct WorkLaneTests {
    @Test func runsWorkOffTheCallersThreadAndReturnsItsResult() async throws {
        let pool = WorkLane(name: "test", threads: 2, queueLimit: 8)
        #expect(try await pool.run { WorkLane.currentPoolName } == "test")
        #expect(WorkLane.currentPoolName == nil)
        #expect(try await pool.run { 6 * 7 } == 42)
    }

    @Test func rethrowsWhatTheWorkThrows() async {
        struct Boom: Error {}
        let pool = WorkLane(name: "test", threads: 1, queueLimit: 1)
        await #expect(throws: Boom.self) { try await pool.run { throw Boom() } }
    }

    /// `threads` items run at once, not more: the third of three 300 ms items on two threads ends after ~600 ms.
    @Test func runsAtMostThreadsAtOnce() async throws {
        let pool = WorkLane(name: "test", threads: 2, queueLimit: 8)
        let running = Box(0), most = Box(0)
        let started = ContinuousClock.now
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<6 {
                group.addTask {
                    try await pool.run {
                        let now = running.update {
                            $0 += 1
                            return $0
                        }
                        most.update { $0 = max($0, now) }
                        usleep(100_000)
                        running.update { $0 -= 1 }
                    }
                }
            }
            try await group.waitForAll()
        }
        #expect(most.value == 2)
        #expect(ContinuousClock.now - started >= .milliseconds(290))
    }

    /// With every thread busy and the queue full, the next item is refused at once.
    @Test func aFullQueueRefusesAtOnce() async throws {
        let pool = WorkLane(name: "test", threads: 1, queueLimit: 2)
        let release = Gate()
        var tasks: [Task<Void, any Error>] = []
        for _ in 0..<3 {  // one running, two queued
            tasks.append(Task { try await pool.run { release.wait() } })
        }
        try await waitUntil { pool.running == 1 && pool.queued == 2 }
        let refusedAt = ContinuousClock.now
        await #expect(throws: WorkLane.QueueFull.self) { try await pool.run {} }
        #expect(ContinuousClock.now - refusedAt < .milliseconds(100))
        #expect(throws: WorkLane.QueueFull.self) { _ = try pool.submit { _ in } }
        release.open()
        for task in tasks { try await task.value }
        #expect(try await pool.run { 1 } == 1)  // room again
    }

    /// Bulk work (a server stream's pages) waits its turn outside the queue: forty items through a pool whose queue
    /// holds four take two places at most, a quick call still finds room, and every item runs. Through `run` the
    /// fifth and later were refused QueueFull, as were quick calls behind them.
    @Test func bulkWorkWaitsOutsideTheQueueAndLeavesItToQuickCalls() async throws {
        let pool = WorkLane(name: "test", threads: 1, queueLimit: 4, bulkLimit: 2)
        let release = Gate()
        let bulk = (0..<40).map { index in
            Task {
                try await pool.runBulk { () -> Int in
                    release.wait()
                    return index
                }
            }
        }
        try await waitUntil { pool.bulkCounts.waiting == 38 && pool.running == 1 }
        #expect(pool.queued == 1 && pool.bulkCounts.admitted == 2)
        let quick = Task { try await pool.run { 42 } }
        try await waitUntil { pool.queued == 2 }
        release.open()
        #expect(try await quick.value == 42)
        var ran = 0
        for task in bulk { ran += try await task.value >= 0 ? 1 : 0 }
        #expect(ran == 40)
        #expect(pool.bulkCounts.admitted == 0 && pool.bulkCounts.waiting == 0)
    }

    /// A stream whose client went away while its page waited for a place leaves the line: CancellationError, its
    /// work never runs and the place it would have had goes to the next.
    @Test func aCancelledBulkWaiterLeavesTheLineWithoutRunning() async throws {
        let pool = WorkLane(name: "test", threads: 1, queueLimit: 4, bulkLimit: 1)
        let release = Gate()
        let ran = Box(false)
        let first = Task { try await pool.runBulk { release.wait() } }
        try await waitUntil { pool.running == 1 }
        let waiting = Task { try await pool.runBulk { ran.update { $0 = true } } }
        try await waitUntil { pool.bulkCounts.waiting == 1 }
        waiting.cancel()
        await #expect(throws: CancellationError.self) { try await waiting.value }
        #expect(pool.bulkCounts.waiting == 0)
        release.open()
        try await first.value
        try await pool.runBulk {}
        #expect(!ran.value)
        #expect(pool.bulkCounts.admitted == 0)
    }

    /// A task cancelled while its work waits in the queue gets CancellationError and the work never runs.
    @Test func cancellingAQueuedItemTakesItOutOfTheQueue() async throws {
        let pool = WorkLane(name: "test", threads: 1, queueLimit: 4)
        let release = Gate()
        let ran = Box(false)
        let blocker = Task { try await pool.run { release.wait() } }
        try await waitUntil { pool.running == 1 }
        let queued = Task { try await pool.run { ran.update { $0 = true } } }
        try await waitUntil { pool.queued == 1 }
        queued.cancel()
        await #expect(throws: CancellationError.self) { try await queued.value }
        #expect(pool.queued == 0)
        release.open()
        try await blocker.value
        try await pool.run {}  // the thread is free and the cancelled item did not run before it
        #expect(!ran.value)
    }

    /// Work already running is not interrupted, but sees the cancellation through `isCurrentWorkCancelled`.
    @Test func runningWorkSeesCancellation() async throws {
        let pool = WorkLane(name: "test", threads: 1, queueLimit: 1)
        let started = Gate()
        let task = Task {
            try await pool.run { () -> Int in
                started.open()
                var polls = 0
                while !WorkLane.isCurrentWorkCancelled {
                    polls += 1
                    usleep(1000)
                    if polls > 5000 { return -1 }
                }
                return polls
            }
        }
        await started.opened()
        task.cancel()
        let polls = try await task.value
        #expect(polls >= 0)
        #expect(!WorkLane.isCurrentWorkCancelled)
    }

    @Test func submitTicketsCancelOnlyQueuedItems() async throws {
        let pool = WorkLane(name: "test", threads: 1, queueLimit: 4)
        let release = Gate()
        let outcomes = Box<[String]>([])
        let first = try pool.submit { cancelled in
            outcomes.update { $0.append("first \(cancelled)") }
            release.wait()
        }
        try await waitUntil { pool.running == 1 }
        let second = try pool.submit { cancelled in outcomes.update { $0.append("second \(cancelled)") } }
        #expect(!first.cancel())  // running
        #expect(second.cancel())
        #expect(!second.cancel())  // once
        release.open()
        try await pool.run {}
        #expect(outcomes.value == ["first false", "second true"])
    }

    @Test func shutdownCancelsQueuedItemsAndRefusesNewOnes() async throws {
        let pool = WorkLane(name: "test", threads: 1, queueLimit: 4)
        let release = Gate()
        let blocker = Task { try await pool.run { release.wait() } }
        try await waitUntil { pool.running == 1 }
        let queued = Task { try await pool.run {} }
        try await waitUntil { pool.queued == 1 }
        pool.shutdown()
        await #expect(throws: CancellationError.self) { try await queued.value }
        await #expect(throws: WorkLane.ShutDown.self) { try await pool.run {} }
        release.open()
        try await blocker.value
    }

    /// Many short items from many tasks all run exactly once.
    @Test func manyItemsRunOnce() async throws {
        let pool = WorkLane(name: "test", threads: 3, queueLimit: 10_000)
        let sum = try await withThrowingTaskGroup(of: Int.self) { group in
            for value in 1...2000 { group.addTask { try await pool.run { value } } }
            return try await group.reduce(0, +)
        }
        #expect(sum == 2000 * 2001 / 2)
    }
}

struct TimedOut: Error {}

/// Polls `condition` every millisecond for up to `limit`.
func waitUntil(_ limit: Duration = .seconds(5), _ condition: () -> Bool) async throws {
    let giveUp = ContinuousClock.now + limit
    while !condition() {
        guard ContinuousClock.now < giveUp else { throw TimedOut() }
        try await Task.sleep(for: .milliseconds(1))
    }
}
