import Base
import Dispatch
import RPC
import RPCTesting
import RPCWire
import Schema
import Storage
import Testing
import WorkLane

/// The one mapping from an error to the status a call answers with: a category's status and message, storage and
/// lane errors by their own category (this target does not link ServiceKit), and nothing of an internal error's
/// details.
@Suite struct ErrorStatusTests {
    /// A domain error of the shape every service uses.
    struct Shelf: CategorizedError {
        let category: ErrorCategory
        let message: String
        init(_ category: ErrorCategory, _ message: String) {
            self.category = category
            self.message = message
        }
    }

    struct Failing: RPCService {
        let error: any Error & Sendable

        func register(in router: inout RPCRouter) {
            let error = error
            router.unary(RpcV1.Echo.echo) { (_: RpcV1.EchoRequest, _) -> RpcV1.EchoResponse in throw error }
        }
    }

    /// The status a call answers with when its handler throws `error`.
    func status(of error: any Error & Sendable) async -> RPCError? {
        let server = RPCServer(name: "errors", services: [Failing(error: error)])
        let client = RPCClient(transports: [InProcessTransport(server: server)], retry: .init(maxAttempts: 1))
        defer { client.close() }
        do {
            _ = try await client.unary(RpcV1.Echo.echo, RpcV1.EchoRequest())
            return nil
        } catch {
            return error as? RPCError
        }
    }

    @Test func eachCategoryMapsToTheStatusOfItsName() {
        for category in ErrorCategory.allCases {
            #expect(StatusCode(category).name == category.rawValue, "\(category)")
        }
        let statuses = Set(ErrorCategory.allCases.map(StatusCode.init))
        #expect(statuses.count == 16)
        #expect(statuses == Set(StatusCode.all).subtracting([.ok]))
    }

    @Test func aCategorizedErrorAnswersWithItsStatusAndMessage() async {
        #expect(await status(of: Shelf(.notFound, "no such shelf")) == RPCError(.notFound, "no such shelf"))
        for category in ErrorCategory.allCases where category.exposesMessage {
            #expect(await status(of: Shelf(category, "said")) == RPCError(StatusCode(category), "said"))
        }
    }

    @Test func anInternalErrorIsAnsweredWithoutItsDetails() async {
        for category in [ErrorCategory.internal, .unknown] {
            let answer = await status(of: Shelf(category, "open /srv/secret.db failed"))
            #expect(answer?.code == .internalError, "\(category)")
            #expect(answer?.message.contains("secret") == false, "\(String(describing: answer))")
        }
        let uncategorized = await status(of: CocoaLikeError(path: "/srv/secret.db"))
        #expect(uncategorized?.code == .internalError)
        #expect(uncategorized?.message.contains("secret") == false)
    }

    struct CocoaLikeError: Error { let path: String }

    @Test func anExplicitStatusIsAnsweredAsItIs() async {
        #expect(await status(of: RPCError(.permissionDenied, "not yours")) == RPCError(.permissionDenied, "not yours"))
    }

    @Test func aBusyDatabaseIsUnavailableAndOtherStorageErrorsAreInternalWithoutDetails() async {
        let busy = await status(of: StorageError(.busy, code: 5, message: "database is locked"))
        #expect(busy == RPCError(.unavailable, "database is locked"))
        let corrupt = await status(
            of: StorageError(.corrupt, code: 11, message: "disk image is malformed", sql: "SELECT secret"))
        #expect(corrupt?.code == .internalError)
        #expect(corrupt?.message.contains("SELECT") == false)
        #expect(corrupt?.message.contains("malformed") == false)
    }

    @Test func aFullLaneIsResourceExhaustedAndAStoppedOneUnavailable() async throws {
        let pool = WorkLane(name: "lane", threads: 1, queueLimit: 1)
        let release = DispatchSemaphore(value: 0)
        var held = 0
        var refusal: WorkLane.QueueFull?
        // The thread blocks on the first item, the queue holds one more: the third submission is refused at the latest.
        while refusal == nil, held < 3 {
            do {
                _ = try pool.submit { _ in release.wait() }
                held += 1
            } catch let error as WorkLane.QueueFull {
                refusal = error
            }
        }
        for _ in 0..<held { release.signal() }
        #expect(await status(of: try #require(refusal))?.code == .resourceExhausted)

        pool.shutdown()
        let stopped = #expect(throws: WorkLane.ShutDown.self) { _ = try pool.submit { _ in } }
        #expect(await status(of: try #require(stopped)) == RPCError(.unavailable, "the lane queue has shut down"))
    }
}
