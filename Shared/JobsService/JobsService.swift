import Base
import Foundation
import Jobs
import JobsAPI
import RPC
import Schema
import Storage
import WorkLane

/// `menagerie.jobs.v1.Jobs`, the same for every service that runs jobs: get, watch, cancel and list the
/// jobs of the runner's database. A service offers it beside its own service and starts jobs from its own
/// rpcs (`JobRunner.start`), answering with the job.
public struct JobsService: JobsV1.Jobs.ServiceProtocol {
    public let runner: JobRunner

    public init(runner: JobRunner) { self.runner = runner }

    public func getJob(request: JobsV1.GetJobRequest, context: ServerContext) async throws -> JobsV1.Job {
        let id = try Self.validID(request.id)
        return JobsV1.Job(try Self.visible(try await runner.snapshot(id), to: context))
    }

    public func watchJob(
        request: JobsV1.WatchJobRequest, response: ResponseWriter<JobsV1.Job>, context: ServerContext
    ) async throws {
        let id = try Self.validID(request.id)
        _ = try Self.visible(try await runner.snapshot(id), to: context)
        try await runner.watch(id) { job in try await response.send(JobsV1.Job(job)) }
    }

    public func cancelJob(request: JobsV1.CancelJobRequest, context: ServerContext) async throws -> JobsV1.Job {
        let id = try Self.validID(request.id)
        _ = try Self.visible(try await runner.snapshot(id), to: context)
        return JobsV1.Job(try await runner.cancel(id))
    }

    /// A job is its starter's (and admins'): another user is told it does not exist, as with a template of
    /// theirs, since its result may be that user's data. Calls without a user (a service without identity, or
    /// a method the service leaves open) see every job, as before users.
    static func visible(_ job: Job, to context: ServerContext) throws -> Job {
        guard let caller = context.caller, !caller.isAdmin, job.startedBy != caller.name else { return job }
        throw JobNotFound(id: job.id)
    }

    public func listJobs(request: JobsV1.ListJobsRequest, context: ServerContext) async throws
        -> JobsV1.ListJobsResponse
    {
        let pageSize = Int(request.pageSize ?? 50)
        guard (1...500).contains(pageSize) else {
            throw RPCError(.invalidArgument, "page_size must be 1…500 (got \(pageSize))")
        }
        var before: Int64?
        if !request.pageToken.isEmpty {
            guard let token = Int64(request.pageToken), token > 0 else {
                throw RPCError(.invalidArgument, "page_token \"\(request.pageToken)\" is not one ListJobs returned")
            }
            before = token
        }
        var states = Set<JobState>()
        for state in request.states {
            guard let known = JobState(state) else {
                throw RPCError(.invalidArgument, "states: \(state) is not a job state")
            }
            states.insert(known)
        }
        let kind = request.kind.isEmpty ? nil : request.kind
        let own = context.caller.flatMap { $0.isAdmin ? nil : $0.name }
        let page = try await runner.list(states: states, kind: kind, startedBy: own, limit: pageSize, before: before)
        return JobsV1.ListJobsResponse(
            jobs: page.jobs.map(JobsV1.Job.init), nextPageToken: page.next.map(String.init) ?? "")
    }

    private static func validID(_ id: String) throws -> String {
        guard !id.isEmpty, id.utf8.count <= 100 else {
            throw RPCError(.invalidArgument, "id must be a job id (1…100 bytes)")
        }
        return id
    }
}

/// How jobs meet the RPC layer: a job's failure as a status.
public enum JobsRPC {
    /// The failure a job ends with when its work throws `error`: a status error or a categorized error keeps
    /// its status and message (`RPCError(answering:)`, as a failed call would), anything else is INTERNAL.
    /// Pass it to `JobRunner`.
    public static let failure: @Sendable (any Error) -> JobFailure = { error in
        if let convertible = error as? any JobFailureConvertible { return convertible.jobFailure }
        if let status = RPCError(answering: error) {
            return JobFailure(code: status.code.rawValue, message: status.message)
        }
        return JobFailure(code: StatusCode.internalError.rawValue, message: "\(error)")
    }
}

extension JobRunner {
    /// Starts a job whose work returns a protobuf message: the job's result is that message, with its type
    /// name. Throws `JobQueueFull` (RESOURCE_EXHAUSTED) past the runner's bounds (in all, or `submitter`'s).
    public func start<Result: ProtoMessage>(
        kind: String, submitter: String? = nil, user: String? = nil,
        _ work: @escaping @Sendable (JobContext) throws -> Result
    ) async throws -> Job {
        try await start(kind: kind, submitter: submitter, user: user) { context in
            let message = try work(context)
            // A string holding a NUL fails the job (INTERNAL) rather than store its result cut at the NUL.
            return JobResult(typeName: Result.protoName, bytes: try message.serializedBytesRefusingNUL())
        }
    }
}

extension JobsV1.Job {
    public init(_ job: Job) {
        self.init(
            id: job.id, kind: job.kind, state: JobsV1.JobState(job.state), progress: job.progress, message: job.message,
            createdAt: job.createdAt.timeIntervalSince1970, startedAt: job.startedAt?.timeIntervalSince1970,
            finishedAt: job.finishedAt?.timeIntervalSince1970,
            result: job.result.map { JobsV1.JobResult(typeName: $0.typeName, value: $0.bytes) },
            error: job.failure.map { JobsV1.JobError(code: $0.code, message: $0.message) },
            cancelRequested: job.cancelRequested)
    }
}

extension JobsV1.JobState {
    public init(_ state: JobState) {
        switch state {
        case .queued: self = .queued
        case .running: self = .running
        case .succeeded: self = .succeeded
        case .failed: self = .failed
        case .cancelled: self = .cancelled
        }
    }
}

extension JobState {
    /// The domain state of a wire state; nil for UNSPECIFIED and unknown values.
    public init?(_ state: JobsV1.JobState) {
        switch state {
        case .queued: self = .queued
        case .running: self = .running
        case .succeeded: self = .succeeded
        case .failed: self = .failed
        case .cancelled: self = .cancelled
        case .unspecified, .unrecognized: return nil
        }
    }
}

/// A service's jobs, wired in one call: the runner its rpcs start jobs on, the Jobs rpcs to serve beside them,
/// and the background service that ends the runner's jobs when the service stops.
public struct ServiceJobs: Sendable {

    public let runner: JobRunner
    public let rpcService: JobsService
    public let backgroundService: any BackgroundService

    /// The jobs of a service whose data is in `database`, recorded there so that every replica sharing it
    /// answers for them: opens (or upgrades) the jobs tables, runs jobs on a pool of their own
    /// (`limits.threads`), none of the interactive lane's, so a flood of queued trainings never refuses a
    /// quick call; fails the jobs that replicas now gone left active (and logs how many). Running jobs get
    /// `shutdownGrace` to stop when the service does. Call it once in the setup, before the service serves:
    /// `try await ServiceJobs(database: db, logger: environment.logger, shutdownGrace: environment.shutdownGrace, limits: environment.jobs)`.
    public init(
        database: Database, logger: Logger, shutdownGrace: Duration, limits: JobLimits = JobLimits(),
        options: JobRunner.Options = JobRunner.Options()
    ) async throws {
        var options = options
        options.maxActiveJobs = limits.maxActive
        options.maxActiveJobsPerSubmitter = limits.maxActivePerSubmitter
        // Bounded by the runner's `maxActiveJobs`, not by the pool's queue.
        let lane = WorkLane(name: "jobs", threads: limits.threads, queueLimit: limits.maxActive)
        runner = JobRunner(
            store: try JobStore(database: database), lane: lane, options: options, failureMapping: JobsRPC.failure)
        let failed = try await runner.recoverAbandonedJobs()
        if !failed.isEmpty { logger.warning("failed \(failed.count) jobs left running by stopped replicas") }
        rpcService = JobsService(runner: runner)
        backgroundService = runner.backgroundService(grace: shutdownGrace)
    }
}
