import Foundation
import Jobs
import JobsAPI
import JobsService
import RPC
import Schema
import Storage
import Testing
import Transport
import WorkLane

/// A job is its starter's: another user gets NOT_FOUND for it and does not list it (an OCR batch's result is
/// that user's text); admins see every job; jobs from before users (no starter) are the admins'.
@Suite struct JobOwnershipTests {
    /// Admits `Bearer NAME` as NAME (`root` is an admin).
    struct Guard: CallGuard {
        func admit(_ head: CallHead, to _: ProtoMethodInfo) throws(RPCError) -> Caller? {
            guard let value = head.metadata["authorization"], value.hasPrefix("Bearer ") else {
                throw RPCError(.unauthenticated, "no token")
            }
            let name = String(value.dropFirst(7))
            return Caller(name: name, isAdmin: name == "root")
        }
    }

    @Test func anotherUsersJobIsNotFoundAndNotListed() async throws {
        let scratch = try Scratch()
        let runner = try scratch.runner()
        let anas = try await runner.start(kind: "test", user: "ana") { _ in nil }
        let bens = try await runner.start(kind: "test", user: "ben") { _ in nil }
        let older = try await runner.start(kind: "test") { _ in nil }
        for job in [anas, bens, older] { _ = try await runner.finished(job.id) }

        let server = try TCPServer(
            rpc: RPCServer(name: "jobs", services: [JobsService(runner: runner)], guard: Guard()), port: 0)
        defer { Task { await server.shutdown(grace: .seconds(1)) } }
        func client(_ user: String) throws -> JobsV1.Jobs.Client {
            JobsV1.Jobs.Client(
                wrapping: RPCClient(
                    transports: [try TCPClientTransport(endpoint: server.address)], retry: .init(maxAttempts: 1),
                    credentials: ["authorization": "Bearer \(user)"]))
        }
        let ana = try client("ana"), ben = try client("ben"), root = try client("root")

        #expect(try await ana.getJob(JobsV1.GetJobRequest(id: anas.id)).id == anas.id)
        for id in [bens.id, older.id] {
            await #expect { _ = try await ana.getJob(JobsV1.GetJobRequest(id: id)) } throws: {
                ($0 as? RPCError)?.code == .notFound
            }
            await #expect { _ = try await ana.cancelJob(JobsV1.CancelJobRequest(id: id)) } throws: {
                ($0 as? RPCError)?.code == .notFound
            }
            await #expect {
                for try await _ in ana.watchJob(JobsV1.WatchJobRequest(id: id)) {}
            } throws: { ($0 as? RPCError)?.code == .notFound }
        }
        #expect(try await ana.listJobs(JobsV1.ListJobsRequest()).jobs.map(\.id) == [anas.id])
        #expect(try await ben.listJobs(JobsV1.ListJobsRequest()).jobs.map(\.id) == [bens.id])
        #expect(Set(try await root.listJobs(JobsV1.ListJobsRequest()).jobs.map(\.id)) == [anas.id, bens.id, older.id])
        #expect(try await root.getJob(JobsV1.GetJobRequest(id: bens.id)).id == bens.id)
    }
}
