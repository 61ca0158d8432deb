import ComposeKit
import Foundation
import GatewayKit

#if canImport(Glibc)
    import Glibc
#endif

/// compose's commands on one machine's replicas (and ps and logs of a stack on nodes).
extension Compose {
    /// `up [--nodes N] [--tls] [--insecure-plaintext-cluster] [SERVICE…]`: starts the replicas the stack lacks (on
    /// this machine, or on N nodes; on this machine it restarts those whose binary was rebuilt since they started) and
    /// waits until each is SERVING. `checkOnly` refuses what up would refuse and
    /// changes nothing (compose/compose asks before it builds, so a typo costs no release build).
    func up(_ arguments: [String], checkOnly: Bool = false) throws(ComposeFailure) {
        let parsed = try UpArguments.parse(arguments)
        let tls = parsed.tls, plaintextCluster = parsed.plaintextCluster, names = parsed.names
        var nodes: Int?
        let network = Network.read(state: state)
        if let count = parsed.nodes {
            if let network {
                guard network.count == count else {
                    throw ComposeFailure(
                        "the stack runs \(network.count) node(s): compose down first, then compose up --nodes \(count)")
                }
            } else if stackStarted {
                throw ComposeFailure(
                    "the stack runs on one machine: compose down first, then compose up --nodes \(count)")
            }
            nodes = count
        } else if let network {
            nodes = network.count  // `up` beside a stack on nodes completes that stack
        }
        var addresses = ""
        if let nodes {
            try checkNodeSettings()
            for service in manifest.services {
                for node in service.nodes where node > nodes {
                    throw ComposeFailure(
                        "[\(service.name)] is placed on node \(node) (nodes = \(service.nodes.map(String.init).joined(separator: ","))), and the stack has \(nodes) node(s)"
                    )
                }
            }
            _ = try clusterLatency()
        }
        if checkOnly {
            var selected: [ServiceSettings] = []
            for name in names { selected.append(try manifest.service(name)) }
            for service in selected.isEmpty ? manifest.services : selected {
                try checkPorts(service, desired(service), clustered: clustered(service, nodes: nodes))
            }
            return
        }
        if let nodes {
            nodeDependencies()
            let subnet = nodeSubnet
            addresses = (1...nodes).map { ",IP:\(subnet).\(10 + $0)" }.joined()
        }
        if tls {
            if stackStarted, !Files.exists("\(state)/tls/ca.pem") {
                throw ComposeFailure("the stack runs in plaintext: compose down first, then compose up --tls")
            }
            try Certificates(directory: "\(state)/tls", addresses: addresses).makeStackCertificates(
                for: manifest.names + ["gateway"])
        } else if Files.exists("\(state)/tls/ca.pem"), stackStarted {
            Self.say("the stack runs with TLS (certificates in \(state)/tls): keeping it")
        } else {
            Files.remove("\(state)/tls")
        }
        if nodes != nil { try chooseClusterTLS(plaintext: plaintextCluster, addresses: addresses) }
        var selected: [ServiceSettings] = []
        for name in names { selected.append(try manifest.service(name)) }
        if selected.isEmpty { selected = manifest.services }
        for service in selected {
            try checkPorts(service, desired(service), clustered: clustered(service, nodes: nodes))
        }
        installModels(for: selected)
        try Files.makeDirectory("\(state)/replicas")
        // A service that fails to start does not keep the others from starting.
        var failed: [String] = []
        if let nodes {
            try makeNetwork(nodes)
            try recordStackServices(selected)
            guard let network = Network.read(state: state) else {
                throw ComposeFailure("no nodes' network in \(state)")
            }
            try startExistingClusterMembers(selected, network)
            for node in network.numbers { failed += try convergeNode(node, selected, network) }
            try finishConverging(failed, nodes: network)
        } else {
            for service in selected {
                let replaced = recordedIndexes(service.name, in: state).filter {
                    runsReplacedBinary(service.name, $0, .machine(self))
                }
                if !replaced.isEmpty {
                    Self.say(
                        "restarting \(replaced.map { "\(service.name).\($0)" }.joined(separator: " ")): its binary was rebuilt since it started"
                    )
                    stopReplicas(replaced.map { supervisorFile(service.name, $0, .machine(self)) })
                }
                failed += try converge(service, at: .machine(self))
            }
            try finishConverging(failed, nodes: nil)
        }
        let count = (Files.read("\(state)/endpoints") ?? "").split(separator: "\n").count
        Self.say(
            "up: \(count) instance(s) \(nodes.map { "on \($0) node(s) " } ?? "")serving; try: \(bin)/gateway status")
    }

    /// `down`: every replica stopped (SIGTERM, then SIGKILL after the grace period), what scale chose and the
    /// certificates forgotten; with nodes, their namespaces and bridge removed too.
    func down() throws(ComposeFailure) {
        let running =
            Files.list(state, suffix: ".supervisor").map { "\(state)/\($0)" }
            + Files.list("\(state)/nodes").flatMap { node in
                Files.list("\(state)/nodes/\(node)", suffix: ".supervisor").map { "\(state)/nodes/\(node)/\($0)" }
            }
        let forget = ["\(state)/endpoints", "\(state)/replicas", "\(state)/tls", "\(state)/cluster"]
        // Nothing running still resets what scale chose, as a down after running replicas does, and removes the
        // nodes' network whatever an earlier up left of it.
        guard !running.isEmpty else {
            if onNodes {
                removeNetwork()
                Self.say("down: the nodes' namespaces and bridge removed")
            }
            Self.say("nothing running")
            forget.forEach(Files.remove)
            return
        }
        stopReplicas(running)
        Files.list(state, suffix: ".pid").forEach { Files.remove("\(state)/\($0)") }
        forget.forEach(Files.remove)
        if onNodes {
            removeNetwork()
            Self.say("down: the nodes' namespaces and bridge removed")
        }
        Self.say("down: every replica stopped")
    }

    /// `ps`: every replica with its address, pid and state, one machine's first, then each node's.
    func ps() {
        func row(_ columns: [String]) -> String {
            let widths = [16, 8, 21, 8]
            return zip(columns, widths).map { $0.padding(toLength: max($1, $0.count), withPad: " ", startingAt: 0) }
                .joined(separator: " ")
                + " " + columns[4] + "\n"
        }
        var text = row(["SERVICE", "REPLICA", "ADDRESS", "PID", "STATE"])
        let network = Network.read(state: state)
        let subnet = network?.subnet ?? ProcessInfo.processInfo.environment["MENAGERIE_NODE_SUBNET"] ?? "10.231.0"
        var places: [(String, String)] = [(state, "127.0.0.1")]
        for name in Files.list("\(state)/nodes") {
            guard let node = Int(name), name.allSatisfy(\.isNumber) else { continue }
            places.append(("\(state)/nodes/\(name)", "\(subnet).\(10 + node)"))
        }
        for (directory, address) in places {
            for service in manifest.services {
                for index in recordedIndexes(service.name, in: directory) {
                    let pid =
                        Files.read("\(directory)/\(service.name).\(index).pid")?.trimmingCharacters(
                            in: .whitespacesAndNewlines) ?? "-"
                    var condition = "stopped"
                    if Self.alive("\(directory)/\(service.name).\(index).supervisor", in: directory) {
                        condition = pid_t(pid).map { kill($0, 0) == 0 } == true ? "running" : "restarting"
                    }
                    text += row([
                        service.name, String(index), "\(address):\(port(service, index))", pid.isEmpty ? "-" : pid,
                        condition,
                    ])
                }
            }
        }
        FileHandle.standardOutput.write(Data(text.utf8))
    }

    /// `scale SERVICE=N…`: every assignment checked before anything changes, then each service converged.
    func scale(_ arguments: [String]) throws(ComposeFailure) {
        guard !arguments.isEmpty else { throw ComposeFailure("usage: compose scale SERVICE=N") }
        if let network = Network.read(state: state) {
            throw ComposeFailure(
                "compose scale does not change a stack on nodes yet: set replicas in the services file, compose down, then compose up --nodes \(network.count)"
            )
        }
        var scaled: [(ServiceSettings, Int)] = []
        for assignment in arguments {
            let (service, count) = try ScaleArgument.parse(assignment, in: manifest)
            try checkPorts(service, count, clustered: false)
            scaled.append((service, count))
        }
        installModels(for: scaled.map(\.0))
        try Files.makeDirectory("\(state)/replicas")
        var failed: [String] = []
        for (service, count) in scaled {
            try Files.write("\(count)\n", to: "\(state)/replicas/\(service.name)")
            failed += try converge(service, at: .machine(self))
            Self.say("\(service.name) scaled to \(count)")
        }
        try finishConverging(failed, nodes: nil)
    }

    /// `restart SERVICE`: its replicas stopped and started again.
    func restart(_ arguments: [String]) throws(ComposeFailure) {
        guard arguments.count == 1 else { throw ComposeFailure("usage: compose restart SERVICE") }
        guard !onNodes else {
            throw ComposeFailure("the stack runs on nodes: restart a node with compose node restart N")
        }
        let service = try manifest.service(arguments[0])
        let files = recordedIndexes(service.name, in: state).map { supervisorFile(service.name, $0, .machine(self)) }
        if !files.isEmpty { stopReplicas(files) }
        installModels(for: [service])
        try finishConverging(try converge(service, at: .machine(self)), nodes: nil)
    }
}
