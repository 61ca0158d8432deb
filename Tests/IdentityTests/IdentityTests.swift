import Base
import Foundation
import Identity
import RPC
import Schema
import StorageTestSupport
import TestSupport
import Testing

@Suite struct IdentityStoreTests {
    @Test func aCreatedUsersTokenNamesThemAndOnlyItsHashIsStored() throws {
        let store = try IdentityStore.inMemory(using: .testBackend)
        let token = try store.createUser(name: "alice")
        #expect(token.hasPrefix("mnt_") && token.count == 68)
        let verifier = try TokenVerifier(store: store)
        #expect(try verifier.verify(token) == Caller(name: "alice", isAdmin: false))
        let stored = try store.database.read { try $0.query("SELECT hash FROM tokens") }.compactMap { $0.blob(0) }
        #expect(stored == [IdentityStore.hash(token)])
        #expect(throws: IdentityError(.alreadyExists, "user \"alice\" already exists")) {
            try store.createUser(name: "alice")
        }
        #expect(throws: IdentityError.self) { try store.createUser(name: "a b") }
        #expect(throws: IdentityError.self) { try store.createUser(name: "") }
    }

    /// A verifier reads what changed since it last looked, not the whole table (issue 38: with 26,011 users each
    /// replica re-read all their tokens after every sign-up, and OCR's authenticated calls waited up to 4.1 s). Each
    /// kind of change is numbered: a sign-up, a further token, a revocation, a role — and nothing else comes back.
    @Test func changesAreReadByNumberNotTheWholeTable() throws {
        let store = try IdentityStore.inMemory(using: .testBackend)
        let tokens = try (0..<50).map { try store.createUser(name: "user\($0)") }
        let (all, start) = try store.tokenChanges(since: nil)
        #expect(all.count == 50 && start > 0)
        #expect(try store.tokenChanges(since: start).entries.isEmpty)
        let newcomer = try store.createUser(name: "newcomer")
        let second = try store.createToken(user: "user1")
        try store.revokeToken(tokens[2])
        try store.setAdmin("user3")
        let (changed, now) = try store.tokenChanges(since: start)
        #expect(now == start + 4)
        #expect(Set(changed.keys) == Set([newcomer, second, tokens[2], tokens[3]].map(IdentityStore.hash)))
        #expect(
            changed[IdentityStore.hash(tokens[2])]?.isRevoked == true
                && changed[IdentityStore.hash(tokens[3])]?.isAdmin == true)
        // A verifier that knew the table before sees each change through the numbers.
        let verifier = try TokenVerifier(store: store)
        let later = try store.createUser(name: "later")
        try store.revokeUser("user4")
        #expect(try verifier.verify(later).name == "later")
        #expect(throws: TokenVerifier.Refusal(message: "token revoked", user: "user4")) {
            try verifier.verify(tokens[4])
        }
        #expect(try verifier.verify(tokens[5]).name == "user5")
    }

    /// Issue 38: open sign-up accepted a Cyrillic "аdmin" beside "admin". A name is stored in one spelling (NFC) and
    /// refused when it looks like an existing one (its skeleton: NFKC, transliterated to ASCII, lowercased).
    @Test func namesAreNormalisedAndLookAlikesRefused() throws {
        let store = try IdentityStore.inMemory(using: .testBackend)
        _ = try store.createUser(name: "admin", admin: true)
        _ = try store.createUser(name: "Zo\u{EB}")
        for lookalike in ["\u{430}dmin", "ADMIN", "\u{FF41}dmin", "Zoe\u{308}"] {
            do {
                _ = try store.createUser(name: lookalike)
                Issue.record("\(lookalike) was accepted beside an existing look-alike")
            } catch let error as IdentityError {
                #expect(error.category == .alreadyExists, "\(lookalike): \(error)")
            }
        }
        #expect(IdentityStore.skeleton("\u{430}dmin") == "admin" && IdentityStore.skeleton("pau1") == "paul")
        // Different names stay different.
        _ = try store.createUser(name: "administrator")
        #expect(try store.users().map(\.name).sorted() == ["Zo\u{EB}", "admin", "administrator"])
    }

    @Test func aForgedOrUnknownTokenIsRefused() throws {
        let store = try IdentityStore.inMemory(using: .testBackend)
        let token = try store.createUser(name: "alice")
        let verifier = try TokenVerifier(store: store)
        var forged = Array(token)
        forged[forged.count - 1] = forged.last == "0" ? "1" : "0"
        #expect(throws: TokenVerifier.Refusal(message: "unknown token", user: nil)) {
            try verifier.verify(String(forged))
        }
        #expect(throws: TokenVerifier.Refusal.self) { try verifier.verify("") }
    }

    @Test func anExpiredTokenIsRefusedAndSaysWhose() throws {
        let store = try IdentityStore.inMemory(using: .testBackend)
        _ = try store.createUser(name: "bob")
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        let token = try store.createToken(user: "bob", expiresMs: now + 60_000)
        let verifier = try TokenVerifier(store: store)
        #expect(try verifier.verify(token, nowMs: now).name == "bob")
        #expect(throws: TokenVerifier.Refusal(message: "token expired", user: "bob")) {
            try verifier.verify(token, nowMs: now + 60_000)
        }
        #expect(throws: IdentityError.self) { try store.createToken(user: "bob", expiresMs: now - 1) }
        #expect(throws: IdentityError.self) { try store.createToken(user: "nobody") }
    }

    @Test func aTokenRevokedByAnotherProcessIsRefusedWithinTheCheckInterval() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("identity-\(UUID().uuidString).sqlite")
            .path
        defer { for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) } }
        let replica = try IdentityStore(path: path), gateway = try IdentityStore(path: path)
        let token = try gateway.createUser(name: "carol")
        let verifier = try TokenVerifier(
            store: replica, checkInterval: .milliseconds(200), reloadInterval: .seconds(3600))
        #expect(try verifier.verify(token).name == "carol")
        try gateway.revokeToken(token)
        // Another connection (as another process) revoked it: the replica learns of it within the interval, from
        // the file's data_version, without being told.
        let start = ContinuousClock.now
        while (try? verifier.verify(token)) != nil, ContinuousClock.now - start < TestTime.scaled(.seconds(2)) {
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(throws: TokenVerifier.Refusal(message: "token revoked", user: "carol")) { try verifier.verify(token) }
        #expect(ContinuousClock.now - start < TestTime.scaled(.milliseconds(600)))
        #expect(throws: IdentityError.self) { try replica.revokeToken(token) }
    }

    @Test func aTokenRevokedThroughThisProcessIsRefusedAtOnce() throws {
        let store = try IdentityStore.inMemory(using: .testBackend)
        let token = try store.createUser(name: "cecil")
        let verifier = try TokenVerifier(store: store, checkInterval: .seconds(3600), reloadInterval: .seconds(3600))
        #expect(try verifier.verify(token).name == "cecil")
        try store.revokeToken(token)
        #expect(throws: TokenVerifier.Refusal(message: "token revoked", user: "cecil")) { try verifier.verify(token) }
    }

    @Test func revokingAUserRevokesEveryTokenOfTheirsAndKeepsTheName() throws {
        let store = try IdentityStore.inMemory(using: .testBackend)
        let first = try store.createUser(name: "dave")
        let second = try store.createToken(user: "dave")
        try store.revokeUser("dave")
        let verifier = try TokenVerifier(store: store)
        for token in [first, second] { #expect(throws: TokenVerifier.Refusal.self) { try verifier.verify(token) } }
        #expect(throws: IdentityError.self) { try store.createUser(name: "dave") }
        #expect(throws: IdentityError.self) { try store.createToken(user: "dave") }
        #expect(try store.users().map(\.isRevoked) == [true])
    }

    @Test func aTokenMadeAMomentAgoWorksAtOnce() throws {
        let store = try IdentityStore.inMemory(using: .testBackend)
        let verifier = try TokenVerifier(store: store, checkInterval: .seconds(60), reloadInterval: .seconds(60))
        let token = try store.createUser(name: "erin")
        #expect(try verifier.verify(token).name == "erin")
    }

    @Test func theAdminTokenIsTheAdminsAndGrantingTheRoleMakesAnotherAdmin() throws {
        let store = try IdentityStore.inMemory(using: .testBackend)
        let admin = IdentityStore.newToken()
        let verifier = try TokenVerifier(store: store, adminToken: admin)
        #expect(try verifier.verify(admin) == Caller(name: "admin", isAdmin: true))
        #expect(throws: IdentityError.self) { try store.createUser(name: "admin") }
        let token = try store.createUser(name: "frank")
        try store.setAdmin("frank")
        try verifier.reload()
        #expect(try verifier.verify(token) == Caller(name: "frank", isAdmin: true))
        #expect(try store.users().map(\.name) == ["admin", "frank"])
    }

    @Test func adoptedHashesOfAnOlderStoreKeepWorking() throws {
        let store = try IdentityStore.inMemory(using: .testBackend)
        let old = (0..<32).map { _ in UInt8.random(in: 0...255) }.hexString
        try store.adopt(hash: IdentityStore.hash(old), user: "gina", createdMs: 1, revokedMs: nil)
        try store.adopt(hash: IdentityStore.hash(old), user: "gina", createdMs: 1, revokedMs: nil)
        let verifier = try TokenVerifier(store: store)
        #expect(try verifier.verify(old).name == "gina")
    }

    /// The figure the issue asks for: a check must add < 20 µs to a call.
    @Test func aCheckCostsFarUnderTwentyMicroseconds() throws {
        let store = try IdentityStore.inMemory(using: .testBackend)
        var tokens: [String] = []
        for index in 0..<1000 { tokens.append(try store.createUser(name: "user\(index)")) }
        // The default intervals: the store's data_version is asked every 50 ms, as on a running replica.
        let verifier = try TokenVerifier(store: store)
        let rounds = 200_000
        let start = ContinuousClock.now
        for index in 0..<rounds { _ = try verifier.verify(tokens[index % tokens.count]) }
        let perCall = (ContinuousClock.now - start) / rounds
        print("token check: \(perCall) per call (1,000 users)")
        #expect(perCall < .microseconds(20))
    }
}

@Suite struct FailedAuthThrottleTests {
    @Test func backsOffExponentiallyAfterTheFreeFailuresAndForgetsOnSuccess() {
        let throttle = FailedAuthThrottle()
        let now = ContinuousClock.now
        for _ in 0..<5 { #expect(throttle.recordFailure("k", reason: "x", now: now) == nil) }
        #expect(throttle.recordFailure("k", reason: "x", now: now) == .seconds(1))
        #expect(throttle.backoff(for: "k", now: now) == .seconds(1))
        #expect(throttle.backoff(for: "k", now: now + .seconds(1)) == nil)
        #expect(throttle.recordFailure("k", reason: "x", now: now + .seconds(1)) == .seconds(2))
        #expect(throttle.recordFailure("k", reason: "x", now: now + .seconds(3)) == .seconds(4))
        #expect(throttle.backoff(for: "other", now: now) == nil)
        throttle.recordSuccess("k")
        #expect(throttle.backoff(for: "k", now: now + .seconds(3)) == nil)
    }

    @Test func theBackoffIsCapped() {
        var policy = FailedAuthThrottle.Policy()
        policy.freeFailures = 0
        let throttle = FailedAuthThrottle(policy: policy)
        var wait: Duration?
        for _ in 0..<100 { wait = throttle.recordFailure("k", reason: "x") }
        #expect(wait! <= policy.maxBackoff && wait! > policy.maxBackoff - .seconds(1))
    }
}

@Suite struct IdentityGuardTests {
    /// Methods at each level, as a generated API module describes them.
    static func method(_ name: String, _ access: MethodAccess) -> ProtoMethodInfo {
        ProtoMethodInfo(
            path: "/z.Z/\(name)", serverStreaming: false, idempotent: false, access: access, requestType: "z.Q",
            responseType: "z.A")
    }

    static let methods = [method("Read", .public), method("Import", .admin), method("Mine", .user)]

    /// A guard over `methods`, which it finds by the head's path as the server does.
    struct Guarded {
        let guardian: IdentityGuard

        func admit(_ head: CallHead) throws(RPCError) -> Caller? {
            try guardian.admit(head, to: IdentityGuardTests.methods.first { $0.path == head.method }!)
        }
    }

    static func guarded(_ verifier: TokenVerifier, rules: AccessRules = .declared) -> Guarded {
        Guarded(guardian: IdentityGuard(rules: rules, verifier: verifier, throttle: FailedAuthThrottle()))
    }

    static func head(_ method: String, token: String?, peer: String = "10.0.0.1:5000") -> CallHead {
        CallHead(method: method, metadata: token.map { ["authorization": "Bearer \($0)"] } ?? [:], peer: peer)
    }

    @Test func thePermissionTableDecidesBetweenUnauthenticatedAndPermissionDenied() throws {
        let store = try IdentityStore.inMemory(using: .testBackend)
        let admin = IdentityStore.newToken()
        let user = try store.createUser(name: "hana")
        let guardian = Self.guarded(try TokenVerifier(store: store, adminToken: admin))
        #expect(try guardian.admit(Self.head("/z.Z/Read", token: nil)) == nil)
        #expect(try guardian.admit(Self.head("/z.Z/Read", token: "stale")) == nil)
        #expect(throws: RPCError.self) { try guardian.admit(Self.head("/z.Z/Import", token: nil)) }
        do {
            _ = try guardian.admit(Self.head("/z.Z/Import", token: nil))
        } catch { #expect(error.code == .unauthenticated) }
        do {
            _ = try guardian.admit(Self.head("/z.Z/Import", token: user))
            Issue.record("a user's token imported")
        } catch { #expect(error.code == .permissionDenied) }
        do {
            _ = try guardian.admit(CallHead(method: "/z.Z/Mine", metadata: ["authorization": "Basic abc"]))
            Issue.record("a Basic credential passed")
        } catch { #expect(error.code == .unauthenticated) }
        #expect(try guardian.admit(Self.head("/z.Z/Mine", token: user)) == Caller(name: "hana", isAdmin: false))
        #expect(try guardian.admit(Self.head("/z.Z/Import", token: admin))?.isAdmin == true)
        #expect(
            try guardian.admit(CallHead(method: "/z.Z/Import", metadata: ["authorization": "bearer  \(admin) "]))?
                .isAdmin == true)
    }

    /// An address guessing tokens backs off: its next guess is RESOURCE_EXHAUSTED with the wait. A valid token from the
    /// same address is still admitted (issue 38: nine made-up tokens from 127.0.0.20 locked alice out of her valid one,
    /// and with her everyone behind the same NAT or proxy), and so is one from another address.
    @Test func anAddressGuessingTokensBacksOffButAValidTokenFromItIsAdmitted() throws {
        let store = try IdentityStore.inMemory(using: .testBackend)
        let user = try store.createUser(name: "ivan")
        let guardian = Self.guarded(try TokenVerifier(store: store))
        for _ in 0..<6 {
            do { _ = try guardian.admit(Self.head("/z.Z/Mine", token: IdentityStore.newToken())) } catch {
                #expect(error.code == .unauthenticated)
            }
        }
        do {
            _ = try guardian.admit(Self.head("/z.Z/Mine", token: IdentityStore.newToken()))
            Issue.record("a backing-off address's guess was not told to wait")
        } catch {
            #expect(error.code == .resourceExhausted && error.message.contains("retry in 1 s"))
        }
        #expect(try guardian.admit(Self.head("/z.Z/Mine", token: user))?.name == "ivan")
        #expect(try guardian.admit(Self.head("/z.Z/Mine", token: user, peer: "10.0.0.2:6000"))?.name == "ivan")
    }

    /// A revoked (or expired) token's attempts count against its user from any address, so its next attempt is told to
    /// wait — but the user's valid token is admitted (issue 38: twelve calls with carol's expired token refused her
    /// valid second one).
    @Test func aRevokedUsersTokensCountAgainstTheUserButNotAgainstItsValidToken() throws {
        let store = try IdentityStore.inMemory(using: .testBackend)
        let token = try store.createUser(name: "judy")
        let second = try store.createToken(user: "judy")
        try store.revokeToken(token)
        let guardian = Self.guarded(try TokenVerifier(store: store))
        for index in 0..<6 {
            do { _ = try guardian.admit(Self.head("/z.Z/Mine", token: token, peer: "10.\(index).0.1:1")) } catch {
                #expect(error.code == .unauthenticated)
            }
        }
        do {
            _ = try guardian.admit(Self.head("/z.Z/Mine", token: token, peer: "10.9.0.1:1"))
            Issue.record("no back-off for the user")
        } catch { #expect(error.code == .resourceExhausted) }
        #expect(try guardian.admit(Self.head("/z.Z/Mine", token: second, peer: "10.9.0.1:1"))?.name == "judy")
    }

    /// Guesses spread over many addresses of one network meet a limit too, a looser one than an address's (issue 38:
    /// 60 guesses from 60 loopback addresses were never throttled); another network is not affected.
    @Test func guessesSpreadOverANetworksAddressesBackOffTogether() throws {
        let store = try IdentityStore.inMemory(using: .testBackend)
        let user = try store.createUser(name: "lena")
        let guardian = Self.guarded(try TokenVerifier(store: store))
        var codes: [StatusCode] = []
        for index in 1...60 {
            do {
                _ = try guardian.admit(
                    Self.head("/z.Z/Mine", token: IdentityStore.newToken(), peer: "127.0.0.\(index):1"))
            } catch {
                codes.append(error.code)
            }
        }
        #expect(
            codes.count == 60 && codes.prefix(21).allSatisfy { $0 == .unauthenticated }
                && codes.last == .resourceExhausted, "\(codes)")
        #expect(try guardian.admit(Self.head("/z.Z/Mine", token: user, peer: "127.0.0.61:1"))?.name == "lena")
        do {
            _ = try guardian.admit(Self.head("/z.Z/Mine", token: IdentityStore.newToken(), peer: "127.0.1.1:1"))
        } catch {
            #expect(error.code == .unauthenticated)
        }
        #expect(IdentityGuard.network(of: "192.168.7.200") == "192.168.7.0/24")
    }

    /// A service's override replaces the level its proto declares, for that method only.
    @Test func anOverrideReplacesTheDeclaredLevel() throws {
        let store = try IdentityStore.inMemory(using: .testBackend)
        let user = try store.createUser(name: "kim")
        let guardian = Self.guarded(
            try TokenVerifier(store: store),
            rules: AccessRules(overriding: ["/z.Z/Mine": .public, "/z.Z/Read": .admin]))
        #expect(try guardian.admit(Self.head("/z.Z/Mine", token: nil)) == nil)
        do {
            _ = try guardian.admit(Self.head("/z.Z/Read", token: user))
            Issue.record("a user's token passed a method overridden to admin")
        } catch { #expect(error.code == .permissionDenied) }
        do {
            _ = try guardian.admit(Self.head("/z.Z/Import", token: nil))
            Issue.record("a method without an override lost its level")
        } catch { #expect(error.code == .unauthenticated) }
    }

    @Test func peersAreCountedByAddressNotConnection() {
        #expect(IdentityGuard.host(of: "127.0.0.1:50312") == "127.0.0.1")
        #expect(IdentityGuard.host(of: "[::1]:50312") == "::1")
    }
}
