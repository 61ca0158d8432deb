import ArgumentParser
import Foundation
import JobsAPI
import RPC
import Schema

/// Shows a job's snapshots on a `ProgressDisplay`: a bar redrawn in place on a terminal, one line per change
/// otherwise (repeats left out, so a log gets a line when the percentage or the message moves).
public struct JobProgress {
    private let display: ProgressDisplay
    private var last: (percent: Int, message: String)?

    public init(display: ProgressDisplay) { self.display = display }

    /// Shows one snapshot.
    public mutating func show(_ job: JobsV1.Job) {
        let message: String =
            switch job.state {
            case .queued: "queued"
            case .succeeded: "done"
            case .failed: "failed"
            case .cancelled: "cancelled"
            default: job.message
            }
        let fraction = job.state == .succeeded ? 1 : job.progress
        let percent = Int((min(max(fraction.isNaN ? 0 : fraction, 0), 1) * 100).rounded())
        if let last, last.percent == percent, last.message == message { return }
        last = (percent, message)
        display.update(fraction: fraction, message: message)
    }

    /// Ends the display (the bar's line on a terminal).
    public func finish() { display.finish() }
}

/// Follows job `id` to its end with `WatchJob`, showing its progress on `display` (none with nil), and returns
/// the last snapshot. The watch has no deadline (jobs take minutes); when the replica serving it goes away
/// mid-watch, it resumes on another or on the same one restarted (the job itself lives in the database every
/// replica reads), asking for up to `reconnectWindow` before it gives up UNAVAILABLE.
public func followJob(
    _ id: String, with jobs: JobsV1.Jobs.Client, display: ProgressDisplay?, metadata: Metadata = [:],
    reconnectWindow: Duration = .seconds(60)
) async throws -> JobsV1.Job {
    var progress = display.map(JobProgress.init)
    defer { progress?.finish() }
    var last: JobsV1.Job?
    var attempts = 0
    var lostAt: ContinuousClock.Instant?
    while true {
        do {
            for try await job in jobs.watchJob(JobsV1.WatchJobRequest(id: id), options: CallOptions(metadata: metadata))
            {
                progress?.show(job)
                last = job
                lostAt = nil
            }
            guard let last else { throw RPCError(.internalError, "the watch of job \(id) ended without a message") }
            return last
        } catch let error as RPCError where error.code == .unavailable {
            // A killed replica is restarted by its supervisor after a back-off of up to a few seconds (longer
            // on a loaded machine): keep asking for up to `reconnectWindow`, then give up with the status.
            let since = lostAt ?? .now
            lostAt = since
            guard ContinuousClock.now - since < reconnectWindow else { throw error }
            attempts += 1
            try await Task.sleep(for: .milliseconds(min(200 * attempts, 2000)))
        }
    }
}

extension JobsV1.Job {
    /// The result of a job that succeeded; the job's status as an `RPCError` for one that failed or was
    /// cancelled (so the gateway exits with its code), INTERNAL for one still running.
    public func requireResult() throws -> JobsV1.JobResult? {
        switch state {
        case .succeeded:
            return result
        case .failed, .cancelled:
            let error = error ?? JobsV1.JobError(code: StatusCode.unknown.rawValue, message: "")
            let code = StatusCode(rawValue: error.code)
            throw RPCError(code == .ok ? .unknown : code, "job \(id) \(state.name): \(error.message)")
        default:
            throw RPCError(.internalError, "job \(id) is still \(state.name)")
        }
    }

    /// One line for a reader: `zoo.import 3f2a… succeeded`, with the error when it failed.
    public var summary: String {
        var text = "job \(id) (\(kind)) \(state.name)"
        if state.isActive {
            text += String(format: " %.0f%%", progress * 100) + (message.isEmpty ? "" : ": \(message)")
        }
        if let error, !state.isActive, state != .succeeded {
            text += ": \(StatusCode(rawValue: error.code).name): \(error.message)"
        }
        return text
    }
}

extension JobsV1.JobState {
    /// `queued`, `running`, `succeeded`, `failed`, `cancelled`.
    public var name: String {
        switch self {
        case .unspecified: "unspecified"
        case .queued: "queued"
        case .running: "running"
        case .succeeded: "succeeded"
        case .failed: "failed"
        case .cancelled: "cancelled"
        case .unrecognized(let value): "state \(value)"
        }
    }

    public var isActive: Bool { self == .queued || self == .running }

    /// Parses a name as `name` spells it.
    public init?(name: String) {
        guard let state = Self.allCases.first(where: { $0.name == name.lowercased() && $0 != .unspecified }) else {
            return nil
        }
        self = state
    }
}

/// `--job-state`: the states a job can be in, by the names `JobState.name` prints.
public enum JobStateName: String, CaseIterable, ExpressibleByArgument, Sendable {
    case queued, running, succeeded, failed, cancelled
}

/// A service whose command group offers `jobs` (`JobsCommands<Self>`).
public protocol JobsCommandService {
    /// The service's name in the services file, e.g. `zoo`.
    static var serviceName: String { get }
}

/// `gateway <service> jobs list|show|watch|cancel`: the same for every service that runs jobs.
public struct JobsCommands<Service: JobsCommandService>: AsyncParsableCommand {
    public static var configuration: CommandConfiguration {
        CommandConfiguration(
            commandName: "jobs",
            abstract:
                "The \(Service.serviceName) service's jobs (imports and other long work): list, show, watch, cancel.",
            subcommands: [
                JobsList<Service>.self, JobsShow<Service>.self, JobsWatch<Service>.self, JobsCancel<Service>.self,
            ])
    }

    public init() {}
}

extension GlobalOptions {
    /// Runs `body` with a jobs client of `service`'s instances.
    public func withJobs(of service: String, _ body: (JobsV1.Jobs.Client) async throws -> Void) async throws {
        try await withClient(for: service, JobsV1.Jobs.Client.init(wrapping:), body)
    }
}

/// `gateway <service> jobs list [--job-state S…] [--kind K] [--page-size N] [--page-token T]`.
public struct JobsList<Service: JobsCommandService>: AsyncParsableCommand {
    public static var configuration: CommandConfiguration {
        CommandConfiguration(commandName: "list", abstract: "Jobs newest first.")
    }

    @Option(name: .customLong("job-state"), help: "Only jobs in this state (repeatable; default: any).")
    var states: [JobStateName] = []

    @Option(help: "Only jobs of this kind (e.g. zoo.import; default: any).")
    var kind: String?

    @Option(name: .customLong("page-size"), parsing: .unconditional, help: "Jobs per page (1…500).")
    var pageSize: Int32 = 20

    @Option(name: .customLong("page-token"), help: "The token a previous page printed (default: the first page).")
    var pageToken: String?

    @OptionGroup var global: GlobalOptions

    public init() {}

    public func run() async throws {
        try await global.withJobs(of: Service.serviceName) { jobs in
            let reply = try await jobs.listJobs(
                JobsV1.ListJobsRequest(
                    states: states.compactMap { JobsV1.JobState(name: $0.rawValue) }, kind: kind ?? "",
                    pageSize: pageSize,
                    pageToken: pageToken ?? ""),
                options: global.callOptions)
            try global.render(reply, text: { print(Self.text(reply)) })
        }
    }

    static func text(_ reply: JobsV1.ListJobsResponse) -> String {
        guard !reply.jobs.isEmpty else { return "no jobs" }
        let rows = reply.jobs.map { job -> [String] in
            let detail = job.error.map { "\(StatusCode(rawValue: $0.code).name): \($0.message)" } ?? job.message
            return [
                job.id, job.kind, job.state.name, String(format: "%.0f%%", job.progress * 100), isoDate(job.createdAt),
                detail,
            ]
        }
        var text = formatTable(["ID", "KIND", "STATE", "DONE", "CREATED", "MESSAGE"], rows)
        if !reply.nextPageToken.isEmpty { text += "\nmore: --page-token \(reply.nextPageToken)" }
        return text
    }
}

/// `gateway <service> jobs show ID`.
public struct JobsShow<Service: JobsCommandService>: AsyncParsableCommand {
    public static var configuration: CommandConfiguration {
        CommandConfiguration(commandName: "show", abstract: "One job.")
    }

    @Argument(help: "The job's id.") var id: String
    @OptionGroup var global: GlobalOptions

    public init() {}

    public func run() async throws {
        try await global.withJobs(of: Service.serviceName) { jobs in
            let job = try await jobs.getJob(JobsV1.GetJobRequest(id: id), options: global.callOptions)
            try global.render(job, text: { print(job.summary) })
        }
    }
}

/// `gateway <service> jobs watch ID`: a progress bar (lines when not a terminal) until the job ends; exits with
/// the job's status code when it failed.
public struct JobsWatch<Service: JobsCommandService>: AsyncParsableCommand {
    public static var configuration: CommandConfiguration {
        CommandConfiguration(commandName: "watch", abstract: "Follows a job to its end, showing its progress.")
    }

    @Argument(help: "The job's id.") var id: String
    @OptionGroup var global: GlobalOptions

    public init() {}

    public func run() async throws {
        try await global.withJobs(of: Service.serviceName) { jobs in
            let job = try await followJob(id, with: jobs, display: global.json ? nil : ProgressDisplay())
            try global.render(job, text: { print(job.summary) })
            _ = try job.requireResult()
        }
    }
}

/// `gateway <service> jobs cancel ID`.
public struct JobsCancel<Service: JobsCommandService>: AsyncParsableCommand {
    public static var configuration: CommandConfiguration {
        CommandConfiguration(commandName: "cancel", abstract: "Asks a job to stop (it may finish first).")
    }

    @Argument(help: "The job's id.") var id: String
    @OptionGroup var global: GlobalOptions

    public init() {}

    public func run() async throws {
        try await global.withJobs(of: Service.serviceName) { jobs in
            let job = try await jobs.cancelJob(JobsV1.CancelJobRequest(id: id), options: global.callOptions)
            try global.render(job, text: { print(job.summary) })
        }
    }
}
