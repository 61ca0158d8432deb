import Dqlite
import Foundation
import TestSupport
import Testing

/// The operator's path with compose, on health: a single machine's database imported into a three-node stack's
/// cluster, backed up, restored over a later write, a fourth node added and the first (the cluster's bootstrapper)
/// removed (and a survivor restarted with the shorter member list), the data checked through the gateway after each step. Needs root and `ip netns`; skips elsewhere.
@Suite(
    .serialized, .timeLimit(.minutes(4)),
    .enabled(if: Nodes.available, "needs root and ip netns (iproute2): compose up --nodes makes network namespaces"))
struct ClusterOperationsTests {
    @Test func importBackupRestoreAddAndRemoveANode() async throws {
        try await HealthNodes.with { nodes in
            let (stack, network) = (nodes.stack, nodes.network)
            let started = ContinuousClock.now
            var times: [String: Duration] = [:]
            func timed<T>(_ step: String, _ body: () async throws -> T) async rethrows -> T {
                let start = ContinuousClock.now
                defer { times[step] = ContinuousClock.now - start }
                return try await body()
            }

            // One machine: a user and three samples in health's SQLite file; the stack goes down, the file stays.
            let single = try await nodes.compose("up")
            try #require(single.status == 0, "compose up failed: \(single.output)")
            let created = try await nodes.health(["user", "create", "jana"])
            try #require(created.status == 0, "\(created.output)")
            let token = try #require(created.output.split(separator: "\n").last.map(String.init))
            let hours = ["2026-05-01T09:00:00Z", "2026-05-01T10:00:00Z", "2026-05-01T11:00:00Z"]
            for (index, hour) in hours.enumerated() {
                let added = try await nodes.health([
                    "add", "stepCount", "\(100 * (index + 1))", "--start", hour, "--token", token,
                ])
                try #require(added.status == 0, "\(added.output)")
            }
            #expect(try await nodes.compose("down").status == 0)
            let file = stack.directory.appendingPathComponent("data/health/health.sqlite").path
            try #require(FileManager.default.fileExists(atPath: file), "no single-machine database at \(file)")

            func expectSamples(_ expected: [String], absent: [String] = [], _ when: String, endpoint: String? = nil)
                async throws
            {
                let listed = try await nodes.health(["list", "stepCount", "--token", token], endpoint: endpoint)
                #expect(listed.status == 0, "\(when): \(listed.output)")
                for hour in expected {
                    #expect(listed.output.contains(hour), "\(when): \(hour) missing in \(listed.output)")
                }
                for hour in absent {
                    #expect(!listed.output.contains(hour), "\(when): \(hour) present in \(listed.output)")
                }
            }

            // Three nodes, health's replicas one cluster; the file imported into it.
            let up = try await nodes.compose("up", "--nodes", "3")
            try #require(up.status == 0, "compose up --nodes 3 failed: \(up.output)")
            let imported = try await timed("import") { try await nodes.compose("cluster", "import", "health", file) }
            #expect(imported.status == 0 && imported.output.contains("samples: 3 rows"), "\(imported.output)")
            try await expectSamples(hours, "after the import")
            let again = try await nodes.compose("cluster", "import", "health", file)
            #expect(again.status == 9 && again.output.contains("holds data"), "\(again.output)")

            // Backed up; a write after the backup is gone after the restore.
            let backup = stack.directory.appendingPathComponent("health-backup.sqlite").path
            let backedUp = try await timed("backup") { try await nodes.compose("cluster", "backup", "health", backup) }
            #expect(backedUp.status == 0 && FileManager.default.fileExists(atPath: backup), "\(backedUp.output)")
            let late = "2026-05-01T12:00:00Z"
            #expect(try await nodes.health(["add", "stepCount", "400", "--start", late, "--token", token]).status == 0)
            try await expectSamples(hours + [late], "after a write past the backup")
            let restored = try await timed("restore") {
                try await nodes.compose("cluster", "restore", "health", backup)
            }
            #expect(restored.status == 0 && restored.output.contains("restored"), "\(restored.output)")
            try await expectSamples(hours, absent: [late], "after the restore")

            // A fourth node joins the cluster and serves the data.
            let port = try #require(stack.basePorts["health"])
            let added = try await timed("node add") { try await nodes.compose("node", "add") }
            #expect(added.status == 0 && added.output.contains("node 4 added"), "\(added.output)")
            let members = try await nodes.compose("cluster", "members", "health")
            #expect(
                (1...4).allSatisfy { members.output.contains("\(network.subnet).\(10 + $0):\(port + 1000)") },
                "\(members.output)")
            try await expectSamples(hours, "through node 4", endpoint: "\(network.subnet).14:\(port)")

            // Node 1, which bootstrapped the cluster, leaves it; the other three keep every sample and take writes.
            let removed = try await timed("node remove") { try await nodes.compose("node", "remove", "1") }
            #expect(removed.status == 0 && removed.output.contains("node 1 removed"), "\(removed.output)")
            let three = try await nodes.compose("cluster", "members", "health")
            #expect(
                three.status == 0 && !three.output.contains("\(network.subnet).11:")
                    && three.output.contains("\(network.subnet).14:"), "\(three.output)")
            #expect(try await nodes.compose("node", "list").output.contains("removed"))
            #expect(!Nodes.namespaces(tag: network.tag).contains("\(network.tag)-node1"))
            let afterRemoval = "2026-05-01T13:00:00Z"
            let written = try await nodes.health(["add", "stepCount", "500", "--start", afterRemoval, "--token", token])
            #expect(written.status == 0, "\(written.output)")
            try await expectSamples(hours + [afterRemoval], "after node 1 was removed")
            #expect(try await nodes.compose("node", "kill", "1").output.contains("was removed"))

            // Node 2 restarted: its member list no longer names node 1, and it keeps its id (2), not its place (1).
            let restarted = try await nodes.compose("node", "restart", "2")
            #expect(restarted.status == 0, "\(restarted.output)")
            let afterRestart = try await nodes.compose("cluster", "members", "health")
            let rows = afterRestart.output.split(separator: "\n").map { $0.split(separator: " ").map(String.init) }
            #expect(
                rows.contains {
                    $0.count >= 3 && $0[0] == "2" && $0[1] == "\(network.subnet).12:\(port + 1000)" && $0[2] == "voter"
                }, "\(afterRestart.output)")
            #expect(rows.filter { $0.count >= 3 && $0[2] == "voter" }.count == 3, "\(afterRestart.output)")
            try await expectSamples(
                hours + [afterRemoval], "through node 2 after its restart", endpoint: "\(network.subnet).12:\(port)")

            print(
                "cluster operations on 3-4 nodes: "
                    + times.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
                    + "; the whole test \(ContinuousClock.now - started)")
        }
    }

    /// A plaintext `up --nodes 3` (no `--tls`): the clusters still run over mutual TLS, and only the operator's
    /// certificate gets a backup. Before, anyone on the host — with no certificate, no token and no state — dumped
    /// every user's samples (`cluster backup … --cluster` from the bridge) and could replace them. A certificate of
    /// the clusters' own CA that names no role (as the gateway's) is refused too; `--insecure-plaintext-cluster`
    /// is the one way to run them in plaintext, and says so.
    @Test func aPlaintextStacksClustersAdmitOnlyTheOperator() async throws {
        try await HealthNodes.with { nodes in
            let (stack, network) = (nodes.stack, nodes.network)
            let up = try await nodes.compose("up", "--nodes", "3")
            try #require(up.status == 0, "compose up --nodes 3 failed: \(up.output)")
            let port = try #require(stack.basePorts["health"])
            let members = (1...3).map { "\(network.subnet).\(10 + $0):\(port + 1000)" }
            func client(_ tls: ClusterTLS?) throws -> DqliteClient {
                try DqliteClient(
                    addresses: members, database: "health", callTimeout: TestTime.scaled(.seconds(1)),
                    leaderWait: TestTime.scaled(.seconds(1)), tls: tls)
            }
            // No certificate: what the issue's `nobody` had.
            #expect { try client(nil).connect().query("SELECT count(*) FROM sqlite_master") } throws: {
                ($0 as? DqliteError)?.kind == .noLeader
            }
            // A certificate of the clusters' CA without the operator's role.
            let directory = stack.state.appendingPathComponent("cluster/tls")
            let stranger = stack.directory.appendingPathComponent("stranger").path
            try TestCertificates.openssl([
                "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout",
                stranger + ".key", "-out", stranger + ".csr",
                "-subj", "/O=Menagerie/CN=gateway",
            ])
            try TestCertificates.openssl([
                "x509", "-req", "-in", stranger + ".csr", "-CA", directory.appendingPathComponent("ca.pem").path,
                "-CAkey", directory.appendingPathComponent("ca.key").path, "-CAcreateserial", "-days", "1", "-out",
                stranger + ".pem",
            ])
            let strangerTLS = try ClusterTLS(
                certificateFile: stranger + ".pem", keyFile: stranger + ".key",
                caFile: directory.appendingPathComponent("ca.pem").path)
            #expect { try client(strangerTLS).members() } throws: { ($0 as? DqliteError)?.kind == .noLeader }
            // The operator: in-process, and through compose's `cluster backup` (the gateway with the operator's certificate).
            #expect(try client(try stack.operatorClusterTLS()).members().count == 3)
            let backup = stack.directory.appendingPathComponent("backup.sqlite").path
            let backedUp = try await nodes.compose("cluster", "backup", "health", backup)
            #expect(backedUp.status == 0, "\(backedUp.output)")
        }
        // A stack of its own (a cluster's Raft log stays on its nodes' disks across `down`).
        try await HealthNodes.with { nodes in
            let plaintext = try await nodes.compose("up", "--nodes", "3", "--insecure-plaintext-cluster")
            try #require(plaintext.status == 0, "\(plaintext.output)")
            #expect(plaintext.output.contains("WARNING: --insecure-plaintext-cluster"), "\(plaintext.output)")
            let port = try #require(nodes.stack.basePorts["health"])
            let members = (1...3).map { "\(nodes.network.subnet).\(10 + $0):\(port + 1000)" }
            let anyone = try DqliteClient(
                addresses: members, database: "health", callTimeout: TestTime.scaled(.seconds(1)),
                leaderWait: TestTime.scaled(.seconds(1)))
            #expect(try anyone.members().count == 3, "a plaintext cluster took no plaintext client")
        }
    }

    /// `up --nodes 3 --tls`: health's cluster runs over mutual TLS (Raft and statements: a plaintext client of a
    /// member finds no leader, the operator's certificate gets in), writes go through, and `node add` makes the
    /// services' certificates name the new node's address so that it joins.
    @Test func aClusterOnATLSStackRunsOverTLSAndTakesANewNode() async throws {
        try await HealthNodes.with { nodes in
            let (stack, network) = (nodes.stack, nodes.network)
            let up = try await nodes.compose("up", "--nodes", "3", "--tls")
            try #require(up.status == 0, "compose up --nodes 3 --tls failed: \(up.output)")
            let created = try await nodes.health(["user", "create", "eva"])
            try #require(created.status == 0, "\(created.output)")
            let token = try #require(created.output.split(separator: "\n").last.map(String.init))
            #expect(
                try await nodes.health(["add", "stepCount", "100", "--start", "2026-05-01T09:00:00Z", "--token", token])
                    .status == 0)

            let port = try #require(stack.basePorts["health"])
            let members = (1...3).map { "\(network.subnet).\(10 + $0):\(port + 1000)" }
            let plaintext = try DqliteClient(
                addresses: members, database: "health", callTimeout: TestTime.scaled(.seconds(1)),
                leaderWait: TestTime.scaled(.seconds(1)))
            #expect { try plaintext.connect() } throws: { ($0 as? DqliteError)?.kind == .noLeader }
            let listed = try await nodes.compose("cluster", "members", "health")
            #expect(listed.status == 0 && members.allSatisfy { listed.output.contains($0) }, "\(listed.output)")

            let added = try await nodes.compose("node", "add")
            #expect(added.status == 0 && added.output.contains("node 4 added"), "\(added.output)")
            let four = try await nodes.compose("cluster", "members", "health")
            #expect(four.output.contains("\(network.subnet).14:\(port + 1000)"), "\(four.output)")
            let through4 = try await nodes.health(
                ["list", "stepCount", "--token", token], endpoint: "\(network.subnet).14:\(port)")
            #expect(through4.status == 0 && through4.output.contains("2026-05-01T09:00:00Z"), "\(through4.output)")
        }
    }
}

/// A health-only stack on nodes for the tests above: `compose` in its network, and the gateway's health commands
/// against its state (without the harness's health token: each test makes its own user).
struct HealthNodes {
    let stack: Stack
    let network: (tag: String, subnet: String, environment: [String: String])
    let environment: [String: String]

    static func with(_ body: (HealthNodes) async throws -> Void) async throws {
        let network = Nodes.freeNetwork()
        defer { Nodes.removeLeftovers(tag: network.tag) }
        try await Stack.with(services: ["health"]) { stack in
            var environment = stack.environment
            environment["XDG_DATA_HOME"] = stack.directory.appendingPathComponent("xdg").path
            environment.removeValue(forKey: "MENAGERIE_HEALTH_TOKEN")
            try await body(HealthNodes(stack: stack, network: network, environment: environment))
        }
    }

    func compose(_ arguments: String...) async throws -> (status: Int32, output: String) {
        try await stack.compose(environment: network.environment, arguments)
    }

    func health(_ arguments: [String], endpoint: String? = nil) async throws -> (status: Int32, output: String) {
        try await Stack.run(
            "\(Stack.binDirectory)/gateway",
            ["health"] + arguments + ["--state", stack.state.path]
                + (endpoint.map { ["--endpoint", "health=\($0)"] } ?? []),
            environment: environment)
    }
}
