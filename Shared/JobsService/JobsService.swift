import Base
import Foundation
import Jobs
import RPC
import Schema
import ServiceAPI
import ServiceKit
import Storage

/// `menagerie.jobs.v1.Jobs`, the same for every service that runs jobs: get, watch, cancel and list the
/// jobs of the runner's database. A service offers it beside its own service and starts jobs from its own
/// rpcs (`JobRunner.start`), answering with the job.
public struct JobsService: JobsV1.Jobs.ServiceProtocol {
    public let runner: JobRunner

    public init(runner: JobRunner) { self.runner = runner }

    public func getJob(request: JobsV1.GetJobRequest, context: ServerContext) async throws -> JobsV1.Job {
        let id = try Self.validID(request.id)
        return try await JobsRPC.answering { JobsV1.Job(try await runner.snapshot(id)) }
    }

    public func watchJob(
        request: JobsV1.WatchJobRequest, response: ResponseWriter<JobsV1.Job>, context: ServerContext
    ) async throws {
        let id = try Self.validID(request.id)
        try await JobsRPC.answering {
            try await runner.watch(id) { job in try await response.send(JobsV1.Job(job)) }
        }
    }

    public func cancelJob(request: JobsV1.CancelJobRequest, context: ServerContext) async throws -> JobsV1.Job {
        let id = try Self.validID(request.id)
        return try await JobsRPC.answering { JobsV1.Job(try await runner.cancel(id)) }
    }

    public func listJobs(request: JobsV1.ListJobsRequest, context: ServerContext) async throws -> JobsV1.ListJobsResponse {
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
        return try await JobsRPC.answering {
            let page = try await runner.list(states: states, kind: kind, limit: pageSize, before: before)
            return JobsV1.ListJobsResponse(jobs: page.jobs.map(JobsV1.Job.init), nextPageToken: page.next.map(String.init) ?? "")
        }
    }

    private static func validID(_ id: String) throws -> String {
        guard !id.isEmpty, id.utf8.count <= 100 else {
            throw RPCError(.invalidArgument, "id must be a job id (1…100 bytes)")
        }
        return id
    }
}

/// How jobs meet the RPC layer: statuses for the jobs machinery's errors, and jobs' failures for errors.
public enum JobsRPC {
    /// Runs `body`, turning the jobs machinery's errors into statuses: an unknown job NOT_FOUND, a full
    /// lane RESOURCE_EXHAUSTED, a busy database UNAVAILABLE.
    public static func answering<T>(_ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch {
            throw rpcError(for: error) ?? error
        }
    }

    /// The status an error carries: its own, or its type's `RPCErrorConvertible` conformance (ServiceKit maps
    /// a busy database and a full or stopped lane once, for every service); nil for an error that would be
    /// answered INTERNAL, so that its details are logged rather than sent.
    public static func rpcError(for error: any Error) -> RPCError? {
        switch error {
        case let error as RPCError: error
        case let error as any RPCErrorConvertible where error.rpcError.code != .internalError: error.rpcError
        default: nil
        }
    }

    /// The failure a job ends with when its work throws `error`: a status error keeps its code, the jobs
    /// machinery's errors get theirs, anything else is INTERNAL. Pass it to `JobRunner`.
    public static let failure: @Sendable (any Error) -> JobFailure = { error in
        if let convertible = error as? any JobFailureConvertible { return convertible.jobFailure }
        if let status = rpcError(for: error) { return JobFailure(code: status.code.rawValue, message: status.message) }
        return JobFailure(code: StatusCode.internalError.rawValue, message: "\(error)")
    }
}

extension JobNotFound: RPCErrorConvertible {
    public var rpcError: RPCError { RPCError(.notFound, description) }
}

extension JobRunner {
    /// Starts a job whose work returns a protobuf message: the job's result is that message, with its type
    /// name. Throws RESOURCE_EXHAUSTED when the lane's queue is full.
    public func start<Result: ProtoMessage>(
        kind: String, _ work: @escaping @Sendable (JobContext) throws -> Result
    ) async throws -> Job {
        try await JobsRPC.answering {
            try await start(kind: kind) { context in
                let message = try work(context)
                return JobResult(typeName: Result.protoName, bytes: message.serializedBytes())
            }
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

extension JobRunner.Stopped: RPCErrorConvertible {
    public var rpcError: RPCError { RPCError(.unavailable, description) }
}

/// A service's jobs, wired in one call (`ServiceRunner.Environment.jobs(in:)`): the runner its rpcs start
/// jobs on, the Jobs rpcs to serve beside them, and the background service that ends the runner's jobs
/// when the service stops.
public struct ServiceJobs: Sendable {
    public let runner: JobRunner
    public let rpcService: JobsService
    public let backgroundService: any BackgroundService
}

extension ServiceRunner.Environment {
    /// The jobs of a service whose data is in `database`, recorded there so that every replica sharing it
    /// answers for them: opens (or upgrades) the jobs tables on the heavy-work lane's runner, fails the jobs
    /// that replicas now gone left active (and logs how many), and returns the pieces to hand the runner.
    /// Call it once in the setup, before the service serves.
    public func jobs(in database: Database, options: JobRunner.Options = JobRunner.Options()) async throws -> ServiceJobs {
        let runner = JobRunner(store: try JobStore(database: database), lane: lane.pool, options: options, failureMapping: JobsRPC.failure)
        let failed = try await runner.recoverAbandonedJobs()
        if !failed.isEmpty { logger.warning("failed \(failed.count) jobs left running by stopped replicas") }
        return ServiceJobs(
            runner: runner, rpcService: JobsService(runner: runner), backgroundService: runner.backgroundService(grace: shutdownGrace))
    }
}
