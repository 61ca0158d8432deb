import ArgumentParser
import Foundation
import Jobs
import JobsAPI
import JobsService
import JobsTestingAPI
import RPC
import Schema
import ServiceKit
import Storage
import WorkLane

/// A service that runs test jobs (`menagerie.jobs.v1.JobsTesting`) and offers `menagerie.jobs.v1.Jobs`: what
/// the jobs tests start, watch and kill. Not part of the stack.
@main
struct JobsTestCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "jobs-test-service")

    @OptionGroup var options: ServiceOptions

    @Option(name: .customLong("database"), help: "The SQLite file (default: DATA_DIR/jobs-test.sqlite).")
    var databasePath: String?

    func run() async throws {
        try await ServiceRunner.run(name: "jobs-test", options: options) { environment in
            // For the test of a SIGTERM while a service starts up: a slow start (opening, migrating).
            if let delay = ProcessInfo.processInfo.environment["JOBS_TEST_STARTUP_DELAY_MS"].flatMap(Int.init), delay > 0 {
                environment.logger.info("delaying startup by \(delay) ms (JOBS_TEST_STARTUP_DELAY_MS)")
                try await Task.sleep(for: .milliseconds(delay))
            }
            let path = databasePath ?? environment.dataDirectory.appendingPathComponent("jobs-test.sqlite").path
            let store = try JobStore(database: try Database(path: path, migrations: []))
            var runnerOptions = JobRunner.Options()
            runnerOptions.progressInterval = .milliseconds(50)
            runnerOptions.watchInterval = .milliseconds(50)
            let runner = JobRunner(
                store: store, lane: environment.lane, options: runnerOptions, failureMapping: JobsRPC.failure)
            let failed = try await runner.recoverAbandonedJobs()
            if !failed.isEmpty { environment.logger.info("failed \(failed.count) jobs of stopped replicas: \(failed)") }
            return [JobsService(runner: runner), JobsTestingService(runner: runner, lane: environment.lane)]
        }
    }
}

/// Starts echo/sleep jobs: `steps` steps of `step_ms`, progress after each, the request as the result.
/// Sleeps on the lane or on the handler's worker.
struct JobsTestingService: RPCService {
    let runner: JobRunner
    let lane: ThreadPool

    func register(in router: inout RPCRouter) {
        let runner = runner, lane = lane
        router.unary(JobsV1.JobsTesting.sleep) { request, _ in
            let micros = UInt32(max(0, min(request.ms, 60_000))) * 1000
            if request.onLane {
                try await lane.run { usleep(micros) }
            } else {
                usleep(micros)
            }
            return JobsV1.SleepResponse()
        }
        router.unary(JobsV1.JobsTesting.startTestJob) { request, _ in
            guard (0...10_000).contains(request.steps), (0...60_000).contains(request.stepMs) else {
                throw RPCError(.invalidArgument, "steps must be 0…10000 and step_ms 0…60000")
            }
            let job = try await runner.start(kind: "test.sleep") { context -> JobsV1.StartTestJobRequest in
                for step in 0..<Int(request.steps) {
                    try context.checkCancellation()
                    usleep(UInt32(request.stepMs) * 1000)
                    context.report(
                        progress: Double(step + 1) / Double(request.steps), message: "step \(step + 1) of \(request.steps)")
                }
                if request.failWithCode != 0 {
                    throw RPCError(StatusCode(rawValue: request.failWithCode), "failed as asked")
                }
                return request
            }
            return JobsV1.Job(job)
        }
    }
}
