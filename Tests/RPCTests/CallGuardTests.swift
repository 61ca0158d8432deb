import RPC
import RPCTesting
import RPCWire
import Schema
import Synchronization
import Testing

/// The server's interceptor seam: a `CallGuard` admits or refuses each call before its handler runs, hands the
/// handler the caller it established, and never stands between a client and the built-in health checks.
@Suite struct CallGuardTests {
    /// Admits calls whose `authorization` is `Bearer ok` as "ada"; refuses the rest.
    struct Guard: CallGuard {
        func admit(_ head: CallHead, to _: ProtoMethodInfo) throws(RPCError) -> Caller? {
            guard head.metadata["authorization"] == "Bearer ok" else { throw RPCError(.unauthenticated, "no") }
            return Caller(name: "ada", isAdmin: false)
        }
    }

    /// Echoes the caller's name, counting the calls its handler ran.
    final class Counter: Sendable {
        let count = Mutex(0)
    }

    struct WhoAmI: RPCService {
        let ran = Counter()

        func register(in router: inout RPCRouter) {
            let ran = ran
            router.unary(RpcV1.Echo.echo) { (_: RpcV1.EchoRequest, context) -> RpcV1.EchoResponse in
                ran.count.withLock { $0 += 1 }
                return RpcV1.EchoResponse(payload: Array((context.caller?.name ?? "nobody").utf8))
            }
        }
    }

    @Test func aRefusedCallNeverRunsItsHandlerAndAnAdmittedOneKnowsItsCaller() async throws {
        let service = WhoAmI()
        let server = RPCServer(name: "guarded", services: [service], guard: Guard())
        let client = RPCClient(transports: [InProcessTransport(server: server)], retry: .init(maxAttempts: 1))
        defer { client.close() }
        await #expect(throws: RPCError(.unauthenticated, "no")) {
            try await client.unary(RpcV1.Echo.echo, RpcV1.EchoRequest())
        }
        #expect(service.ran.count.withLock { $0 } == 0)
        let answer = try await client.unary(
            RpcV1.Echo.echo, RpcV1.EchoRequest(), options: CallOptions(metadata: ["authorization": "Bearer ok"]))
        #expect(answer.payload == Array("ada".utf8) && service.ran.count.withLock { $0 } == 1)
        // Health checks pass without credentials.
        let health = try await client.unary(RpcV1.Health.check, RpcV1.HealthCheckRequest())
        #expect(health.status == .serving)
        // A client's default metadata goes with every call, and a call's own wins.
        let withDefault = RPCClient(
            transports: [InProcessTransport(server: server)], retry: .init(maxAttempts: 1),
            defaultMetadata: ["authorization": "Bearer ok"])
        defer { withDefault.close() }
        #expect(try await withDefault.unary(RpcV1.Echo.echo, RpcV1.EchoRequest()).payload == Array("ada".utf8))
        await #expect(throws: RPCError.self) {
            try await withDefault.unary(
                RpcV1.Echo.echo, RpcV1.EchoRequest(), options: CallOptions(metadata: ["authorization": "Bearer no"]))
        }
    }

    /// Issue 38: a client's credentials go only with calls of methods whose proto says they need a token. The gateway
    /// sent the stack's admin token with every call, so `gateway zoo search lev --endpoint zoo=<anyone's listener>`
    /// handed it over on SearchAnimals, which needs none. (This test's guard asks for a token on every method, so a
    /// call that arrives without one is refused: that is how the test sees what was sent.)
    @Test func credentialsGoOnlyWithCallsThatNeedThem() async throws {
        let server = RPCServer(name: "guarded", services: [WhoAmI()], guard: Guard())
        let client = RPCClient(
            transports: [InProcessTransport(server: server)], retry: .init(maxAttempts: 1),
            credentials: ["authorization": "Bearer ok"])
        defer { client.close() }
        #expect(RpcV1.Echo.echo.access == .public)
        await #expect(throws: RPCError(.unauthenticated, "no")) {
            try await client.unary(RpcV1.Echo.echo, RpcV1.EchoRequest())
        }
        // The same method as a user-level one is called with them.
        let asUsers = ProtoMethod<RpcV1.EchoRequest, RpcV1.EchoResponse>(
            path: RpcV1.Echo.echo.path, serverStreaming: false, idempotent: false, access: .user)
        #expect(try await client.unary(asUsers, RpcV1.EchoRequest()).payload == Array("ada".utf8))
        // A call's own metadata is sent whatever the method's level.
        let explicit = try await client.unary(
            RpcV1.Echo.echo, RpcV1.EchoRequest(), options: CallOptions(metadata: ["authorization": "Bearer ok"]))
        #expect(explicit.payload == Array("ada".utf8))
    }
}
