import ComposeKit
import Foundation
import GatewayKit

#if canImport(Glibc)
    import Glibc
#endif

/// Where replicas run: this machine (their files in STATE, on loopback) or node N of `compose up --nodes`
/// (STATE/nodes/N, the node's address, in its network namespace).
struct Place {
    let node: Int?
    /// Where the replicas' supervisor and pid files and logs are.
    let directory: String
    let address: String
    /// What runs a program there (`ip netns exec NAMESPACE`), nothing on this machine.
    let launcher: [String]

    static func machine(_ compose: Compose) -> Place {
        Place(node: nil, directory: compose.state, address: "127.0.0.1", launcher: [])
    }

    /// " on node N", or nothing on this machine: what compose's messages add.
    var onNode: String { node.map { " on node \($0)" } ?? "" }
}

/// The supervisor of a replica (compose/supervise, in a session of its own) and what compose knows of it: its
/// supervisor's pid in `DIR/SERVICE.INDEX.supervisor`, its service's in `DIR/SERVICE.INDEX.pid`.
extension Compose {
    func supervisorFile(_ service: String, _ index: Int, _ place: Place) -> String {
        "\(place.directory)/\(service).\(index).supervisor"
    }

    /// The indexes of `service`'s replicas that have a supervisor file in `directory`.
    func recordedIndexes(_ service: String, in directory: String) -> [Int] {
        Files.list(directory, suffix: ".supervisor").compactMap { name in
            guard name.hasPrefix("\(service).") else { return nil }
            return Int(name.dropFirst(service.count + 1).dropLast(".supervisor".count))
        }.sorted()
    }

    /// Whether the replica whose supervisor's pid is in `file` still runs: that process group (the supervisor's
    /// session) has members, and the pid is not another program's now (reused after a reboot, say). A supervisor
    /// killed outright leaves the group to its service, which counts: down must stop it.
    static func alive(_ file: String, in directory: String) -> Bool {
        guard let pid = supervisorPid(file), kill(-pid, 0) == 0 else { return false }
        guard let data = FileManager.default.contents(atPath: "/proc/\(pid)/cmdline") else { return true }
        let commandLine = String(decoding: data.map { $0 == 0 ? UInt8(ascii: " ") : $0 }, as: UTF8.self)
        guard !commandLine.isEmpty else { return true }
        guard let supervise = commandLine.range(of: "/supervise ") else { return false }
        return commandLine[supervise.upperBound...].contains(" \(directory) ")
    }

    static func supervisorPid(_ file: String) -> pid_t? {
        guard let text = Files.read(file)?.trimmingCharacters(in: .whitespacesAndNewlines), !text.isEmpty,
            text.allSatisfy(\.isASCII), text.allSatisfy(\.isNumber), let pid = pid_t(text), pid > 1
        else { return nil }
        return pid
    }

    /// Whether replica `index` of `service` runs a binary that has since been replaced (a rebuild links a new file, and
    /// the running one's `/proc/PID/exe` then reads "… (deleted)"): `up` after a pull and a build restarts it, rather
    /// than leave the old code serving while it reports the stack up.
    func runsReplacedBinary(_ service: String, _ index: Int, _ place: Place) -> Bool {
        guard
            let text = Files.read("\(place.directory)/\(service).\(index).pid")?.trimmingCharacters(
                in: .whitespacesAndNewlines), let pid = Int32(text), pid > 1,
            let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/exe")
        else { return false }
        return target.hasSuffix("/\(service) (deleted)")
    }

    /// Starts replica `index` of `service` at `place` unless it runs; `extra` are arguments beyond its `arg`s (TLS,
    /// the node's address, its cluster).
    func startReplica(_ service: ServiceSettings, _ index: Int, at place: Place, extra: [String] = [])
        throws(ComposeFailure)
    {
        let file = supervisorFile(service.name, index, place)
        if Self.alive(file, in: place.directory) { return }
        var arguments = service.arguments
        if Files.exists("\(state)/tls/ca.pem") {
            arguments += [
                "--tls-cert", "\(state)/tls/\(service.name).pem", "--tls-key", "\(state)/tls/\(service.name).key",
                "--tls-ca", "\(state)/tls/ca.pem",
            ]
        }
        var data = manifest.resolve(service.data)
        if let node = place.node {
            // On its node's address; plaintext there only without --tls, on a bridge that exists on this machine only.
            arguments += ["--host", place.address]
            if !Files.exists("\(state)/tls/ca.pem") { arguments.append("--insecure") }
            data += "/node-\(node)"
        }
        arguments += extra
        try Files.makeDirectory("\(place.directory)/logs")
        try Files.makeDirectory(data)
        try ensureIdentity()
        // Each replica gets the service's `arg`s and runs in the services file's folder, where relative paths in them start.
        let pid = try Programs.spawnSession(
            place.launcher + [
                "\(home)/supervise", service.name, String(index), String(port(service, index)),
                "\(bin)/\(service.name)", data, place.directory,
                manifest.folder.path,
            ] + arguments,
            adding: [
                "MENAGERIE_IDENTITY": "\(state)/identity.sqlite", "MENAGERIE_ADMIN_TOKEN_FILE": "\(state)/admin-token",
            ])
        try Files.write("\(pid)\n", to: file)
        Self.say("started \(service.name).\(index)\(place.onNode) on port \(port(service, index))")
    }

    /// Stops the replicas whose supervisor files these are: SIGTERM to each one's group, SIGKILL after the grace period.
    func stopReplicas(_ files: [String]) {
        var groups: [pid_t] = []
        for file in files where Self.alive(file, in: (file as NSString).deletingLastPathComponent) {
            guard let pid = Self.supervisorPid(file) else { continue }
            groups.append(pid)
            kill(-pid, SIGTERM)
        }
        var waited = 0
        while !groups.isEmpty {
            groups = groups.filter { kill(-$0, 0) == 0 }
            if groups.isEmpty { break }
            if waited >= grace * 10 {
                Self.say("killing \(groups.map(String.init).joined(separator: " ")) after \(grace)s")
                for group in groups { kill(-group, SIGKILL) }
                usleep(200_000)
                break
            }
            usleep(100_000)
            waited += 1
        }
        files.forEach(Files.remove)
    }

    /// What a failed replica's log says of it, its crash report first: a crash's full backtrace ends in registers
    /// and images, so its tail alone says nothing of where it crashed.
    static func logExcerpt(_ file: String) -> String {
        guard let text = Files.read(file) else { return "" }
        var lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        if lines.last == "" { lines.removeLast() }
        var excerpt: [String] = []
        let crash = [
            "Program crashed", "Fatal error", "Assert failed", "Assertion failed", "AddressSanitizer",
            "terminate called",
        ]
        if let line = lines.firstIndex(where: { line in crash.contains { line.contains($0) } }) {
            excerpt += lines[max(0, line - 3)...min(lines.count - 1, line + 40)]
            excerpt.append("[…]")
        }
        excerpt += lines.suffix(20)
        return excerpt.map { $0 + "\n" }.joined()
    }

    /// Waits until the replica answers SERVING from its own process (another program may hold its port); false after
    /// the start timeout, saying so. By the clock: a probe of a port that accepts and never answers takes its timeout.
    func waitServing(_ service: ServiceSettings, _ index: Int, at place: Place) -> Bool {
        let address = "\(place.address):\(port(service, index))", name = "\(service.name).\(index)"
        let deadline = Date().addingTimeInterval(Double(startTimeout))
        while true {
            if let pid = Files.read("\(place.directory)/\(name).pid")?.trimmingCharacters(in: .whitespacesAndNewlines),
                !pid.isEmpty,
                Programs.run(
                    ["\(bin)/gateway", "probe", address, "--pid", pid, "--quiet", "--timeout", "1", "--state", state],
                    quiet: true) == 0
            {
                return true
            }
            if Date() >= deadline {
                let log = "\(place.directory)/logs/\(name).log"
                Self.warn(Self.logExcerpt(log))
                Self.warn(
                    "compose: \(name)\(place.onNode) at \(address) did not report SERVING within \(startTimeout)s (log: \(log))\n"
                )
                return false
            }
            usleep(200_000)
        }
    }

    /// Starts or stops replicas of `service` at `place` until the desired count runs and waits for each to serve;
    /// returns the replicas that did not (`service.index`, `@nodeN` on a node).
    func converge(
        _ service: ServiceSettings, at place: Place, extra: (Int) throws(ComposeFailure) -> [String] = { _ in [] }
    ) throws(ComposeFailure)
        -> [String]
    {
        let count = desired(service)
        for index in 0..<count { try startReplica(service, index, at: place, extra: try extra(index)) }
        let surplus = recordedIndexes(service.name, in: place.directory).filter { $0 >= count }.map {
            supervisorFile(service.name, $0, place)
        }
        if !surplus.isEmpty {
            Self.say("stopping \(surplus.count) replica(s) of \(service.name)")
            stopReplicas(surplus)
        }
        return (0..<count).filter { !waitServing(service, $0, at: place) }.map {
            "\(service.name).\($0)\(place.node.map { "@node\($0)" } ?? "")"
        }
    }

    /// STATE/endpoints, where the gateway finds the replicas: each line `SERVICE HOST:PORT [node=N]`, by service.
    /// With nodes, every replica started on a node is listed, running or not: a node that is down or cut off is the
    /// clients' to get around (the gateway's round-robin skips an endpoint it cannot reach), as on machines.
    func writeEndpoints(nodes: Network?) throws(ComposeFailure) {
        var lines: [(service: String, line: String)] = []
        if let nodes {
            for node in nodes.numbers {
                for service in manifest.services {
                    for index in recordedIndexes(service.name, in: "\(state)/nodes/\(node)") {
                        lines.append(
                            (
                                service.name,
                                "\(service.name) \(nodes.address(node)):\(port(service, index)) node=\(node)"
                            ))
                    }
                }
            }
        }
        for service in manifest.services {
            for index in recordedIndexes(service.name, in: state)
            where Self.alive(supervisorFile(service.name, index, .machine(self)), in: state) {
                lines.append((service.name, "\(service.name) 127.0.0.1:\(port(service, index))"))
            }
        }
        try Files.write(EndpointsFile.text(lines), to: "\(state)/endpoints")
    }

    /// After converging: what did start stays visible to the gateway, and every replica that failed is named.
    func finishConverging(_ failed: [String], nodes: Network?, logs: String? = nil) throws(ComposeFailure) {
        try writeEndpoints(nodes: nodes)
        guard failed.isEmpty else {
            let where_ = logs ?? "\(state)/logs" + (nodes != nil ? ", \(state)/nodes/N/logs" : "")
            throw ComposeFailure(
                "\(failed.count) replica(s) did not report SERVING: \(failed.joined(separator: " ")) (logs: \(where_))")
        }
    }

    /// Refuses `count` replicas of `service` when one would listen past 65535 or on another service's ports (or,
    /// clustered, its cluster member would).
    func checkPorts(_ service: ServiceSettings, _ count: Int, clustered: Bool) throws(ComposeFailure) {
        try PortPlan.check(service, count, clustered: clustered, others: manifest.services.map { ($0, desired($0)) })
    }

    /// Installs the models `services` name (compose/compose MODEL, in bash: pip and the trainers) and gives their
    /// folders to the replicas started from here on (MENAGERIE_MODEL). One that cannot be installed leaves its service
    /// without it, as the installer says; the stack starts all the same.
    func installModels(for services: [ServiceSettings]) {
        var models: [String] = []
        for model in services.flatMap(\.models) where !models.contains(model) { models.append(model) }
        guard !models.isEmpty else { return }
        _ = Programs.run(["\(home)/compose", "install-models"] + models)
        for model in models {
            let variable = Manifest.variable(ofModel: model)
            if (ProcessInfo.processInfo.environment[variable] ?? "").isEmpty {
                setenv(variable, "\(cache)/\(model)", 1)
            }
        }
    }
}
