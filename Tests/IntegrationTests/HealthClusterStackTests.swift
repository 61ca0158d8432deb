import Foundation
import TestSupport
import Testing

/// Three health replicas whose database is one dqlite cluster (`--cluster`), driven through the gateway: a
/// sample written through one replica is read through another; after `kill -9` of the first node (the one
/// that bootstrapped the cluster, its leader) the survivors elect a leader and keep taking writes; the killed
/// replica restarts from its Raft log and serves everything.
@Suite(.serialized) struct HealthClusterStackTests {
    @Test func replicasShareOneClusterAndSurviveTheLeadersKill() async throws {
        // Each call names its token (--token); the environment's is not passed on.
        var environment = ProcessInfo.processInfo.environment
        environment.removeValue(forKey: "MENAGERIE_HEALTH_TOKEN")
        let replicas = try ClusterReplicas("health", gatewayEnvironment: environment)
        for port in replicas.servicePorts { try await Stack.waitServing(port: port) }
        let created = try await replicas.gateway(0, ["user", "create", "jana"])
        try #require(created.status == 0, "\(created.output)")
        let token = try #require(created.output.split(separator: "\n").last.map(String.init))

        let first = try await replicas.gateway(
            0, ["add", "stepCount", "100", "--start", "2026-05-01T09:00:00Z", "--token", token])
        #expect(first.status == 0 && first.output.contains("added 1"), "\(first.output)")
        let seenElsewhere = try await replicas.gateway(2, ["list", "stepCount", "--token", token])
        #expect(
            seenElsewhere.status == 0 && seenElsewhere.output.contains("2026-05-01T09:00:00Z"),
            "\(seenElsewhere.output)")

        replicas.kill9(0)
        let killed = ContinuousClock.now
        // An UNAVAILABLE answer (nothing written) is retried, as a client would; anything else fails the test.
        let second = try await replicas.gatewayRetrying(
            1, ["add", "stepCount", "200", "--start", "2026-05-01T10:00:00Z", "--token", token], within: .seconds(20),
            every: .milliseconds(200))
        #expect(second.status == 0 && second.output.contains("added 1"), "\(second.output)")
        print(
            "health on 3 dqlite nodes: a write answered \(ContinuousClock.now - killed) after kill -9 of the leader's replica"
        )

        let both = try await replicas.gateway(2, ["list", "stepCount", "--token", token])
        #expect(
            both.output.contains("2026-05-01T09:00:00Z") && both.output.contains("2026-05-01T10:00:00Z"),
            "\(both.output)")

        replicas.processes[0] = try replicas.start(0)
        try await Stack.waitServing(port: replicas.servicePorts[0])
        let afterRestart = try await replicas.gateway(0, ["list", "stepCount", "--token", token])
        #expect(afterRestart.output.contains("2026-05-01T10:00:00Z"), "\(afterRestart.output)")
    }
}
