import ComposeKit
import Foundation
import GatewayKit
import Testing

/// What compose decides before it starts anything: its arguments, the ports replicas take, where they go on the
/// nodes and who clusters, the state files it reads and writes.
@Suite struct PlanningTests {
    static let manifest = try! Manifest.parse(
        "[zoo]\nport = 7100\n[ocr]\nport = 7200\ncluster = yes\nnodes = 1,3\n",
        file: URL(fileURLWithPath: "/srv/compose/services.conf"))

    @Test func upReadsItsOptionsAndServices() throws {
        #expect(
            try UpArguments.parse(["--tls", "zoo", "--nodes", "3", "--insecure-plaintext-cluster", "ocr"])
                == UpArguments(tls: true, plaintextCluster: true, nodes: 3, names: ["zoo", "ocr"]))
        #expect(try UpArguments.parse(["--nodes=99"]).nodes == 99)
        #expect(try UpArguments.parse([]) == UpArguments())
        for (arguments, message) in [
            (["--nodes"], "--nodes needs a count (compose up --nodes 3)"),
            (["--nodes", "0"], "--nodes must be a count 1-99 (got '0')"),
            (["--nodes=100"], "--nodes must be a count 1-99 (got '100')"),
            (["--nodes", "-1"], "--nodes must be a count 1-99 (got '-1')"),
            (["--nodes", "3", "--nodes", "x"], "--nodes must be a count 1-99 (got 'x')"),
        ] {
            #expect(throws: ComposeFailure(message), "\(arguments)") { try UpArguments.parse(arguments) }
        }
    }

    @Test func scaleReadsAServiceAndACount() throws {
        let (service, count) = try ScaleArgument.parse("ocr=007", in: Self.manifest)
        #expect(service.name == "ocr" && count == 7)
        #expect(try ScaleArgument.parse("zoo=0", in: Self.manifest).count == 0)
        #expect(try ScaleArgument.parse("zoo=000", in: Self.manifest).count == 0)
        for (assignment, message) in [
            ("zoo", "usage: compose scale SERVICE=N (got 'zoo')"),
            ("=3", "unknown service '' (known: zoo ocr)"),
            ("cat=1", "unknown service 'cat' (known: zoo ocr)"),
            ("zoo=", "replica count must be a number (0-99999): zoo="),
            ("zoo=-1", "replica count must be a number (0-99999): zoo=-1"),
            ("zoo=100000", "replica count must be a number (0-99999): zoo=100000"),
        ] {
            #expect(throws: ComposeFailure(message), "\(assignment)") {
                try ScaleArgument.parse(assignment, in: Self.manifest)
            }
        }
    }

    /// Replica i at port + i, its cluster member at + 1000: past 65535 or on another service's ports is refused.
    @Test func portsAreCheckedAgainstTheLimitAndTheOtherServices() throws {
        let zoo = ServiceSettings(name: "zoo", port: 7100), ocr = ServiceSettings(name: "ocr", port: 7200)
        let others = [(zoo, 2), (ocr, 1)]
        try PortPlan.check(zoo, 100, clustered: false, others: others)
        try PortPlan.check(ocr, 0, clustered: false, others: [(zoo, 200)])
        try PortPlan.check(zoo, 5, clustered: false, others: [(ocr, 0)] + [(zoo, 5)])
        let cases: [(ServiceSettings, Int, Bool, [(ServiceSettings, Int)], String)] = [
            (zoo, 101, false, others, "101 replicas of zoo would listen on ports 7100-7200, and ocr has 7200-7200"),
            (
                ServiceSettings(name: "a", port: 65535), 2, false, [], "a.1 would listen on port 65536, above 65535"
            ),
            (
                ServiceSettings(name: "a", port: 64600), 1, true, [],
                "a.0's cluster port would be 65600 (its port + 1000), above 65535"
            ),
            (
                ServiceSettings(name: "a", port: 6200), 1, true, others,
                "a's cluster ports would be 7200-7200 (its ports + 1000), and ocr listens on 7200-7200"
            ),
        ]
        for (service, count, clustered, others, message) in cases {
            #expect(throws: ComposeFailure(message), "\(message)") {
                try PortPlan.check(service, count, clustered: clustered, others: others)
            }
        }
    }

    /// A service on the nodes its `nodes` names (all without it) clusters when it says so and is on two or more; its
    /// members are listed node by node, and a member's id counts the places of the nodes before it, removed ones too.
    @Test func placementMembersAndIDs() throws {
        let ocr = try Self.manifest.service("ocr"), zoo = try Self.manifest.service("zoo")
        #expect([1, 2, 3].map(ocr.isPlaced(on:)) == [true, false, true] && zoo.isPlaced(on: 42))
        #expect(ocr.clusters(onNodes: 3) && !ocr.clusters(onNodes: 2) && !ocr.clusters(onNodes: nil))
        #expect(!zoo.clusters(onNodes: 3))
        let network = Network.parse("tag=mt\nsubnet=10.9.0\nnodes=4\nremoved=1\nservices=zoo ocr\n")
        #expect(network == Network(tag: "mt", subnet: "10.9.0", count: 4, removed: [1], services: ["zoo", "ocr"]))
        #expect(network.numbers == [2, 3, 4] && network.namespace(3) == "mt-node3" && network.bridge == "mt-br")
        #expect(ocr.members(on: network, replicas: 2) == "10.9.0.13:8200,10.9.0.13:8201")
        #expect(ocr.members(on: network, replicas: 1, clusterPorts: false) == "10.9.0.13:7200")
        #expect(ocr.memberID(0, node: 1, replicas: 2) == 1 && ocr.memberID(1, node: 3, replicas: 2) == 4)
        #expect(Network.parse("") == Network(tag: "mn", subnet: "10.231.0", count: 0))
    }

    @Test func theEndpointsFileGroupsByServiceKeepingEachOnesOrder() {
        let text = EndpointsFile.text([
            ("zoo", "zoo 127.0.0.1:7100"), ("ocr", "ocr 10.0.0.12:7200 node=2"), ("zoo", "zoo 127.0.0.1:7101"),
            ("ocr", "ocr 10.0.0.11:7200 node=1"),
        ])
        #expect(
            text == "ocr 10.0.0.12:7200 node=2\nocr 10.0.0.11:7200 node=1\nzoo 127.0.0.1:7100\nzoo 127.0.0.1:7101\n")
    }
}
