import Foundation
import JobsAPI
import JobsTestingAPI
import RPC
import RPCWire
import Schema
import Storage
import TestSupport
import Testing
import Transport

/// Jobs against real replicas (`jobs-test-service` processes sharing one database file).
@Suite(.serialized) struct KilledReplicaTests {
    /// A job runs on replica A and is watched from replica B, which sees its progress; A is killed with
    /// `kill -9`: B's watch ends with the job FAILED (UNAVAILABLE), and A, restarted, reports it failed.
    @Test func aJobSurvivesKill9OfItsReplicaAsAFailedJob() async throws {
        let scratch = try Scratch()
        let base = try RawSocket.freePortBlock(count: 2)
        let a = try await ReplicaProcess(port: base, database: scratch.databasePath, directory: scratch.directory)
        let b = try await ReplicaProcess(port: base + 1, database: scratch.databasePath, directory: scratch.directory)
        defer { b.stop() }

        let started = try await a.client.unary(
            JobsV1.JobsTesting.startTestJob, JobsV1.StartTestJobRequest(steps: 1000, stepMs: 20, payload: [7]))
        #expect(started.state == .queued || started.state == .running)
        #expect(started.kind == "test.sleep")

        let seen = Box<[JobsV1.Job]>([])
        let watch = Task {
            for try await job in b.client.serverStreaming(JobsV1.Jobs.watchJob, JobsV1.WatchJobRequest(id: started.id))
            {
                seen.set(seen.value + [job])
            }
        }
        try await eventually("progress seen from the other replica") {
            seen.value.contains { $0.state == .running && $0.progress > 0 && $0.message.hasPrefix("step ") }
        }
        a.kill9()
        try await withTimeout(TestTime.scaled(.seconds(10))) { try await watch.value }
        let last = try #require(seen.value.last)
        #expect(last.state == .failed)
        #expect(last.error?.code == StatusCode.unavailable.rawValue)
        #expect(last.finishedAt != nil)
        #expect(seen.value.dropLast().allSatisfy { $0.state == .queued || $0.state == .running })

        let restarted = try await ReplicaProcess(
            port: base, database: scratch.databasePath, directory: scratch.directory)
        defer { restarted.stop() }
        let reported = try await restarted.client.unary(JobsV1.Jobs.getJob, JobsV1.GetJobRequest(id: started.id))
        #expect(reported.state == .failed)
        #expect(reported.error == last.error)
    }

    /// The only replica is killed and restarted: on start it fails the jobs it was running, so List shows no
    /// job running forever.
    @Test func aRestartedReplicaFailsItsJobsWhenItStarts() async throws {
        let scratch = try Scratch()
        let port = try RawSocket.freePortBlock(count: 1)
        let a = try await ReplicaProcess(port: port, database: scratch.databasePath, directory: scratch.directory)
        let job = try await a.client.unary(
            JobsV1.JobsTesting.startTestJob, JobsV1.StartTestJobRequest(steps: 1000, stepMs: 20))
        try await eventually("the job running") {
            try await a.client.unary(JobsV1.Jobs.getJob, JobsV1.GetJobRequest(id: job.id)).state == .running
        }
        a.kill9()
        // Straight in the database, before any replica looked: still RUNNING.
        let store = try JobsTestsStore(path: scratch.databasePath)
        #expect(try await store.state(of: job.id) == "running")

        let restarted = try await ReplicaProcess(
            port: port, database: scratch.databasePath, directory: scratch.directory)
        defer { restarted.stop() }
        #expect(try await store.state(of: job.id) == "failed")  // failed on start, before any call
        let listed = try await restarted.client.unary(JobsV1.Jobs.listJobs, JobsV1.ListJobsRequest())
        #expect(listed.jobs.map(\.id) == [job.id])
        #expect(listed.jobs.first?.state == .failed)
    }

    /// Start, watch to the end, result; a failing job; cancel; list and its validation; through the wire.
    @Test func theJobsRPCs() async throws {
        let scratch = try Scratch()
        let port = try RawSocket.freePortBlock(count: 1)
        let replica = try await ReplicaProcess(port: port, database: scratch.databasePath, directory: scratch.directory)
        defer { replica.stop() }
        let client = replica.client

        let request = JobsV1.StartTestJobRequest(steps: 3, stepMs: 10, payload: [1, 2, 3])
        let job = try await client.unary(JobsV1.JobsTesting.startTestJob, request)
        var states: [JobsV1.JobState] = []
        var last: JobsV1.Job?
        for try await snapshot in client.serverStreaming(JobsV1.Jobs.watchJob, JobsV1.WatchJobRequest(id: job.id)) {
            states.append(snapshot.state)
            last = snapshot
        }
        #expect(states.last == .succeeded)
        let result = try #require(last?.result)
        #expect(result.typeName == JobsV1.StartTestJobRequest.protoName)
        #expect(try JobsV1.StartTestJobRequest(serializedBytes: result.value) == request)
        #expect(last?.progress == 1)

        let failing = try await client.unary(
            JobsV1.JobsTesting.startTestJob, JobsV1.StartTestJobRequest(steps: 1, stepMs: 1, failWithCode: 9))
        try await eventually("the failing job to end") {
            try await client.unary(JobsV1.Jobs.getJob, JobsV1.GetJobRequest(id: failing.id)).state == .failed
        }
        let failed = try await client.unary(JobsV1.Jobs.getJob, JobsV1.GetJobRequest(id: failing.id))
        #expect(failed.error == JobsV1.JobError(code: 9, message: "failed as asked"))

        let long = try await client.unary(
            JobsV1.JobsTesting.startTestJob, JobsV1.StartTestJobRequest(steps: 1000, stepMs: 20))
        _ = try await client.unary(JobsV1.Jobs.cancelJob, JobsV1.CancelJobRequest(id: long.id))
        try await eventually("the cancelled job to end") {
            try await client.unary(JobsV1.Jobs.getJob, JobsV1.GetJobRequest(id: long.id)).state == .cancelled
        }

        let page = try await client.unary(JobsV1.Jobs.listJobs, JobsV1.ListJobsRequest(pageSize: 2))
        #expect(page.jobs.map(\.id) == [long.id, failing.id])
        let rest = try await client.unary(
            JobsV1.Jobs.listJobs, JobsV1.ListJobsRequest(pageSize: 2, pageToken: page.nextPageToken))
        #expect(rest.jobs.map(\.id) == [job.id])
        #expect(rest.nextPageToken.isEmpty)
        let cancelled = try await client.unary(
            JobsV1.Jobs.listJobs, JobsV1.ListJobsRequest(states: [.cancelled], kind: "test.sleep"))
        #expect(cancelled.jobs.map(\.id) == [long.id])

        for bad in [
            JobsV1.ListJobsRequest(pageSize: 0), JobsV1.ListJobsRequest(pageToken: "x"),
            JobsV1.ListJobsRequest(states: [.unspecified]),
        ] {
            await #expect { _ = try await client.unary(JobsV1.Jobs.listJobs, bad) } throws: {
                ($0 as? RPCError)?.code == .invalidArgument
            }
        }
        for call in [
            { _ = try await client.unary(JobsV1.Jobs.getJob, JobsV1.GetJobRequest(id: "nope")) },
            { _ = try await client.unary(JobsV1.Jobs.cancelJob, JobsV1.CancelJobRequest(id: "nope")) },
            { for try await _ in client.serverStreaming(JobsV1.Jobs.watchJob, JobsV1.WatchJobRequest(id: "nope")) {} },
        ] as [@Sendable () async throws -> Void] {
            await #expect { try await call() } throws: { ($0 as? RPCError)?.code == .notFound }
        }
    }

    /// With every worker blocked by a handler that does not use the lane and every lane thread busy, all on
    /// 2-second calls, a health check is answered within 50 ms (each scaled by `TestTime`, so the calls still
    /// hold every thread when the check is made). The service runs in its own process: blocking
    /// every worker there blocks every thread of its cooperative pool.
    @Test func healthIsAnsweredWhileEveryWorkerAndLaneThreadIsBusy() async throws {
        let scratch = try Scratch()
        let port = try RawSocket.freePortBlock(count: 1)
        let replica = try await ReplicaProcess(
            port: port, database: scratch.databasePath, directory: scratch.directory,
            extraArguments: ["--workers", "2", "--lane-threads", "2"])
        defer { replica.stop() }
        let client = replica.client
        var calls: [Task<Void, any Error>] = []
        let busy = Int32(2000 * TestTime.scale)
        for onLane in [true, true, false, false] {
            calls.append(
                Task {
                    _ = try await client.unary(JobsV1.JobsTesting.sleep, JobsV1.SleepRequest(ms: busy, onLane: onLane))
                })
        }
        try await Task.sleep(for: TestTime.scaled(.milliseconds(300)))  // every call has reached its handler
        let started = ContinuousClock.now
        _ = try await client.unary(
            RpcV1.Health.check, RpcV1.HealthCheckRequest(), options: CallOptions(timeout: TestTime.scaled(.seconds(5))))
        let latency = ContinuousClock.now - started
        #expect(latency < TestTime.scaled(.milliseconds(50)), "health took \(latency)")
        for call in calls { try await call.value }
    }

    /// Issue 24: 100 trainings once filled the heavy-work lane's queue and every quick call was refused
    /// "the lane queue is full" until they drained. Jobs now wait apart, bounded per submitter and in
    /// all, and quick calls on the lane are served throughout.
    @Test func aJobFloodIsRefusedPastItsBoundsAndNeverRefusesQuickCalls() async throws {
        let scratch = try Scratch()
        let port = try RawSocket.freePortBlock(count: 1)
        let replica = try await ReplicaProcess(
            port: port, database: scratch.databasePath, directory: scratch.directory,
            extraArguments: [
                "--lane-threads", "1", "--lane-queue", "2", "--job-threads", "1", "--max-jobs-per-user", "5",
            ])
        defer { replica.stop() }
        let client = replica.client
        var accepted: [String] = []
        var refusals: [RPCError] = []
        for _ in 0..<30 {
            do {
                accepted.append(
                    try await client.unary(
                        JobsV1.JobsTesting.startTestJob, JobsV1.StartTestJobRequest(steps: 100, stepMs: 50)
                    ).id)
            } catch let error as RPCError {
                refusals.append(error)
            }
        }
        #expect(accepted.count == 5)
        #expect(refusals.count == 25 && refusals.allSatisfy { $0.code == .resourceExhausted })
        #expect(
            refusals.first?.message.contains("127.0.0.1 has 5 jobs queued or running") == true,
            "\(refusals.first?.message ?? "")")
        // Quick calls on the lane are served while the jobs wait and run.
        for _ in 0..<6 {
            _ = try await client.unary(
                JobsV1.JobsTesting.sleep, JobsV1.SleepRequest(ms: 5, onLane: true),
                options: CallOptions(timeout: TestTime.scaled(.seconds(5))))
        }
        for id in accepted { _ = try await client.unary(JobsV1.Jobs.cancelJob, JobsV1.CancelJobRequest(id: id)) }
        // Once they ended, the submitter may start jobs again.
        try await eventually("the cancelled jobs ended") {
            (try? await client.unary(JobsV1.JobsTesting.startTestJob, JobsV1.StartTestJobRequest(steps: 1, stepMs: 1)))
                != nil
        }
    }
}

/// Reads job rows straight from the database file, as no replica would.
struct JobsTestsStore {
    let path: String

    init(path: String) throws { self.path = path }

    func state(of id: String) async throws -> String? {
        let database = try Storage.Database(path: path, migrations: [])
        return try await database.read { try $0.queryOne("SELECT state FROM jobs WHERE id = ?", [id])?.string(0) }
    }
}

struct Timeout: Error {}

func withTimeout<T: Sendable>(_ limit: Duration, _ body: @escaping @Sendable () async throws -> T) async throws -> T {
    try await withThrowingTaskGroup(of: T.self) { group in
        group.addTask { try await body() }
        group.addTask {
            try await Task.sleep(for: limit)
            throw Timeout()
        }
        defer { group.cancelAll() }
        return try await group.next()!
    }
}
