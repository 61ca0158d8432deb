import Foundation
import Jobs
import Storage
import TestSupport
import Testing
import WorkLane

/// A runner stopped with its service (`JobRunner.shutDown`) leaves no job RUNNING or QUEUED: each ends
/// FAILED with UNAVAILABLE and says the service shut down.
@Suite struct JobRunnerShutdownTests {
    /// A running job whose work checks for cancellation, and a job queued behind it, end failed by the
    /// shutdown; the runner then refuses new jobs.
    @Test func runningAndQueuedJobsEndFailedByTheShutdown() async throws {
        let scratch = try Scratch()
        let runner = try scratch.runner(lane: WorkLane(name: "lane", threads: 1, queueLimit: 4))
        let started = Gate()
        let running = try await runner.start(kind: "test") { context in
            started.open()
            while true {
                try context.checkCancellation()
                usleep(1000)
            }
        }
        let ran = Box(false)
        let queued = try await runner.start(kind: "test") { _ in
            ran.set(true)
            return nil
        }
        await started.opened()
        await runner.shutDown(grace: TestTime.scaled(.seconds(5)))
        #expect(runner.activeJobIDs.isEmpty)
        let otherReplica = try JobStore(database: try Database(path: scratch.databasePath, migrations: []))
        for id in [running.id, queued.id] {
            let job = try #require(try await otherReplica.job(id))
            #expect(job.state == .failed, "job \(id)")
            #expect(job.failure == JobRunner.shutdownFailure)
            #expect(job.finishedAt != nil)
        }
        #expect(!ran.value)
        await #expect(throws: JobRunner.Stopped.self) { try await runner.start(kind: "test") { _ in nil } }
    }

    /// Work that does not look at cancellation is recorded failed once the grace period is over, and its
    /// late end does not change that record.
    @Test func workThatIgnoresTheStopIsRecordedAfterTheGrace() async throws {
        let scratch = try Scratch()
        let runner = try scratch.runner()
        let started = Gate(), proceed = Gate()
        let job = try await runner.start(kind: "test") { _ in
            started.open()
            proceed.wait()
            return JobResult(typeName: "test.Late", bytes: [])
        }
        await started.opened()
        let before = ContinuousClock.now
        await runner.shutDown(grace: .milliseconds(200))
        #expect(ContinuousClock.now - before >= .milliseconds(200))
        let recorded = try #require(try await runner.store.job(job.id))
        #expect(recorded.state == .failed)
        #expect(recorded.failure?.code == JobFailure.unavailableCode)
        #expect(recorded.failure?.message.hasPrefix(JobRunner.shutdownFailure.message) == true)
        #expect(recorded.failure?.message.contains("did not stop") == true)
        proceed.open()
        try await eventually("the work's own end") { runner.activeJobIDs.isEmpty }
        #expect(try await runner.store.job(job.id) == recorded)
    }

    /// A job someone cancelled before the shutdown ends CANCELLED, as they asked.
    @Test func aJobCancelledBeforeTheShutdownStaysCancelled() async throws {
        let scratch = try Scratch()
        let runner = try scratch.runner()
        let started = Gate(), proceed = Gate()
        let job = try await runner.start(kind: "test") { context in
            started.open()
            proceed.wait()
            try context.checkCancellation()
            return nil
        }
        await started.opened()
        // Returns with the request made, the work still held (after its 500 ms wait for the end).
        #expect(try await runner.cancel(job.id).cancelRequested)
        let shutdown = Task { await runner.shutDown(grace: TestTime.scaled(.seconds(5))) }
        try await Task.sleep(for: TestTime.scaled(.milliseconds(100)))  // the shutdown has asked the job to stop too
        proceed.open()
        await shutdown.value
        #expect(try await runner.store.job(job.id)?.state == .cancelled)
    }
}
