import Foundation
import Jobs
import Storage
import TestSupport
import Testing
import WorkLane

/// Jobs whose process died: reported FAILED (UNAVAILABLE), never lost nor RUNNING forever.
@Suite struct AbandonedJobTests {
    /// Records an owner and a running job of it straight in the database, as a replica that died would
    /// have left them.
    private func leaveRunningJob(in store: JobStore, owner: JobOwner) async throws -> String {
        try await store.register(owner)
        let id = UUID().uuidString
        try await store.insert(Job(id: id, kind: "test", owner: owner.id))
        #expect(try store.markRunning(id))
        return id
    }

    /// A process that has exited, with the pid it had.
    private func deadProcess() throws -> JobOwner {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/true")
        try process.run()
        let pid = process.processIdentifier
        process.waitUntilExit()
        return JobOwner(
            id: UUID().uuidString, machine: JobOwner.current().machine, pid: pid, processStart: 12345,
            heartbeatAt: Date())
    }

    @Test func aRestartedReplicaFailsTheJobsOfDeadProcesses() async throws {
        let scratch = try Scratch()
        let runner = try scratch.runner()
        let dead = try await leaveRunningJob(in: runner.store, owner: try deadProcess())
        // Our own pid with another start time: the pid was reused by a later process.
        var reused = JobOwner.current()
        reused.id = UUID().uuidString
        reused.processStart += 1
        let reusedPid = try await leaveRunningJob(in: runner.store, owner: reused)
        // A live runner of this process: its job stays.
        let alive = try await leaveRunningJob(in: runner.store, owner: JobOwner.current())

        let restarted = try scratch.runner()
        let failed = try await restarted.recoverAbandonedJobs()
        #expect(Set(failed) == [dead, reusedPid])
        for id in [dead, reusedPid] {
            let job = try await restarted.snapshot(id)
            #expect(job.state == .failed)
            #expect(job.failure?.code == JobFailure.unavailableCode)
            #expect(job.failure?.message.contains("stopped") == true)
            #expect(job.finishedAt != nil)
        }
        #expect(try await restarted.snapshot(alive).state == .running)
        #expect(try await restarted.recoverAbandonedJobs().isEmpty)
    }

    /// Get, Watch and List of a sibling replica see the job fail as soon as its process is gone, without a
    /// restart.
    @Test func readsFailTheJobOfADeadProcess() async throws {
        let scratch = try Scratch()
        let runner = try scratch.runner()
        let id = try await leaveRunningJob(in: runner.store, owner: try deadProcess())
        var seen: [Job] = []
        try await runner.watch(id) { seen.append($0) }
        #expect(seen.map(\.state) == [.failed])
        let other = try await leaveRunningJob(in: runner.store, owner: try deadProcess())
        #expect(try await runner.list(states: [.running, .queued], limit: 10).jobs.isEmpty)
        #expect(try await runner.store.job(other)?.state == .failed)
    }

    /// An owner the OS cannot be asked about (another pid namespace) lives by its heartbeat.
    @Test func ownersElsewhereLiveByTheirHeartbeat() async throws {
        let scratch = try Scratch()
        let runner = try scratch.runner()
        let beat = Date()
        let elsewhere = JobOwner(
            id: UUID().uuidString, machine: "another-boot/pid:[1]", pid: 1, processStart: 1, heartbeatAt: beat)
        let id = try await leaveRunningJob(in: runner.store, owner: elsewhere)
        #expect(try await runner.store.failAbandoned(lease: 30, now: beat).isEmpty)
        #expect(try await runner.store.failAbandoned(lease: 30, now: beat.addingTimeInterval(29)).isEmpty)
        #expect(try await runner.store.failAbandoned(lease: 30, now: beat.addingTimeInterval(31)) == [id])
        let job = try await runner.snapshot(id)
        #expect(job.failure?.message.contains("heartbeat") == true)
    }

    /// A runner with active jobs keeps its heartbeat fresh.
    @Test func aBusyRunnerRefreshesItsHeartbeat() async throws {
        let scratch = try Scratch()
        let runner = try scratch.runner()
        let proceed = Gate()
        let job = try await runner.start(kind: "test") { _ in
            proceed.wait()
            return nil
        }
        let first = try await heartbeat(of: runner)
        try await eventually("a newer heartbeat") { try await heartbeat(of: runner) > first }
        proceed.open()
        _ = try await runner.finished(job.id)
    }

    /// Starting a job refreshes the owner's heartbeat: after a quiet spell the last one may be older than the
    /// lease, and a replica in another pid namespace would fail the new job at once.
    @Test func startingAJobRefreshesAStaleHeartbeat() async throws {
        let scratch = try Scratch()
        let runner = try scratch.runner()
        _ = try await runner.finished(try await runner.start(kind: "test") { _ in nil }.id)
        try await runner.store.database.write { try $0.execute("UPDATE job_owners SET heartbeat_at = 0") }
        let before = Date().timeIntervalSince1970
        let proceed = Gate()
        let job = try await runner.start(kind: "test") { _ in
            proceed.wait()
            return nil
        }
        #expect(try await heartbeat(of: runner) >= before - 1)
        proceed.open()
        _ = try await runner.finished(job.id)
    }

    private func heartbeat(of runner: JobRunner) async throws -> Double {
        try await runner.store.database.read { connection in
            try connection.queryOne("SELECT heartbeat_at FROM job_owners WHERE id = ?", [runner.owner.id])?.double(0)
                ?? 0
        }
    }

    @Test func theProcessStartTimeIdentifiesAProcess() throws {
        let me = JobOwner.current()
        #expect(me.processStart > 0)
        #expect(me.isAlive(lease: 0))
        var later = me
        later.processStart += 1
        #expect(!later.isAlive(lease: 1000))
    }
}
