import Foundation
import Jobs
import Storage
import Synchronization
import WorkLane

/// A scratch directory with a database file path, removed on deinit.
final class Scratch: @unchecked Sendable {
    let directory: URL
    var databasePath: String { directory.appendingPathComponent("jobs.sqlite").path }

    init() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("JobsTests-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(at: directory) }

    /// A runner on this directory's database (a new `Database`, as another replica would open it).
    func runner(lane: ThreadPool = ThreadPool(name: "lane", threads: 2, queueLimit: 8)) throws -> JobRunner {
        var options = JobRunner.Options()
        options.progressInterval = .milliseconds(20)
        options.watchInterval = .milliseconds(10)
        options.heartbeatInterval = .milliseconds(50)
        return JobRunner(store: try JobStore(database: try Database(path: databasePath, migrations: [])), lane: lane, options: options)
    }
}

/// A door threads wait at until it is opened.
final class Gate: Sendable {
    private let semaphore = DispatchSemaphore(value: 0)
    private let isOpen = Mutex(false)

    func open() {
        let first = isOpen.withLock { open in
            defer { open = true }
            return !open
        }
        if first { semaphore.signal() }
    }

    /// Blocks the calling thread: for lane and storage threads only.
    func wait() {
        semaphore.wait()
        semaphore.signal()
    }

    /// Suspends until the gate is open, without blocking a thread of the cooperative pool (which has only a
    /// couple of threads, shared by the tests running in parallel).
    func opened() async {
        while !isOpen.withLock({ $0 }) { try? await Task.sleep(for: .milliseconds(1)) }
    }
}

/// A value shared between threads.
final class Box<Value: Sendable>: Sendable {
    private let mutex: Mutex<Value>
    init(_ value: Value) { mutex = Mutex(value) }
    var value: Value { mutex.withLock { $0 } }
    func set(_ value: Value) { mutex.withLock { $0 = value } }
}

struct TimedOut: Error, CustomStringConvertible {
    let what: String
    var description: String { "timed out waiting for \(what)" }
}

/// Polls `condition` every 5 ms for up to `limit`.
func eventually(
    _ what: String, within limit: Duration = .seconds(10), _ condition: () async throws -> Bool
) async throws {
    let giveUp = ContinuousClock.now + limit
    while try await !condition() {
        guard ContinuousClock.now < giveUp else { throw TimedOut(what: what) }
        try await Task.sleep(for: .milliseconds(5))
    }
}

extension JobRunner {
    /// Waits for job `id` to end and returns it.
    func finished(_ id: String) async throws -> Job {
        var last: Job?
        try await watch(id) { last = $0 }
        return last!
    }
}
