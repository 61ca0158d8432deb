import RPC
import RPCTesting
import RPCWire
import Schema
import ServiceKit
import Storage
import Testing

/// Errors that carry their own status, and the one mapping of storage errors.
@Suite struct ErrorStatusTests {
    struct Shelved: RPCErrorConvertible {
        var rpcError: RPCError { RPCError(.notFound, "no such shelf") }
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

    @Test func aConvertibleErrorAnswersWithItsStatus() async {
        #expect(await status(of: Shelved()) == RPCError(.notFound, "no such shelf"))
    }

    @Test func aBusyDatabaseIsUnavailableAndOtherStorageErrorsAreInternalWithoutDetails() async {
        let busy = await status(of: StorageError(.busy, code: 5, message: "database is locked"))
        #expect(busy == RPCError(.unavailable, "the database is busy: database is locked"))
        let corrupt = await status(of: StorageError(.corrupt, code: 11, message: "disk image is malformed", sql: "SELECT secret"))
        #expect(corrupt?.code == .internalError)
        #expect(corrupt?.message.contains("SELECT") == false)
    }
}
