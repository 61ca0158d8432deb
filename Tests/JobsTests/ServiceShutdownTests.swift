import Foundation
import Jobs
import JobsAPI
import RPC
import RPCWire
import Schema
import Storage
import TestSupport
import Testing
import Transport

/// How a real service executable (`jobs-test-service`, on `ServiceRunner`) stops: on SIGTERM it drains
/// the calls in flight and its jobs together and exits 0; a failed start or a failed background service
/// exits 1, from the executable.
@Suite(.serialized, .timeLimit(.minutes(2))) struct ServiceShutdownTests {
    /// SIGTERM during a burst of long calls: every call that was running completes OK; meanwhile health
    /// checks answer NOT_SERVING, a new call on an open connection and a new connection are refused
    /// UNAVAILABLE; then the process exits 0.
    @Test func sigtermLosesNoneOfTheCallsInFlight() async throws {
        // The calls last (scaled) long enough to be in flight through the draining checks; the grace outlasts them.
        let service = try await LoggedService(
            arguments: [
                "--lane-threads", "16", "--shutdown-grace", "\(Int(20 * TestTime.scale))", "--log-level", "debug",
            ])
        let length = Int32(3000 * TestTime.scale)
        defer { service.stop() }
        let calls = 12
        let results = (0..<calls).map { _ in
            Task {
                try await service.client.unary(
                    JobsV1.JobsTesting.sleep, JobsV1.SleepRequest(ms: length, onLane: true),
                    options: CallOptions(timeout: TestTime.scaled(.seconds(30))))
            }
        }
        // Every call is being served before the signal (each logs as it starts).
        try await eventually("\(calls) calls in flight") {
            service.log.components(separatedBy: "sleep call started").count - 1 == calls
        }
        kill(service.pid, SIGTERM)

        try await eventually("health NOT_SERVING while draining") {
            try await service.client.unary(RpcV1.Health.check, RpcV1.HealthCheckRequest()).status == .notServing
        }
        let refused = await #expect(throws: RPCError.self) {
            try await service.client.unary(JobsV1.JobsTesting.sleep, JobsV1.SleepRequest(ms: 1))
        }
        #expect(refused?.code == .unavailable)
        let newcomer = RPCClient(
            transports: [try TCPClientTransport(endpoint: "127.0.0.1:\(service.port)")], retry: .init(maxAttempts: 1))
        defer { newcomer.close() }
        let refusedConnection = await #expect(throws: RPCError.self) {
            try await newcomer.unary(
                RpcV1.Health.check, RpcV1.HealthCheckRequest(),
                options: CallOptions(timeout: TestTime.scaled(.seconds(2))))
        }
        #expect(refusedConnection?.code == .unavailable)

        for result in results { _ = try await result.value }
        let status = try await service.exitStatus()
        #expect(status == 0)
        #expect(service.log.contains("received SIGTERM; draining"), "\(service.log)")
        #expect(!service.log.contains("still running after"), "\(service.log)")
    }

    /// A job running when the service stops ends FAILED (UNAVAILABLE, "the service shut down"), recorded in
    /// the database before the process exits 0: not left RUNNING for a later replica to find.
    @Test func aRunningJobIsRecordedFailedByTheShutdown() async throws {
        let service = try await LoggedService()
        defer { service.stop() }
        let job = try await service.client.unary(
            JobsV1.JobsTesting.startTestJob, JobsV1.StartTestJobRequest(steps: 1000, stepMs: 20))
        try await eventually("the job running") {
            try await service.client.unary(JobsV1.Jobs.getJob, JobsV1.GetJobRequest(id: job.id)).state == .running
        }
        kill(service.pid, SIGTERM)
        #expect(try await service.exitStatus() == 0)
        let store = try JobStore(database: try Database(path: service.databasePath, migrations: []))
        let recorded = try #require(try await store.job(job.id))
        #expect(recorded.state == .failed)
        #expect(recorded.failure == JobRunner.shutdownFailure)
    }

    /// A background service that fails while the service runs is logged and stops the service, gracefully
    /// (its stop is logged too), with exit status 1.
    @Test func aFailingBackgroundServiceEndsTheProcessNonZero() async throws {
        let service = try await LoggedService(environment: ["JOBS_TEST_FAILING_BACKGROUND_MS": "500"])
        defer { service.stop() }
        #expect(try await service.exitStatus() == 1)
        #expect(
            service.log.contains("background service failing test service failed: failed as asked"), "\(service.log)")
        #expect(service.log.contains("stopped after"), "\(service.log)")
    }

    /// A setup that fails (a database that cannot be opened, say) exits 1, logging why.
    @Test func aFailedStartExitsOne() async throws {
        let service = try LoggedService(launchingWith: ["JOBS_TEST_FAIL_STARTUP": "no database today"])
        defer { service.stop() }
        #expect(try await service.exitStatus() == 1)
        #expect(service.log.contains("failed to start: no database today"), "\(service.log)")
        #expect(!service.log.contains("started: pid"))
    }
}

/// One `jobs-test-service` process on a free port, its log in a file, and a client for it.
final class LoggedService: @unchecked Sendable {
    let directory: URL
    let process = Process()
    let port: Int
    let client: RPCClient
    var databasePath: String { directory.appendingPathComponent("data/jobs-test.sqlite").path }
    var pid: Int32 { process.processIdentifier }
    var log: String {
        (try? String(contentsOf: directory.appendingPathComponent("service.log"), encoding: .utf8)) ?? ""
    }

    /// Starts the process without waiting for it to serve.
    init(launchingWith environment: [String: String] = [:], arguments: [String] = []) throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "service-shutdown-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        port = try RawSocket.freePortBlock(count: 1)
        let logFile = directory.appendingPathComponent("service.log")
        _ = FileManager.default.createFile(atPath: logFile.path, contents: nil)
        let handle = try FileHandle(forWritingTo: logFile)
        process.executableURL = URL(fileURLWithPath: "\(ReplicaProcess.binDirectory)/jobs-test-service")
        process.arguments =
            ["--port", "\(port)", "--data-dir", directory.appendingPathComponent("data").path] + arguments
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = handle
        process.standardError = handle
        try process.run()
        try handle.close()
        client = RPCClient(
            transports: [try TCPClientTransport(endpoint: "127.0.0.1:\(port)")], retry: .init(maxAttempts: 1))
    }

    /// Starts the process and waits until it answers SERVING.
    convenience init(environment: [String: String] = [:], arguments: [String] = []) async throws {
        try self.init(launchingWith: environment, arguments: arguments)
        try await eventually("the service serving", within: .seconds(30)) {
            guard process.isRunning else { throw ReplicaFailed(description: "the service exited: \(log)") }
            let answer = try? await client.unary(
                RpcV1.Health.check, RpcV1.HealthCheckRequest(),
                options: CallOptions(timeout: TestTime.scaled(.seconds(1))))
            return answer?.pid == Int64(pid) && answer?.status == .serving
        }
    }

    /// Waits (up to 30 s) for the process to exit by itself and returns its status; an end by a signal fails.
    func exitStatus() async throws -> Int32 {
        try await eventually("the service exiting", within: .seconds(30)) { !process.isRunning }
        try #require(process.terminationReason == .exit, "ended by signal \(process.terminationStatus)")
        return process.terminationStatus
    }

    func stop() {
        if process.isRunning {
            kill(pid, SIGKILL)
            process.waitUntilExit()
        }
        client.close()
        try? FileManager.default.removeItem(at: directory)
    }
}
