import Foundation
import HealthAPI
import HealthCore
import HealthService
import Identity
import RPC
import RPCTesting
import Testing

/// Health on the stack's shared identity: tokens it issued before move there and keep working, revoked ones stay
/// revoked, and sign-up and tokens go through the identity so every service knows them.
@Suite struct SharedIdentityTests {
    static func client(_ store: HealthStore, _ identity: IdentityStore) throws -> HealthV1.Health.Client {
        let guardian = IdentityGuard(verifier: try TokenVerifier(store: identity), throttle: FailedAuthThrottle())
        let server = RPCServer(name: "health", services: [HealthService(store: store, identity: identity)], guard: guardian)
        return HealthV1.Health.Client(wrapping: RPCClient(transports: [InProcessTransport(server: server)], retry: .init(maxAttempts: 1)))
    }

    static func bearer(_ token: String) -> CallOptions { CallOptions(metadata: ["authorization": "Bearer \(token)"]) }

    @Test func tokensIssuedBeforeMoveToTheIdentityAndKeepWorking() async throws {
        let store = try HealthStore.inMemory()
        let (_, kept) = try store.createUser(name: "jana")
        let revoked = try store.issueToken(userName: "jana")
        try store.revoke(token: revoked)
        let identity = try IdentityStore.inMemory()
        #expect(try HealthService.moveAccounts(from: store, to: identity) == 2)
        #expect(try HealthService.moveAccounts(from: store, to: identity) == 2, "moving twice changes nothing")
        let client = try Self.client(store, identity)
        #expect(try await client.getAccount(.init(), options: Self.bearer(kept)).name == "jana")
        await #expect(throws: RPCError.self) { try await client.getAccount(.init(), options: Self.bearer(revoked)) }
        // The moved token now works for any service of the stack, as the identity's.
        #expect(try TokenVerifier(store: identity).verify(kept).name == "jana")
    }

    @Test func signUpAndTokensGoThroughTheIdentity() async throws {
        let store = try HealthStore.inMemory()
        let identity = try IdentityStore.inMemory()
        let client = try Self.client(store, identity)
        let token = try await client.createUser(.init(name: "petr")).token
        #expect(try TokenVerifier(store: identity).verify(token).name == "petr")
        await #expect(throws: RPCError.self) { try await client.createUser(.init(name: "petr")) }
        let second = try await client.issueToken(.init(), options: Self.bearer(token)).token
        #expect(try await client.getAccount(.init(), options: Self.bearer(second)).name == "petr")
        _ = try await client.revokeToken(.init(token: second), options: Self.bearer(token))
        await #expect(throws: RPCError.self) { try await client.getAccount(.init(), options: Self.bearer(second)) }
        // A user made elsewhere (gateway user create) is health's on their first call.
        let other = try identity.createUser(name: "olga")
        #expect(try await client.getAccount(.init(), options: Self.bearer(other)).sampleCount == 0)
    }
}
