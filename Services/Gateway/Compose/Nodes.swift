import ComposeKit
import Foundation
import GatewayKit

#if canImport(Glibc)
    import Glibc
#endif

/// `compose up --nodes N`: N "machines" on this one. Each is a network namespace whose one link joins a bridge on a
/// private /24 (`Network`); each runs the services placed on it (`nodes =`), from its own disk (DATA/node-N). What
/// was made is written down (STATE/network) before it is made, so that `down` removes it all whatever an `up` got to.
extension Compose {
    /// The nodes' settings: a running stack's network is the one it was made with, else MENAGERIE_NODE_TAG and
    /// MENAGERIE_NODE_SUBNET (default mn, 10.231.0).
    var nodeTag: String { Network.read(state: state)?.tag ?? environment("MENAGERIE_NODE_TAG") ?? "mn" }
    var nodeSubnet: String { Network.read(state: state)?.subnet ?? environment("MENAGERIE_NODE_SUBNET") ?? "10.231.0" }

    func environment(_ name: String) -> String? {
        ProcessInfo.processInfo.environment[name].flatMap { $0.isEmpty ? nil : $0 }
    }

    /// The one-way latency in ms the clusters derive their heartbeat and election timeouts from.
    func clusterLatency() throws(ComposeFailure) -> Int {
        let text = environment("MENAGERIE_CLUSTER_LATENCY") ?? "20"
        guard (1...4).contains(text.count), text.allSatisfy({ $0.isASCII && $0.isNumber }), let latency = Int(text),
            latency >= 1
        else {
            throw ComposeFailure("MENAGERIE_CLUSTER_LATENCY must be a number of milliseconds 1-9999 (got '\(text)')")
        }
        return latency
    }

    func checkNodeSettings() throws(ComposeFailure) {
        let tag = nodeTag, subnet = nodeSubnet
        guard (1...6).contains(tag.count), tag.allSatisfy({ $0.isASCII && ($0.isLowercase || $0.isNumber) }) else {
            throw ComposeFailure("MENAGERIE_NODE_TAG must be 1-6 lowercase letters or digits (got '\(tag)')")
        }
        let parts = subnet.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        let numbers = parts.map { part in
            part.count <= 3 && !part.isEmpty && part.allSatisfy(\.isNumber) && !(part.count > 1 && part.hasPrefix("0"))
                ? Int(part) : nil
        }
        let valid: Bool = {
            guard parts.count == 3, numbers.allSatisfy({ $0 != nil && $0! <= 255 }) else { return false }
            let (a, b) = (numbers[0]!, numbers[1]!)
            return a == 10 || (a == 172 && (16...31).contains(b)) || (a == 192 && b == 168)
        }()
        guard valid else {
            throw ComposeFailure(
                "MENAGERIE_NODE_SUBNET must be the first three numbers of a private /24 (10.x.y, 172.16-31.y or 192.168.y; got '\(subnet)')"
            )
        }
    }

    /// Whether `service` runs on `node`: its `nodes` list names it, or it has none.
    func placed(_ service: ServiceSettings, _ node: Int) -> Bool { service.isPlaced(on: node) }

    /// Whether `service`'s replicas on `nodes` nodes form a dqlite cluster.
    func clustered(_ service: ServiceSettings, nodes: Int?) -> Bool { service.clusters(onNodes: nodes) }

    /// The members of `service`'s cluster, with the replica count the stack runs of it.
    func members(_ service: ServiceSettings, _ network: Network, clusterPorts: Bool = true) -> String {
        service.members(on: network, replicas: desired(service), clusterPorts: clusterPorts)
    }

    /// The --cluster… arguments of replica `index` of `service` on `node`, none when it is not clustered.
    func clusterArguments(_ service: ServiceSettings, _ index: Int, node: Int, _ network: Network)
        throws(ComposeFailure) -> [String]
    {
        guard clustered(service, nodes: network.count) else { return [] }
        let latency = try clusterLatency()
        var arguments = [
            "--cluster", members(service, network), "--cluster-bind",
            "\(network.address(node)):\(port(service, index) + Network.clusterPortOffset)",
            "--cluster-id", String(service.memberID(index, node: node, replicas: desired(service))), "--cluster-dir",
            "\(manifest.resolve(service.data))/node-\(node)/dqlite.\(index)",
            "--cluster-latency", String(latency),
        ]
        let tls = clusterTLSDirectory
        if Files.exists("\(tls)/ca.pem") {
            arguments += [
                "--cluster-tls-cert", "\(tls)/\(service.name).pem", "--cluster-tls-key", "\(tls)/\(service.name).key",
                "--cluster-tls-ca", "\(tls)/ca.pem",
            ]
        }
        if service.blobs { arguments += ["--blob-peers", members(service, network, clusterPorts: false)] }
        return arguments
    }

    // MARK: The network

    /// The nodes' tools: root, ip (iproute2), and nftables for partitions where Debian can install it (else links
    /// go down). Packages are compose/compose's to install (`compose node-deps`), which says what is missing.
    func nodeDependencies() {
        if Programs.run(["\(home)/compose", "node-deps"]) != 0 { exit(1) }
    }

    /// Makes the bridge and `count` namespaces (what exists already is kept: `up` twice is one up). Any failure
    /// removes everything, so a failed up leaves no namespace, link or bridge behind.
    func makeNetwork(_ count: Int) throws(ComposeFailure) {
        let tag = nodeTag, subnet = nodeSubnet
        if Network.read(state: state) == nil {
            if Programs.run(["ip", "link", "show", "\(tag)-br"], quiet: true) == 0 {
                throw ComposeFailure(
                    "a bridge named \(tag)-br exists and is not this stack's (state \(state)): compose down the stack that made it, or set MENAGERIE_NODE_TAG and MENAGERIE_NODE_SUBNET"
                )
            }
            if Programs.output(["ip", "-4", "-o", "addr", "show"]).output.contains(" inet \(subnet).") {
                throw ComposeFailure(
                    "\(subnet).0/24 is in use on this machine (ip addr): set MENAGERIE_NODE_SUBNET to a free private /24"
                )
            }
            try Files.write("tag=\(tag)\nsubnet=\(subnet)\nnodes=\(count)\n", to: "\(state)/network")
        }
        guard let network = Network.read(state: state), createNetwork(network, upTo: count) else {
            removeNetwork()
            throw ComposeFailure("could not make the nodes' network (ip said why above); nothing of it is left")
        }
        Self.say("nodes: \(count) on \(network.bridge) (\(subnet).0/24; host \(subnet).1, node N at \(subnet).(10+N))")
    }

    /// The bridge and the namespaces of nodes 1…`count` that are missing; false at the first step that fails.
    func createNetwork(_ network: Network, upTo count: Int) -> Bool {
        func ip(_ arguments: String...) -> Bool { Programs.run(["ip"] + arguments) == 0 }
        if Programs.run(["ip", "link", "show", network.bridge], quiet: true) != 0 {
            guard ip("link", "add", network.bridge, "type", "bridge"),
                ip("addr", "add", "\(network.subnet).1/24", "dev", network.bridge),
                ip("link", "set", network.bridge, "up")
            else { return false }
        }
        for node in 1...max(count, 1) where node <= count {
            let namespace = network.namespace(node), link = network.link(node)
            if Files.exists("/run/netns/\(namespace)") || network.removed.contains(node) { continue }
            guard ip("netns", "add", namespace),
                ip("link", "add", link, "type", "veth", "peer", "name", "eth0", "netns", namespace),
                ip("link", "set", link, "master", network.bridge), ip("link", "set", link, "up"),
                ip("-n", namespace, "addr", "add", "\(network.address(node))/24", "dev", "eth0"),
                ip("-n", namespace, "link", "set", "eth0", "up"),
                ip("-n", namespace, "link", "set", "lo", "up")
            else { return false }
        }
        return true
    }

    /// Kills whatever still runs in the nodes' namespaces, removes them, their links and the bridge. Idempotent.
    func removeNetwork() {
        guard let network = Network.read(state: state) else { return }
        for node in network.count > 0 ? Array(1...network.count) : [] {
            killNodeProcesses(node, network)
            Programs.run(["ip", "netns", "del", network.namespace(node)], quiet: true)
            Programs.run(["ip", "link", "del", network.link(node)], quiet: true)
        }
        Programs.run(["ip", "link", "del", network.bridge], quiet: true)
        Files.remove("\(state)/nodes")
        Files.remove("\(state)/network")
    }

    /// kill -9 of every process in node N's namespace, as a machine that loses its power.
    func killNodeProcesses(_ node: Int, _ network: Network) {
        let namespace = network.namespace(node)
        guard Files.exists("/run/netns/\(namespace)") else { return }
        func pids() -> [pid_t] {
            Programs.output(["ip", "netns", "pids", namespace]).output.split(whereSeparator: \.isWhitespace).compactMap
            { pid_t($0) }
        }
        for pid in pids() { kill(pid, SIGKILL) }
        for _ in 0..<50 where !pids().isEmpty { usleep(100_000) }
        for file in Files.list("\(state)/nodes/\(node)", suffix: ".pid") {
            Files.remove("\(state)/nodes/\(node)/\(file)")
        }
    }

    /// The services `up` started on the nodes, in compose's order: `node restart` and `node add` start these, not
    /// every service compose knows. A stack whose state predates the list ran every service.
    func stackServices(_ network: Network) -> [ServiceSettings] {
        guard let names = network.services else { return manifest.services }
        return manifest.services.filter { names.contains($0.name) }
    }

    /// Adds `selected` to the services recorded in STATE/network.
    func recordStackServices(_ selected: [ServiceSettings]) throws(ComposeFailure) {
        let network = Network.read(state: state)
        let recorded = network?.services ?? []
        let list = manifest.names.filter { recorded.contains($0) || selected.map(\.name).contains($0) }
        let lines = (Files.read("\(state)/network") ?? "").split(separator: "\n").filter { !$0.hasPrefix("services=") }
            .map(String.init)
        try Files.write(
            (lines + ["services=\(list.joined(separator: " "))"]).map { $0 + "\n" }.joined(), to: "\(state)/network")
    }

    /// Replaces (or adds) the `key=` line of STATE/network.
    func setNetworkField(_ key: String, _ value: String) throws(ComposeFailure) {
        var lines = (Files.read("\(state)/network") ?? "").split(separator: "\n").map(String.init)
        if let line = lines.firstIndex(where: { $0.hasPrefix("\(key)=") }) {
            lines[line] = "\(key)=\(value)"
        } else {
            lines.append("\(key)=\(value)")
        }
        try Files.write(lines.map { $0 + "\n" }.joined(), to: "\(state)/network")
    }

    /// Starts node N's replicas (those not running) of `services` and waits until each is SERVING; returns those
    /// that did not. A partitioned node's are started and not waited for.
    func convergeNode(_ node: Int, _ services: [ServiceSettings], _ network: Network) throws(ComposeFailure) -> [String]
    {
        let place = network.place(node, state: state)
        try Files.makeDirectory(place.directory)
        var failed: [String] = []
        if Files.exists("\(place.directory)/partitioned") {
            for service in services where placed(service, node) { try startMissing(service, at: place, network) }
            Self.say("node \(node) is partitioned: its replicas were started, not waited for (compose node heal)")
        } else {
            for service in services where placed(service, node) {
                failed += try converge(service, at: place) { (index: Int) throws(ComposeFailure) -> [String] in
                    try clusterArguments(service, index, node: node, network)
                }
            }
        }
        return failed
    }

    func startMissing(_ service: ServiceSettings, at place: Place, _ network: Network) throws(ComposeFailure) {
        for index in 0..<desired(service) {
            try startReplica(
                service, index, at: place, extra: try clusterArguments(service, index, node: place.node!, network))
        }
    }

    /// `up` on data whose clusters exist already (after `down`): a member that restarts from its Raft log waits for a
    /// quorum of the members it knows before its replica reports SERVING, so such a service's members are all
    /// started first, then each node's are waited for. A new cluster is started node by node (node 1 bootstraps it).
    func startExistingClusterMembers(_ services: [ServiceSettings], _ network: Network) throws(ComposeFailure) {
        for service in services where clustered(service, nodes: network.count) {
            let data = manifest.resolve(service.data)
            let existing = Files.list(data).filter { $0.hasPrefix("node-") }.contains {
                !Files.list("\(data)/\($0)").filter { $0.hasPrefix("dqlite.") }.isEmpty
            }
            guard existing else { continue }
            for node in network.numbers where placed(service, node) {
                let place = network.place(node, state: state)
                try Files.makeDirectory(place.directory)
                try startMissing(service, at: place, network)
            }
        }
    }

    /// The stack's network, or the error of a node command on a stack without nodes; with `node`, that node's number
    /// (checked).
    func requireNodes(_ node: String? = nil) throws(ComposeFailure) -> (Network, Int) {
        guard let network = Network.read(state: state) else {
            throw ComposeFailure("no nodes: start them with compose up --nodes N")
        }
        guard let node else { return (network, 0) }
        guard (1...2).contains(node.count), node.allSatisfy({ $0.isASCII && $0.isNumber }), let number = Int(node),
            (1...network.count).contains(number)
        else {
            throw ComposeFailure("no node '\(node)': the stack has nodes 1-\(network.count)")
        }
        guard !network.removed.contains(number) else {
            throw ComposeFailure("node \(number) was removed (compose node add makes a new one)")
        }
        return (network, number)
    }

    // MARK: The clusters' mutual TLS

    /// dqlite has no authentication of its own, and the nodes' bridge reaches every local user of this host: on every
    /// stack of nodes the clusters run over mutual TLS with a CA of their own (STATE/cluster/tls). Members'
    /// certificates name OU=member and every node's address; the operator's (CN=menagerie-operator, OU=operator) is
    /// what `gateway cluster` presents. `up --insecure-plaintext-cluster` makes none.
    var clusterTLSDirectory: String { "\(state)/cluster/tls" }

    func makeClusterCertificates(addresses: String) throws(ComposeFailure) {
        let directory = clusterTLSDirectory
        guard Programs.run(["sh", "-c", "command -v openssl"], quiet: true) == 0 else {
            throw ComposeFailure(
                "compose up --nodes needs the openssl program for the clusters' certificates (compose deps installs it; --insecure-plaintext-cluster runs them without)"
            )
        }
        try Files.makeDirectory(directory)
        chmod("\(state)/cluster", 0o700)
        chmod(directory, 0o700)
        var certificates = Certificates(directory: directory, addresses: addresses)
        guard certificates.makeAuthority(subject: "/O=Menagerie/CN=Menagerie clusters CA") else {
            throw ComposeFailure("openssl could not make the clusters' CA in \(directory)")
        }
        certificates.unit = "member"
        var made = manifest.services.filter(\.cluster).allSatisfy { certificates.issue($0.name) }
        certificates.unit = "operator"
        made = made && certificates.issue("menagerie-operator")
        guard made else { throw ComposeFailure("openssl could not make the clusters' certificates in \(directory)") }
        Self.say("clusters over mutual TLS: members' and the operator's certificates in \(directory)")
    }

    /// up on nodes: the clusters' certificates, kept while the stack runs; none only when asked, loudly.
    func chooseClusterTLS(plaintext: Bool, addresses: String) throws(ComposeFailure) {
        if Files.exists("\(clusterTLSDirectory)/ca.pem"), stackStarted {
            if plaintext {
                throw ComposeFailure(
                    "the stack's clusters run over mutual TLS: compose down first, then compose up --insecure-plaintext-cluster"
                )
            }
        } else if plaintext {
            if stackStarted, !Files.exists("\(state)/cluster/plaintext") {
                throw ComposeFailure("the stack runs: compose down first")
            }
            Files.remove("\(state)/cluster")
            try Files.makeDirectory("\(state)/cluster")
            try Files.write("", to: "\(state)/cluster/plaintext")
            Self.say(
                "WARNING: --insecure-plaintext-cluster: the clusters' databases take any client that reaches the nodes' bridge, every local user of this host included (read, replace, change members)"
            )
        } else if Files.exists("\(state)/cluster/plaintext"), stackStarted {
            Self.say("WARNING: the stack's clusters run in plaintext (--insecure-plaintext-cluster): keeping it")
        } else {
            Files.remove("\(state)/cluster")
            try makeClusterCertificates(addresses: addresses)
        }
    }

    /// What `gateway cluster` is given to act as the operator (nothing on a plaintext cluster).
    var operatorTLSArguments: [String] {
        let directory = clusterTLSDirectory
        guard Files.exists("\(directory)/ca.pem") else { return [] }
        return [
            "--tls-ca", "\(directory)/ca.pem", "--tls-cert", "\(directory)/menagerie-operator.pem", "--tls-key",
            "\(directory)/menagerie-operator.key",
        ]
    }

    /// The certificates of `names` in `directory` made again for `addresses` (`node add`). Each new pair is made apart
    /// and moved over the old one (a replica reloading on SIGHUP between the two moves finds a key that does not match
    /// and keeps what it has); when openssl fails, the old pair stays.
    func reissueCertificates(_ names: [String], in directory: String, addresses: String, unit: String = "") -> Bool {
        for name in names {
            let scratch = "\(directory)/new-state"
            Files.remove(scratch)
            guard (try? Files.makeDirectory(scratch)) != nil else { return false }
            defer { Files.remove(scratch) }
            for file in ["ca.pem", "ca.key", "ca.srl"] where Files.exists("\(directory)/\(file)") {
                guard
                    (try? FileManager.default.copyItem(atPath: "\(directory)/\(file)", toPath: "\(scratch)/\(file)"))
                        != nil
                else { return false }
            }
            guard Certificates(directory: scratch, addresses: addresses, unit: unit).issue(name) else { return false }
            if Files.exists("\(scratch)/ca.srl") {
                Files.remove("\(directory)/ca.srl")
                try? FileManager.default.copyItem(atPath: "\(scratch)/ca.srl", toPath: "\(directory)/ca.srl")
            }
            rename("\(scratch)/\(name).key", "\(directory)/\(name).key")
            rename("\(scratch)/\(name).pem", "\(directory)/\(name).pem")
        }
        return true
    }
}
