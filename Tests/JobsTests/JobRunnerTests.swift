import Foundation
import Jobs
import JobsAPI
import JobsService
import RPC
import Storage
import TestSupport
import Testing
import WorkLane

@Suite struct JobRunnerTests {
    @Test func aJobRunsToSuccessWithItsResult() async throws {
        let scratch = try Scratch()
        let runner = try scratch.runner()
        let before = Date()
        let job = try await runner.start(kind: "test.echo") { context in
            context.report(progress: 0.5, message: "half way")
            return JobResult(typeName: "test.Echo", bytes: [1, 2, 3])
        }
        #expect(job.state == .queued)
        #expect(job.kind == "test.echo")
        let done = try await runner.finished(job.id)
        #expect(done.state == .succeeded)
        #expect(done.result == JobResult(typeName: "test.Echo", bytes: [1, 2, 3]))
        #expect(done.failure == nil)
        #expect(done.progress == 1)
        let started = try #require(done.startedAt), finished = try #require(done.finishedAt)
        #expect(done.createdAt >= before.addingTimeInterval(-1))
        #expect(done.createdAt <= started && started <= finished)
        #expect(runner.activeJobIDs.isEmpty)
    }

    @Test func aThrowingJobFailsWithItsStatus() async throws {
        let scratch = try Scratch()
        let runner = try scratch.runner()
        let invalid = try await runner.start(kind: "test") { _ in throw JobFailure(code: 3, message: "bad input") }
        #expect(try await runner.finished(invalid.id).failure == JobFailure(code: 3, message: "bad input"))
        struct Oops: Error {}
        let crashed = try await runner.start(kind: "test") { _ in throw Oops() }
        let failed = try await runner.finished(crashed.id)
        #expect(failed.state == .failed)
        #expect(failed.failure?.code == JobFailure.internalCode)
        #expect(failed.result == nil)
    }

    /// Progress reported by the work reaches the database (so other replicas see it) while the job runs.
    @Test func progressIsWrittenWhileTheJobRuns() async throws {
        let scratch = try Scratch()
        let runner = try scratch.runner()
        let proceed = Gate()
        let job = try await runner.start(kind: "test") { context in
            context.report(progress: 0.25, message: "a quarter")
            proceed.wait()
            return nil
        }
        let otherReplica = try JobStore(database: try Database(path: scratch.databasePath, migrations: []))
        try await eventually("progress in the database") {
            let seen = try await otherReplica.job(job.id)
            return seen?.state == .running && seen?.progress == 0.25 && seen?.message == "a quarter"
        }
        proceed.open()
        _ = try await runner.finished(job.id)
    }

    /// A job cancelled while it waits for a lane thread ends CANCELLED at once and never runs.
    @Test func cancellingAQueuedJob() async throws {
        let scratch = try Scratch()
        let runner = try scratch.runner(lane: WorkLane(name: "lane", threads: 1, queueLimit: 4))
        let proceed = Gate()
        let blocker = try await runner.start(kind: "test") { _ in
            proceed.wait()
            return nil
        }
        let ran = Box(false)
        let queued = try await runner.start(kind: "test") { _ in
            ran.set(true)
            return nil
        }
        let cancelled = try await runner.cancel(queued.id)
        #expect(cancelled.state == .cancelled)
        #expect(cancelled.cancelRequested)
        #expect(cancelled.failure?.code == JobFailure.cancelledCode)
        proceed.open()
        #expect(try await runner.finished(blocker.id).state == .succeeded)
        #expect(!ran.value)
    }

    /// A running job that checks for cancellation ends CANCELLED; cancelling an ended job changes nothing.
    @Test func cancellingARunningJob() async throws {
        let scratch = try Scratch()
        let runner = try scratch.runner()
        let started = Gate()
        let job = try await runner.start(kind: "test") { context in
            started.open()
            while true {
                try context.checkCancellation()
                usleep(1000)
            }
        }
        await started.opened()
        _ = try await runner.cancel(job.id)
        let ended = try await runner.finished(job.id)
        #expect(ended.state == .cancelled)
        #expect(try await runner.cancel(job.id) == ended)
        await #expect(throws: JobNotFound.self) { try await runner.cancel("no-such-job") }
    }

    /// A cancel asked of another replica reaches the runner through the database.
    @Test func cancellingThroughAnotherReplica() async throws {
        let scratch = try Scratch()
        let runner = try scratch.runner(), otherReplica = try scratch.runner()
        let started = Gate()
        let job = try await runner.start(kind: "test") { context in
            started.open()
            while !context.isCancelled { usleep(1000) }
            throw CancellationError()
        }
        await started.opened()
        let asked = try await otherReplica.cancel(job.id)
        #expect(asked.cancelRequested)
        #expect(try await otherReplica.finished(job.id).state == .cancelled)
    }

    /// A watcher gets the job at once, then its changes, and the last message is the end state; from another
    /// replica too. Each step waits until the watcher has seen the one before, so none is coalesced away.
    @Test func watchFollowsTheJobToItsEnd() async throws {
        let scratch = try Scratch()
        let runner = try scratch.runner(), otherReplica = try scratch.runner()
        let gates = (0...3).map { _ in Gate() }
        let job = try await runner.start(kind: "test") { context in
            for step in 1...3 {
                gates[step - 1].wait()
                context.report(progress: Double(step) / 4, message: "step \(step)")
            }
            gates[3].wait()
            return nil
        }
        let startedWatching = ContinuousClock.now
        var firstAfter: Duration?
        var seen: [Job] = []
        try await otherReplica.watch(job.id) { job in
            if firstAfter == nil { firstAfter = .now - startedWatching }
            seen.append(job)
            let step = job.message.isEmpty ? 0 : Int(job.message.dropFirst(5)) ?? 0
            gates[step].open()
        }
        #expect(try #require(firstAfter) < TestTime.scaled(.seconds(1)))
        #expect(seen.last?.state == .succeeded)
        #expect(seen.dropLast().allSatisfy { $0.state.isActive })
        #expect(seen.map(\.progress) == seen.map(\.progress).sorted())
        #expect(Set(seen.map(\.message)).isSuperset(of: ["step 1", "step 2", "step 3"]))
    }

    @Test func aFullLaneRefusesTheJobAndRecordsNothing() async throws {
        let scratch = try Scratch()
        let runner = try scratch.runner(lane: WorkLane(name: "lane", threads: 1, queueLimit: 1))
        let proceed = Gate()
        let running = try await runner.start(kind: "test") { _ in
            proceed.wait()
            return nil
        }
        try await eventually("the first job running") { try await runner.snapshot(running.id).state == .running }
        let queued = try await runner.start(kind: "test") { _ in nil }
        await #expect(throws: WorkLane.QueueFull.self) { _ = try await runner.start(kind: "test") { _ in nil } }
        #expect(try await runner.list(limit: 10).jobs.map(\.id) == [queued.id, running.id])
        proceed.open()
        _ = try await runner.finished(queued.id)
    }

    /// Jobs queued or running are bounded per submitter and in all: past either, `start` throws
    /// `JobQueueFull` and records nothing; a slot comes back when a job ends.
    @Test func jobsAreBoundedPerSubmitterAndInAll() async throws {
        let scratch = try Scratch()
        var options = JobRunner.Options()
        options.maxActiveJobs = 3
        options.maxActiveJobsPerSubmitter = 2
        let runner = JobRunner(
            store: try JobStore(database: try Database(path: scratch.databasePath, migrations: [])),
            lane: WorkLane(name: "jobs", threads: 1, queueLimit: 100), options: options)
        let proceed = Gate()
        let first = try await runner.start(kind: "test", submitter: "ana") { _ in
            proceed.wait()
            return nil
        }
        _ = try await runner.start(kind: "test", submitter: "ana") { _ in nil }
        await #expect(throws: JobRunner.JobQueueFull.self) {
            _ = try await runner.start(kind: "test", submitter: "ana") { _ in nil }
        }
        _ = try await runner.start(kind: "test", submitter: "ben") { _ in nil }
        await #expect(throws: JobRunner.JobQueueFull.self) {
            _ = try await runner.start(kind: "test", submitter: "cyril") { _ in nil }
        }
        #expect(try await runner.list(limit: 10).jobs.count == 3)
        proceed.open()
        _ = try await runner.finished(first.id)
        try await eventually("a slot free again") {
            (try? await runner.start(kind: "test", submitter: "cyril") { _ in nil }) != nil
        }
    }

    @Test func listIsNewestFirstFilteredAndPaged() async throws {
        let scratch = try Scratch()
        let runner = try scratch.runner()
        var ids: [String] = []
        for index in 0..<5 {
            let job = try await runner.start(kind: index % 2 == 0 ? "even" : "odd") { _ in
                if index == 3 { throw JobFailure(code: 9, message: "no") }
                return nil
            }
            _ = try await runner.finished(job.id)
            ids.append(job.id)
        }
        let first = try await runner.list(limit: 2)
        #expect(first.jobs.map(\.id) == [ids[4], ids[3]])
        let firstToken: Int64 = try #require(first.next)
        let second = try await runner.list(limit: 2, before: firstToken)
        #expect(second.jobs.map(\.id) == [ids[2], ids[1]])
        let secondToken: Int64 = try #require(second.next)
        let last = try await runner.list(limit: 2, before: secondToken)
        #expect(last.jobs.map(\.id) == [ids[0]])
        #expect(last.next == nil)
        #expect(try await runner.list(kind: "even", limit: 10).jobs.map(\.id) == [ids[4], ids[2], ids[0]])
        #expect(try await runner.list(states: [.failed], limit: 10).jobs.map(\.id) == [ids[3]])
        #expect(try await runner.list(states: [.failed], kind: "even", limit: 10).jobs.isEmpty)
    }

    /// A job's result holding a NUL in a string fails the job instead of being stored cut at the NUL (before: a
    /// result "a\0b" was kept as "a", and the job said it succeeded).
    @Test func aResultWithANULFailsTheJobRatherThanBeCut() async throws {
        let scratch = try Scratch()
        let runner = try scratch.runner()
        let job = try await runner.start(kind: "test") { _ in JobsV1.JobError(code: 3, message: "a\u{0}b") }
        let done = try await runner.finished(job.id)
        #expect(done.state == .failed && done.result == nil, "\(done)")
        #expect(done.failure?.code == StatusCode.internalError.rawValue, "\(String(describing: done.failure))")
        let kept = try await runner.start(kind: "test") { _ in JobsV1.JobError(code: 3, message: "a b") }
        #expect(try await runner.finished(kept.id).state == .succeeded)
    }
}
