import ArgumentParser
import Base
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

    /// As the services' executables: 0 after a graceful stop, 1 after a failure.
    func run() async throws {
        do {
            try await ServiceRunner.run(name: "jobs-test", options: options) { environment in
                let knobs = ProcessInfo.processInfo.environment
                // For the test of a SIGTERM while a service starts up: a slow start (opening, migrating).
                if let delay = knobs["JOBS_TEST_STARTUP_DELAY_MS"].flatMap(Int.init), delay > 0 {
                    environment.logger.info("delaying startup by \(delay) ms (JOBS_TEST_STARTUP_DELAY_MS)")
                    try await Task.sleep(for: .milliseconds(delay))
                }
                // For the test of a failed start.
                if let reason = knobs["JOBS_TEST_FAIL_STARTUP"] { throw StartupRefused(description: reason) }
                var runnerOptions = JobRunner.Options()
                runnerOptions.progressInterval = .milliseconds(50)
                runnerOptions.watchInterval = .milliseconds(50)
                let jobs = try await ServiceJobs(
                    database: try Database(path: environment.databasePath, migrations: []), logger: environment.logger,
                    shutdownGrace: environment.shutdownGrace, limits: environment.jobs, options: runnerOptions)
                var background = [jobs.backgroundService]
                // For the test of a background service that fails while the service runs.
                if let after = knobs["JOBS_TEST_FAILING_BACKGROUND_MS"].flatMap(Int.init) {
                    background.append(FailingBackgroundService(after: .milliseconds(after)))
                }
                return AppServices(
                    rpc: [
                        jobs.rpcService,
                        JobsTestingService(runner: jobs.runner, lane: environment.lane, logger: environment.logger),
                    ], background: background)
            }
        } catch {
            throw ExitCode.failure
        }
    }
}

struct StartupRefused: Error, CustomStringConvertible {
    let description: String
}

/// Throws `after` it starts, as a background service whose source went away would.
struct FailingBackgroundService: BackgroundService {
    let after: Duration
    var name: String { "failing test service" }

    struct Failed: Error, CustomStringConvertible {
        var description: String { "failed as asked (JOBS_TEST_FAILING_BACKGROUND_MS)" }
    }

    func run() async throws {
        try await Task.sleep(for: after)
        throw Failed()
    }
}

/// Starts echo/sleep jobs: `steps` steps of `step_ms`, progress after each, the request as the result.
/// Sleeps on the lane or on the handler's worker.
struct JobsTestingService: RPCService {
    let runner: JobRunner
    let lane: WorkLane
    let logger: Logger

    func register(in router: inout RPCRouter) {
        let runner = runner, lane = lane, logger = logger
        router.unary(JobsV1.JobsTesting.sleep) { request, _ in
            let micros = UInt32(max(0, min(request.ms, 60_000))) * 1000
            // What the shutdown test waits for: the call is being served.
            logger.debug("sleep call started")
            if request.onLane {
                try await lane.run { usleep(micros) }
            } else {
                usleep(micros)
            }
            return JobsV1.SleepResponse()
        }
        router.unary(JobsV1.JobsTesting.startTestJob) { request, serverContext in
            guard (0...10_000).contains(request.steps), (0...60_000).contains(request.stepMs) else {
                throw RPCError(.invalidArgument, "steps must be 0…10000 and step_ms 0…60000")
            }
            let job = try await runner.start(
                kind: "test.sleep", submitter: serverContext.submitter, user: serverContext.caller?.name
            ) { context -> JobsV1.StartTestJobRequest in
                for step in 0..<Int(request.steps) {
                    try context.checkCancellation()
                    usleep(UInt32(request.stepMs) * 1000)
                    context.report(
                        progress: Double(step + 1) / Double(request.steps),
                        message: "step \(step + 1) of \(request.steps)")
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
