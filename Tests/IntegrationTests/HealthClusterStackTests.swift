import Foundation
import TestSupport
import Testing

/// Three health replicas whose database is one dqlite cluster (`--cluster`), driven through the gateway: a
/// sample written through one replica is read through another; after `kill -9` of the first node (the one
/// that bootstrapped the cluster, its leader) the survivors elect a leader and keep taking writes; the killed
/// replica restarts from its Raft log and serves everything.
@Suite(.serialized) struct HealthClusterStackTests {
    final class Replicas {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("health-cluster-\(UUID().uuidString)")
        let servicePorts: [Int]
        let nodeAddresses: [String]
        var processes: [Process?] = []
        /// Loopback answers in microseconds; 20 ms keeps elections clear of a loaded test machine's stalls.
        let latency = 20

        init() throws {
            let base = try RawSocket.freePortBlock(count: 6)
            servicePorts = (0..<3).map { base + $0 }
            nodeAddresses = (3..<6).map { "127.0.0.1:\(base + $0)" }
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            for replica in 0..<3 { processes.append(try start(replica)) }
        }

        func start(_ replica: Int) throws -> Process {
            try Stack.spawn(
                "\(Stack.binDirectory)/health",
                [
                    "--port", "\(servicePorts[replica])", "--data-dir", directory.appendingPathComponent("r\(replica)").path,
                    "--identity", directory.appendingPathComponent("identity.sqlite").path, "--log-level", "error",
                    "--cluster", nodeAddresses.joined(separator: ","), "--cluster-bind", nodeAddresses[replica],
                    "--cluster-latency", "\(latency)",
                ])
        }

        func kill9(_ replica: Int) {
            guard let process = processes[replica] else { return }
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            processes[replica] = nil
        }

        func gateway(_ replica: Int, _ arguments: [String]) async throws -> (status: Int32, output: String) {
            var environment = ProcessInfo.processInfo.environment
            environment["XDG_DATA_HOME"] = directory.appendingPathComponent("xdg").path
            environment.removeValue(forKey: "MENAGERIE_HEALTH_TOKEN")
            return try await Stack.run(
                "\(Stack.binDirectory)/gateway",
                ["health"] + arguments + ["--endpoint", "health=127.0.0.1:\(servicePorts[replica])"], environment: environment)
        }

        deinit {
            for process in processes.compactMap({ $0 }) {
                process.terminate()
                process.waitUntilExit()
            }
            try? FileManager.default.removeItem(at: directory)
        }
    }

    @Test func replicasShareOneClusterAndSurviveTheLeadersKill() async throws {
        let replicas = try Replicas()
        for port in replicas.servicePorts { try await Stack.waitServing(port: port) }
        let created = try await replicas.gateway(0, ["user", "create", "jana"])
        try #require(created.status == 0, "\(created.output)")
        let token = try #require(created.output.split(separator: "\n").last.map(String.init))

        let first = try await replicas.gateway(0, ["add", "stepCount", "100", "--start", "2026-05-01T09:00:00Z", "--token", token])
        #expect(first.status == 0 && first.output.contains("added 1"), "\(first.output)")
        let seenElsewhere = try await replicas.gateway(2, ["list", "stepCount", "--token", token])
        #expect(seenElsewhere.status == 0 && seenElsewhere.output.contains("2026-05-01T09:00:00Z"), "\(seenElsewhere.output)")

        replicas.kill9(0)
        let killed = ContinuousClock.now
        var second = try await replicas.gateway(1, ["add", "stepCount", "200", "--start", "2026-05-01T10:00:00Z", "--token", token])
        // An UNAVAILABLE answer (nothing written) is retried, as a client would; anything else fails the test.
        while second.status == 14, ContinuousClock.now - killed < .seconds(20) {
            try await Task.sleep(for: .milliseconds(200))
            second = try await replicas.gateway(1, ["add", "stepCount", "200", "--start", "2026-05-01T10:00:00Z", "--token", token])
        }
        #expect(second.status == 0 && second.output.contains("added 1"), "\(second.output)")
        print("health on 3 dqlite nodes: a write answered \(ContinuousClock.now - killed) after kill -9 of the leader's replica")

        let both = try await replicas.gateway(2, ["list", "stepCount", "--token", token])
        #expect(both.output.contains("2026-05-01T09:00:00Z") && both.output.contains("2026-05-01T10:00:00Z"), "\(both.output)")

        replicas.processes[0] = try replicas.start(0)
        try await Stack.waitServing(port: replicas.servicePorts[0])
        let afterRestart = try await replicas.gateway(0, ["list", "stepCount", "--token", token])
        #expect(afterRestart.output.contains("2026-05-01T10:00:00Z"), "\(afterRestart.output)")
    }
}
