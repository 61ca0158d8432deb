import ComposeKit
import Foundation
import GatewayKit

#if canImport(Glibc)
    import Glibc
#endif

/// `node …` (the nodes' faults and membership) and `cluster …` (the operator's path to the nodes' dqlite clusters).
extension Compose {
    static let nodeUsage = "usage: compose node list | kill N | restart N | partition N | heal [N] | add | remove N"

    func node(_ arguments: [String]) throws(ComposeFailure) {
        let action = arguments.first ?? "", rest = Array(arguments.dropFirst())
        func usage(_ count: ClosedRange<Int>, _ text: String) throws(ComposeFailure) {
            guard count.contains(rest.count) else { throw ComposeFailure("usage: compose node \(text)") }
        }
        switch action {
        case "list":
            try usage(0...0, "list")
            try listNodes()
        case "kill":
            try usage(1...1, "kill N")
            let (network, node) = try requireNodes(rest[0])
            killNodeProcesses(node, network)
            Self.say(
                "node \(node) killed (kill -9 of every process in \(network.namespace(node))); compose node restart \(node) starts it again"
            )
        case "restart":
            try usage(1...1, "restart N")
            let (network, node) = try requireNodes(rest[0])
            let files = Files.list("\(state)/nodes/\(node)", suffix: ".supervisor").map {
                "\(state)/nodes/\(node)/\($0)"
            }
            if !files.isEmpty { stopReplicas(files) }
            killNodeProcesses(node, network)
            let failed = try convergeNode(node, stackServices(network), network)
            try finishConverging(failed, nodes: network, logs: "\(state)/nodes/\(node)/logs")
            Self.say("node \(node) restarted from its disk")
        case "partition":
            try usage(1...1, "partition N")
            let (network, node) = try requireNodes(rest[0])
            if Files.exists("\(state)/nodes/\(node)/partitioned") {
                Self.say("node \(node) is partitioned already")
                return
            }
            try partition(node, network)
        case "heal":
            try usage(0...1, "heal [N]")
            let (network, node) = try requireNodes(rest.first)
            for number in rest.isEmpty ? (network.count > 0 ? Array(1...network.count) : []) : [node] {
                heal(number, network)
            }
        case "add":
            try usage(0...0, "add")
            try addNode()
        case "remove":
            try usage(1...1, "remove N")
            let (network, node) = try requireNodes(rest[0])
            try removeNode(node, network)
        default:
            throw ComposeFailure(Self.nodeUsage)
        }
    }

    private func listNodes() throws(ComposeFailure) {
        let (network, _) = try requireNodes()
        func row(_ columns: [String]) -> String {
            zip(columns, [5, 16, 14, 12]).map { $0.padding(toLength: max($1, $0.count), withPad: " ", startingAt: 0) }
                .joined(separator: " ")
                + " " + columns[4] + "\n"
        }
        var text = row(["NODE", "ADDRESS", "NAMESPACE", "STATE", "REPLICAS"])
        for node in network.count > 0 ? Array(1...network.count) : [] {
            let directory = "\(state)/nodes/\(node)"
            let replicas = Files.list(directory, suffix: ".supervisor").map { file in
                let name = String(file.dropLast(".supervisor".count))
                return Self.alive("\(directory)/\(file)", in: directory) ? "\(name) " : "\(name)(stopped) "
            }.joined()
            var condition =
                Programs.output(["ip", "netns", "pids", network.namespace(node)]).output.trimmingCharacters(
                    in: .whitespacesAndNewlines
                ).isEmpty ? "down" : "up"
            if network.removed.contains(node) { condition = "removed" }
            if let partitioned = Files.read("\(directory)/partitioned") {
                condition += ",partitioned(\(partitioned.trimmingCharacters(in: .whitespacesAndNewlines)))"
            }
            text += row([
                String(node), network.address(node), network.namespace(node), condition,
                replicas.isEmpty ? "-" : replicas,
            ])
        }
        FileHandle.standardOutput.write(Data(text.utf8))
    }

    /// nftables in the node's own namespace drops everything that is not loopback, both ways: the node keeps running
    /// and talks to itself, no one reaches it and it reaches no one (connections hang, as across a cut cable). Without
    /// nft, or with MENAGERIE_PARTITION=link, its link is taken down instead (the host side of its veth).
    private func partition(_ node: Int, _ network: Network) throws(ComposeFailure) {
        let method = environment("MENAGERIE_PARTITION") ?? "nftables"
        guard method == "nftables" || method == "link" else {
            throw ComposeFailure("MENAGERIE_PARTITION must be nftables or link (got '\(method)')")
        }
        let rules = """
            table inet menagerie_partition {
              chain input { type filter hook input priority 0; policy drop; iif "lo" accept; }
              chain output { type filter hook output priority 0; policy drop; oif "lo" accept; }
            }

            """
        let file = "\(state)/nodes/\(node)/partitioned"
        let rulesFile = "\(state)/nodes/\(node)/partition.nft"
        if method == "nftables", Programs.run(["sh", "-c", "command -v nft"], quiet: true) == 0,
            (try? Files.write(rules, to: rulesFile)) != nil,
            Programs.run(["ip", "netns", "exec", network.namespace(node), "nft", "-f", rulesFile]) == 0
        {
            Files.remove(rulesFile)
            try Files.write("nftables\n", to: file)
        } else {
            Files.remove(rulesFile)
            guard Programs.run(["ip", "link", "set", network.link(node), "down"]) == 0 else {
                throw ComposeFailure("could not take node \(node)'s link down")
            }
            try Files.write("link\n", to: file)
        }
        Self.say(
            "node \(node) partitioned (\((Files.read(file) ?? "").trimmingCharacters(in: .whitespacesAndNewlines)))")
    }

    private func heal(_ node: Int, _ network: Network) {
        let file = "\(state)/nodes/\(node)/partitioned"
        guard let method = Files.read(file)?.trimmingCharacters(in: .whitespacesAndNewlines) else { return }
        switch method {
        case "nftables":
            Programs.run(
                [
                    "ip", "netns", "exec", network.namespace(node), "nft", "delete", "table", "inet",
                    "menagerie_partition",
                ], quiet: true)
        case "link": Programs.run(["ip", "link", "set", network.link(node), "up"])
        default: break
        }
        Files.remove(file)
        Self.say("node \(node) healed")
    }

    /// One node more (the next number): its namespace, and the services placed on it started there, its clustered
    /// replicas joining their clusters.
    private func addNode() throws(ComposeFailure) {
        let (network, _) = try requireNodes()
        let node = network.count + 1
        guard node <= ServiceList.maxNode else {
            throw ComposeFailure("a stack has at most \(ServiceList.maxNode) nodes")
        }
        _ = try clusterLatency()
        let addresses = (1...node).map { ",IP:\(network.address($0))" }.joined()
        if Files.exists("\(state)/tls/ca.pem") {
            // The services' certificates name every node's address (peers and clients check it): made again naming the
            // new one too. Running replicas keep the ones they loaded, which name their own addresses.
            guard reissueCertificates(manifest.names, in: "\(state)/tls", addresses: addresses) else {
                throw ComposeFailure(
                    "openssl could not make the services' certificates for node \(node) in \(state)/tls; the stack is as it was"
                )
            }
        }
        if Files.exists("\(clusterTLSDirectory)/ca.pem") {
            guard
                reissueCertificates(
                    manifest.services.filter(\.cluster).map(\.name), in: clusterTLSDirectory, addresses: addresses,
                    unit: "member")
            else {
                throw ComposeFailure(
                    "openssl could not make the members' certificates for node \(node) in \(clusterTLSDirectory); the stack is as it was"
                )
            }
        }
        try setNetworkField("nodes", String(node))
        guard let grown = Network.read(state: state), createNetwork(grown, upTo: node) else {
            Programs.run(["ip", "netns", "del", network.namespace(node)], quiet: true)
            Programs.run(["ip", "link", "del", network.link(node)], quiet: true)
            try setNetworkField("nodes", String(node - 1))
            throw ComposeFailure("could not make node \(node)'s namespace (ip said why above); the stack is as it was")
        }
        let started = stackServices(grown)
        let here = started.filter { placed($0, node) }
        installModels(for: here)
        let failed = try convergeNode(node, started, grown)
        try finishConverging(failed, nodes: grown, logs: "\(state)/nodes/\(node)/logs")
        Self.say(
            "node \(node) added at \(grown.address(node)) running \(here.isEmpty ? "nothing" : here.map(\.name).joined(separator: " "))"
        )
    }

    /// Node N's replicas taken out of their clusters first (so the others stop counting them towards a quorum before
    /// they stop answering), then stopped; its namespace removed (its disk stays); its number is not reused.
    private func removeNode(_ node: Int, _ network: Network) throws(ComposeFailure) {
        guard network.numbers.contains(where: { $0 != node }) else {
            throw ComposeFailure("node \(node) is the stack's last node: compose down stops the stack")
        }
        for service in manifest.services where clustered(service, nodes: network.count) && placed(service, node) {
            for index in 0..<desired(service) {
                let member = "\(network.address(node)):\(port(service, index) + Network.clusterPortOffset)"
                let status = Programs.run(
                    [
                        "\(bin)/gateway", "cluster", "remove", service.name, member, "--cluster",
                        members(service, network),
                    ] + operatorTLSArguments)
                guard status == 0 else {
                    throw ComposeFailure(
                        "could not take \(service.name).\(index) of node \(node) (\(member)) out of \(service.name)'s cluster (the gateway said why above); node \(node) runs on"
                    )
                }
            }
        }
        let files = Files.list("\(state)/nodes/\(node)", suffix: ".supervisor").map { "\(state)/nodes/\(node)/\($0)" }
        if !files.isEmpty { stopReplicas(files) }
        killNodeProcesses(node, network)
        Programs.run(["ip", "netns", "del", network.namespace(node)], quiet: true)
        Programs.run(["ip", "link", "del", network.link(node)], quiet: true)
        Files.remove("\(state)/nodes/\(node)/partitioned")
        try setNetworkField("removed", (network.removed + [node]).map(String.init).joined(separator: ","))
        try writeEndpoints(nodes: Network.read(state: state))
        Self.say(
            "node \(node) removed: out of its clusters, its replicas stopped, its namespace gone (its disk, DATA/node-\(node), stays)"
        )
    }

    /// `cluster import|backup|restore|members SERVICE …`: `gateway cluster` with the members as this stack placed them.
    func cluster(_ arguments: [String]) throws(ComposeFailure) {
        let action = arguments.first ?? "", rest = Array(arguments.dropFirst())
        var extra: [String] = [], file: String?
        switch action {
        case "import", "backup":
            guard rest.count == 2 || (rest.count == 3 && rest[2] == "--replace") else {
                throw ComposeFailure("usage: compose cluster \(action) SERVICE FILE [--replace]")
            }
            file = rest[1]
            if rest.count == 3 { extra = ["--replace"] }
        case "restore":
            guard rest.count == 2 else { throw ComposeFailure("usage: compose cluster restore SERVICE FILE") }
            file = rest[1]
            extra = ["--replace"]  // a restore is asked to overwrite the cluster's rows
        case "members":
            guard rest.count == 1 else { throw ComposeFailure("usage: compose cluster members SERVICE") }
        default:
            throw ComposeFailure(
                "usage: compose cluster import SERVICE FILE [--replace] | backup SERVICE FILE [--replace] | restore SERVICE FILE | members SERVICE"
            )
        }
        let service = try manifest.service(rest[0])
        guard let network = Network.read(state: state), clustered(service, nodes: network.count) else {
            let clustering = manifest.services.filter(\.cluster).map(\.name).joined(separator: " ")
            throw ComposeFailure(
                "\(service.name) keeps no dqlite cluster in this stack: the services that do (\(clustering)) keep one when placed on more than one node of compose up --nodes N"
            )
        }
        let status = Programs.run(
            ["\(bin)/gateway", "cluster", action, service.name] + (file.map { [$0] } ?? []) + extra + [
                "--cluster", members(service, network),
            ]
                + operatorTLSArguments)
        if status != 0 { exit(status) }
    }
}
