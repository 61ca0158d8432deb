import Foundation
import Jobs
import Storage
import Synchronization
import TestSupport
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
    func runner(lane: WorkLane = WorkLane(name: "lane", threads: 2, queueLimit: 8)) throws -> JobRunner {
        var options = JobRunner.Options()
        options.progressInterval = .milliseconds(20)
        options.watchInterval = .milliseconds(10)
        options.heartbeatInterval = .milliseconds(50)
        return JobRunner(
            store: try JobStore(database: try Database(path: databasePath, migrations: [])), lane: lane,
            options: options)
    }
}

struct TimedOut: Error, CustomStringConvertible {
    let what: String
    var description: String { "timed out waiting for \(what)" }
}

/// Polls `condition` every 5 ms for up to `limit` (scaled by `TestTime`).
func eventually(
    _ what: String, within limit: Duration = .seconds(10), _ condition: () async throws -> Bool
) async throws {
    let giveUp = ContinuousClock.now + TestTime.scaled(limit)
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
