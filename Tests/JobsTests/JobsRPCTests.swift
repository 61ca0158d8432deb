import Base
import Jobs
import JobsService
import RPC
import Storage
import Testing
import WorkLane

/// A job's failure keeps the status its error carries, by the same mapping the RPC server uses, so a job and a
/// call fail alike; anything without a status is INTERNAL.
@Suite struct JobsRPCTests {
    @Test func failuresKeepTheStatusTheirErrorCarries() throws {
        func code(_ error: any Error) -> StatusCode? { StatusCode(rawValue: JobsRPC.failure(error).code) }

        #expect(code(RPCError(.invalidArgument, "bad")) == .invalidArgument)
        #expect(code(JobNotFound(id: "j")) == .notFound)
        #expect(code(StorageError(.busy, message: "locked")) == .unavailable)
        #expect(code(StorageError(.corrupt, message: "disk image is malformed")) == .internalError)
        #expect(code(CancellationError()) == .internalError)

        let pool = WorkLane(name: "stopped", threads: 1)
        pool.shutdown()
        let stopped = #expect(throws: WorkLane.ShutDown.self) { _ = try pool.submit { _ in } }
        #expect(code(try #require(stopped)) == .unavailable)
    }

    /// A job fails as a call would: a categorized error keeps its category's status and message; an internal
    /// one is INTERNAL too.
    @Test func aCategorizedErrorKeepsItsStatusAndMessage() {
        struct Refused: CategorizedError {
            var category: ErrorCategory { .failedPrecondition }
            var message: String { "the model is not trained yet" }
        }
        #expect(
            JobsRPC.failure(Refused())
                == JobFailure(code: StatusCode.failedPrecondition.rawValue, message: "the model is not trained yet"))
        #expect(
            JobsRPC.failure(StorageError(.busy, message: "locked"))
                == JobFailure(code: StatusCode.unavailable.rawValue, message: "locked"))
    }
}
