import Foundation
import GatewayKit
import TestSupport
import Testing

/// `compose up --nodes 3`: three "machines" on this one (network namespaces on a private bridge), the zoo on each,
/// driven through the gateway while a node is killed, another cut off and healed, and the first restarted from its
/// disk; `down` leaves no namespace, link or bridge. Needs root and `ip netns`; skips, saying so, elsewhere.
@Suite(
    .serialized, .timeLimit(.minutes(5)),
    .enabled(if: Nodes.available, "needs root and ip netns (iproute2): compose up --nodes makes network namespaces"))
struct ComposeNodesTests {
    @Test func threeNodesSurviveAKillAPartitionAndARestartAndLeaveNothingBehind() async throws {
        let network = Nodes.freeNetwork()
        defer { Nodes.removeLeftovers(tag: network.tag) }  // after Stack.with's own down, should a failure get there
        try await Stack.with(services: ["zoo"]) { stack in
            func compose(_ arguments: String...) async throws -> (status: Int32, output: String) {
                try await stack.compose(environment: network.environment, arguments)
            }
            let up = try await compose("up", "--nodes", "3")
            try #require(up.status == 0, "compose up --nodes 3 failed: \(up.output)")
            #expect(Nodes.namespaces(tag: network.tag) == (1...3).map { "\(network.tag)-node\($0)" })

            // Three zoo replicas, one on each node's own address, each SERVING.
            let port = try #require(stack.basePorts["zoo"])
            let addresses = (1...3).map { "\(network.subnet).\(10 + $0):\(port)" }
            var instances = try statusInstances(try await stack.gateway(["status", "--json"]).output)
            #expect(instances.compactMap { $0["address"] as? String } == addresses, "\(instances)")
            #expect(instances.allSatisfy { $0["health"] as? String == "SERVING" }, "\(instances)")
            try await expectReadsSucceed(stack, "with every node up")

            // kill -9 of node 1 (the gateway's first endpoint): its calls go to the others.
            #expect(try await compose("node", "kill", "1").status == 0)
            #expect(try await compose("node", "list").output.contains("down"))
            try await expectReadsSucceed(stack, "with node 1 killed")
            instances = try statusInstances(try await stack.gateway(["status", "--json"]).output)
            #expect(instances.map { $0["health"] as? String == "SERVING" } == [false, true, true], "\(instances)")

            // Node 3 cut off: nothing reaches it (a probe waits out its timeout), node 2 still answers, and so
            // do calls through the gateway; healed, node 3 answers again.
            let partition = try await compose("node", "partition", "3")
            #expect(
                partition.status == 0 && partition.output.contains("node 3 partitioned (nftables)"),
                "\(partition.output)")
            #expect(try await probe(stack, addresses[2]) != 0, "a partitioned node answered")
            #expect(try await probe(stack, addresses[1]) == 0)
            try await expectReadsSucceed(stack, "with node 1 killed and node 3 partitioned")
            #expect(try await compose("node", "heal").status == 0)
            #expect(try await probe(stack, addresses[2]) == 0, "node 3 does not answer after heal")

            // Without nftables (or asked to), a partition takes the node's link down; heal brings it up.
            let link = try await stack.compose(
                environment: network.environment.merging(["MENAGERIE_PARTITION": "link"]) { $1 },
                ["node", "partition", "2"])
            #expect(link.status == 0 && link.output.contains("node 2 partitioned (link)"), "\(link.output)")
            #expect(try await compose("node", "list").output.contains("partitioned(link)"))
            #expect(try await probe(stack, addresses[1]) != 0, "a node whose link is down answered")
            #expect(try await compose("node", "heal", "2").status == 0)
            #expect(try await probe(stack, addresses[1]) == 0, "node 2 does not answer after heal")

            // Node 1 restarted from its disk: all three serve again.
            let restart = try await compose("node", "restart", "1")
            #expect(restart.status == 0, "\(restart.output)")
            instances = try statusInstances(try await stack.gateway(["status", "--json"]).output)
            #expect(
                instances.allSatisfy { $0["health"] as? String == "SERVING" } && instances.count == 3, "\(instances)")

            let down = try await compose("down")
            #expect(down.status == 0, "\(down.output)")
            #expect(Nodes.namespaces(tag: network.tag).isEmpty, "namespaces left after down")
            #expect(Nodes.links(tag: network.tag).isEmpty, "links left after down")
            #expect(stack.processesOfThisStack().isEmpty)
            #expect(try await compose("down").status == 0, "a second down is not a no-op")
        }
    }

    /// `node restart N` starts again what `up` placed on node N, nothing more: after `up --nodes 2 zoo` on a stack that
    /// also knows ocr, node 2's restart started ocr there too (as `up --nodes 3 health ocr` then `node restart 2`
    /// started zoo and classification).
    @Test func aNodeRestartStartsOnlyWhatUpPlacedThere() async throws {
        let network = Nodes.freeNetwork()
        defer { Nodes.removeLeftovers(tag: network.tag) }
        try await Stack.with(services: ["zoo", "ocr"]) { stack in
            func compose(_ arguments: String...) async throws -> (status: Int32, output: String) {
                try await stack.compose(environment: network.environment, arguments)
            }
            let up = try await compose("up", "--nodes", "2", "zoo")
            try #require(up.status == 0, "compose up --nodes 2 zoo failed: \(up.output)")
            let restart = try await compose("node", "restart", "2")
            #expect(restart.status == 0, "\(restart.output)")
            let node2 = try FileManager.default.contentsOfDirectory(
                atPath: stack.state.appendingPathComponent("nodes/2").path)
            #expect(node2.contains("zoo.0.supervisor"), "\(node2)")
            #expect(!node2.contains { $0.hasPrefix("ocr.") }, "node restart 2 started ocr, which up did not: \(node2)")
            #expect(!(try await compose("ps").output.contains("ocr")))
            #expect(try await compose("down").status == 0)
        }
    }

    /// `down` then `up --nodes 3` on the same data: each health member restarts from its Raft log and waits for a
    /// quorum before its replica reports SERVING, so an `up` that waited for node 1's replica before starting node 2's
    /// failed after its start timeout. The cluster comes back with what it held (the user made before `down` exists).
    @Test func upAgainOnTheSameDataAfterDownBringsTheClusterBack() async throws {
        let network = Nodes.freeNetwork()
        defer { Nodes.removeLeftovers(tag: network.tag) }
        try await Stack.with(services: ["health"]) { stack in
            let environment = network.environment.merging(["MENAGERIE_START_TIMEOUT": "\(Int(TestTime.scale * 30))"]) {
                $1
            }
            func compose(_ arguments: String...) async throws -> (status: Int32, output: String) {
                try await stack.compose(environment: environment, arguments)
            }
            let up = try await compose("up", "--nodes", "3")
            try #require(up.status == 0, "compose up --nodes 3 failed: \(up.output)")
            let created = try await stack.gateway(["health", "user", "create", "keeper"])
            #expect(created.status == 0, "\(created.output)")
            #expect(try await compose("down").status == 0)

            let again = try await compose("up", "--nodes", "3")
            #expect(again.status == 0, "compose up --nodes 3 on the cluster's data failed: \(again.output)")
            let instances = try statusInstances(try await stack.gateway(["status", "--json"]).output)
            #expect(
                instances.count == 3 && instances.allSatisfy { $0["health"] as? String == "SERVING" }, "\(instances)")
            let twice = try await stack.gateway(["health", "user", "create", "keeper"])
            #expect(
                twice.status != 0 && twice.output.contains("user \"keeper\" already exists"),
                "the user made before down is gone: \(twice.output)")
            #expect(try await compose("down").status == 0)
        }
    }

    /// A placement the node count cannot hold is refused before anything is made, a bad count too, and an up
    /// whose network cannot be made leaves none of it behind.
    @Test func upRefusesPlacementsAndCountsItCannotHoldAndLeavesNothingWhenItFails() async throws {
        let network = Nodes.freeNetwork()
        defer { Nodes.removeLeftovers(tag: network.tag) }
        try await Stack.with(services: ["zoo"]) { stack in
            let port = try #require(stack.basePorts["zoo"])
            try stack.writeConfig([ServiceSettings(name: "zoo", port: port, data: "data/zoo", nodes: [1, 3])])
            let placed = try await stack.compose(environment: network.environment, ["up", "--nodes", "2"])
            #expect(
                placed.status == 1
                    && placed.output.contains("[zoo] is placed on node 3 (nodes = 1,3), and the stack has 2 node(s)"),
                "\(placed.output)")
            for count in ["0", "100", "x"] {
                let bad = try await stack.compose(environment: network.environment, ["up", "--nodes", count])
                #expect(bad.status == 1 && bad.output.contains("--nodes must be a count 1-99"), "\(bad.output)")
            }
            #expect(Nodes.namespaces(tag: network.tag).isEmpty && Nodes.links(tag: network.tag).isEmpty)

            // An up whose network fails halfway (node 2's link name is taken) removes what it made, and says so.
            try stack.writeConfig([ServiceSettings(name: "zoo", port: port, data: "data/zoo")])
            let taken = Nodes.run(
                Nodes.ip ?? "ip",
                ["link", "add", "\(network.tag)-v2", "type", "veth", "peer", "name", "\(network.tag)-x"])
            try #require(taken.status == 0, "cannot make a veth pair: \(taken.output)")
            let failed = try await stack.compose(environment: network.environment, ["up", "--nodes", "3"])
            #expect(
                failed.status == 1 && failed.output.contains("could not make the nodes' network"), "\(failed.output)")
            #expect(Nodes.namespaces(tag: network.tag).isEmpty, "namespaces left after a failed up")
            #expect(
                Nodes.links(tag: network.tag).isEmpty, "links left after a failed up: \(Nodes.links(tag: network.tag))")
            #expect(!FileManager.default.fileExists(atPath: stack.state.appendingPathComponent("network").path))
        }
    }

    /// Zoo reads through the gateway, each a fresh gateway process (its first endpoint is node 1's).
    private func expectReadsSucceed(_ stack: Stack, _ when: String) async throws {
        for _ in 0..<3 {
            let search = try await stack.gateway([
                "zoo", "search", "--limit", "1", "--timeout", "\(10 * TestTime.scale)",
            ])
            #expect(search.status == 0, "zoo search \(when): \(search.output)")
        }
    }

    private func probe(_ stack: Stack, _ address: String) async throws -> Int32 {
        try await Stack.run(
            "\(Stack.binDirectory)/gateway", ["probe", address, "--quiet", "--timeout", "\(TestTime.scale)"],
            environment: stack.environment
        ).status
    }
}

/// The host's side of the tests' nodes.
enum Nodes {
    static let ip = ["/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"].first {
        FileManager.default.isExecutableFile(atPath: $0)
    }

    /// Root, with the ip program and network namespaces (a namespace can be made and removed).
    static let available: Bool = {
        guard getuid() == 0, let ip else { return false }
        let name = "menagerie-probe-\(getpid())"
        defer { _ = run(ip, ["netns", "del", name]) }
        return run(ip, ["netns", "add", name]).status == 0
    }()

    /// A tag and a /24 no interface of this machine uses, for one test's nodes (beside a developer's own).
    static func freeNetwork() -> (tag: String, subnet: String, environment: [String: String]) {
        let used = run(ip ?? "ip", ["-4", "-o", "addr", "show"]).output
        var subnet = ""
        repeat {
            subnet = "10.\(Int.random(in: 200...250)).\(Int.random(in: 0...255))"
        } while used.contains(" \(subnet).")
        let tag = "t" + String(format: "%05x", Int.random(in: 0..<0xFFFFF))
        return (tag, subnet, ["MENAGERIE_NODE_TAG": tag, "MENAGERIE_NODE_SUBNET": subnet])
    }

    static func namespaces(tag: String) -> [String] {
        run(ip ?? "ip", ["netns", "list"]).output.split(separator: "\n").compactMap {
            $0.split(separator: " ").first.map(String.init)
        }
        .filter { $0.hasPrefix("\(tag)-") }.sorted()
    }

    static func links(tag: String) -> [String] {
        run(ip ?? "ip", ["-o", "link", "show"]).output.split(separator: "\n").compactMap { line in
            line.split(separator: ":").dropFirst().first.map { $0.trimmingCharacters(in: .whitespaces) }
        }.filter { $0.hasPrefix("\(tag)-") }
    }

    /// What a failed test may have left (down normally removes it all): the tests' tag only.
    static func removeLeftovers(tag: String) {
        guard let ip else { return }
        for namespace in namespaces(tag: tag) { _ = run(ip, ["netns", "del", namespace]) }
        for link in links(tag: tag) { _ = run(ip, ["link", "del", String(link.split(separator: "@").first ?? "")]) }
    }

    @discardableResult
    static func run(_ executable: String, _ arguments: [String]) -> (status: Int32, output: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        process.standardInput = FileHandle.nullDevice
        do { try process.run() } catch { return (-1, "\(error)") }
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: data, as: UTF8.self))
    }
}
