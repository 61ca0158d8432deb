import Jobs
import JobsService
import RPC
import Storage
import Testing
import WorkLane

/// A job's failure keeps the status its error carries, from the same conformances the RPC server uses, so a
/// job and a call fail alike; anything without a status is INTERNAL.
@Suite struct JobsRPCTests {
    @Test func failuresKeepTheStatusTheirErrorCarries() throws {
        func code(_ error: any Error) -> StatusCode? { StatusCode(rawValue: JobsRPC.failure(error).code) }

        #expect(code(RPCError(.invalidArgument, "bad")) == .invalidArgument)
        #expect(code(JobNotFound(id: "j")) == .notFound)
        #expect(code(StorageError(.busy, message: "locked")) == .unavailable)
        #expect(code(StorageError(.corrupt, message: "disk image is malformed")) == .internalError)
        #expect(code(CancellationError()) == .internalError)

        let pool = ThreadPool(name: "stopped", threads: 1)
        pool.shutdown()
        let stopped = #expect(throws: ThreadPool.ShutDown.self) { _ = try pool.submit { _ in } }
        #expect(code(try #require(stopped)) == .unavailable)
    }

    /// What `answering` rethrows for the RPC server: a status, or the error itself for the server to log as
    /// INTERNAL without sending its details.
    @Test func answeringTurnsKnownErrorsIntoStatuses() async {
        await #expect(throws: RPCError(.unavailable, "the database is busy: locked")) {
            try await JobsRPC.answering { throw StorageError(.busy, message: "locked") }
        }
        await #expect(throws: StorageError.self) {
            try await JobsRPC.answering { throw StorageError(.corrupt, message: "disk image is malformed") }
        }
    }
}
