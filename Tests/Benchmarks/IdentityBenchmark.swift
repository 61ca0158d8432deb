import Foundation
import Identity
import RPC
import RPCWire
import Schema
import Storage
import Transport

/// Issue 38's figure: an authenticated call's latency does not grow with the number of users (p99 with 30,000 users
/// within 1.5× of 2 users). A server over loopback TCP whose guard checks a user's token (`IdentityGuard` over a
/// `TokenVerifier` on an identity file, as a replica's), called one at a time: once on a file of 2 users, once on
/// one of `users` (made straight in the file, in one transaction), and once more there while another process's
/// worth of sign-ups (a writer on the same file) keeps changing it — the case that cost 343 ms medians before.
struct IdentityBenchmark {
    let users: Int
    let secondsPerRun: Double

    func run() async throws {
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent(
            "identity-bench-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: scratch) }
        print(
            "Identity benchmark: an authenticated call (health check at user level) with 2 and \(users) users, \(secondsPerRun) s each"
        )
        let few = try await measure(file: scratch.appendingPathComponent("few.sqlite").path, users: 2, signUps: false)
        let many = try await measure(
            file: scratch.appendingPathComponent("many.sqlite").path, users: users, signUps: false)
        let busy = try await measure(file: scratch.appendingPathComponent("many.sqlite").path, users: 0, signUps: true)
        func row(_ name: String, _ run: Measurement) -> [String] {
            [
                name, "\(run.calls)", String(format: "%.3f", run.percentileMilliseconds(0.5)),
                String(format: "%.3f", run.percentileMilliseconds(0.99)),
                String(format: "%.3f", run.percentileMilliseconds(1.0)),
            ]
        }
        printTable(
            ["users", "calls", "p50 ms", "p99 ms", "max ms"],
            [row("2", few), row("\(users)", many), row("\(users) + sign-ups", busy)])
        let ratio = many.percentileMilliseconds(0.99) / max(few.percentileMilliseconds(0.99), 0.001)
        print(
            String(
                format: "p99 with %d users / with 2: %.2f× (goal ≤ 1.5×: %@)", users, ratio,
                ratio <= 1.5 ? "met" : "MISSED"))
    }

    /// Calls with a user's token for `secondsPerRun` against a guarded server on `file`, after adding `users` users
    /// (the first made through the store, whose token the calls carry); `signUps`: a writer adds users meanwhile.
    private func measure(file: String, users: Int, signUps: Bool) async throws -> Measurement {
        let store = try IdentityStore(path: file)
        let token = try store.createUser(name: "caller-\(UUID().uuidString.prefix(8))")
        if users > 1 { try Self.addUsers(users - 1, to: store) }
        let verifier = try TokenVerifier(store: store)
        let guardian = IdentityGuard(
            rules: AccessRules(overriding: [RpcV1.Health.check.path: .user]), verifier: verifier,
            throttle: FailedAuthThrottle())
        let server = try TCPServer(rpc: RPCServer(name: "identity-bench", services: [], guard: guardian), port: 0)
        let client = RPCClient(transports: [try TCPClientTransport(endpoint: server.address)])
        var options = CallOptions(timeout: .seconds(10))
        options.metadata["authorization"] = "Bearer \(token)"
        let call = options
        // Another process's sign-ups, as open sign-up takes them: a store of its own on the file, ~300 a second.
        let writer =
            signUps
            ? Task.detached {
                let other = try IdentityStore(path: file)
                var count = 0
                while !Task.isCancelled {
                    _ = try other.createUser(name: "signup\(count)-\(UUID().uuidString.prefix(6))")
                    count += 1
                    try await Task.sleep(for: .milliseconds(3))
                }
                return count
            } : nil
        let measured = try await Measurement.run(callers: 1, duration: .milliseconds(Int64(secondsPerRun * 1000))) {
            _ = try await client.unary(RpcV1.Health.check, RpcV1.HealthCheckRequest(), options: call)
        }
        writer?.cancel()
        client.close()
        await server.shutdown(grace: .seconds(1))
        return measured
    }

    /// `count` users with a token each, written straight into the store's tables in one transaction (the store's
    /// own `createUser` checks names against every other's look-alike: minutes for 30,000).
    static func addUsers(_ count: Int, to store: IdentityStore) throws {
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        try store.database.write { db in
            for index in 0..<count {
                let name = "user\(index)"
                try db.execute(
                    "INSERT INTO users (name, admin, created_ms, skeleton) VALUES (?, 0, ?, ?)", [name, now, name])
                let hash = (0..<32).map { _ in UInt8.random(in: 0...255) }
                try db.execute(
                    "INSERT INTO tokens (hash, user_id, created_ms) VALUES (?, ?, ?)", [hash, db.lastInsertRowID, now])
            }
        }
    }
}
