import Foundation
import GatewayKit
import TestSupport
import Testing

/// The whole stack, started by compose and driven through the gateway, as a user would.
@Suite(.serialized) struct ComposeTests {
    @Test func stackLifecycleScalingCrashRecoveryAndGarbage() async throws {
        try await Stack.with { stack in
            let up = try await stack.compose("up")
            try #require(up.status == 0, "compose up failed: \(up.output)")

            // Four services, each SERVING.
            var status = try await stack.gateway(["status", "--json"])
            #expect(status.status == 0, "\(status.output)")
            var instances = try statusInstances(status.output)
            #expect(Set(instances.compactMap { $0["service"] as? String }) == Set(Stack.services))
            #expect(instances.allSatisfy { $0["health"] as? String == "SERVING" }, "\(instances)")

            // Starting twice starts no duplicates.
            let pidsBefore = try stack.servicePids()
            #expect(try await stack.compose("up").status == 0)
            #expect(try stack.servicePids() == pidsBefore)
            #expect(stack.processesOfThisStack().count == 8)  // 4 supervisors + 4 services

            // Three replicas of ocr, each serving; the others untouched.
            let scale = try await stack.compose("scale", "ocr=3")
            try #require(scale.status == 0, "\(scale.output)")
            status = try await stack.gateway(["status", "--json"])
            instances = try statusInstances(status.output)
            let ocr = instances.filter { $0["service"] as? String == "ocr" }
            #expect(ocr.count == 3)
            #expect(ocr.allSatisfy { $0["health"] as? String == "SERVING" })
            #expect(try stack.servicePids()["zoo.0"] == pidsBefore["zoo.0"])

            // kill -9 one replica: calls through the gateway keep succeeding while compose restarts it.
            let victim = try #require(try stack.servicePids()["ocr.1"])
            kill(victim, SIGKILL)
            for _ in 0..<10 {
                let call = try await stack.gateway(["methods", "ocr", "--json"])
                #expect(call.status == 0, "\(call.output)")
            }
            var restarted: Int32?
            for _ in 0..<100 where restarted == nil {
                try await Task.sleep(for: .milliseconds(100))
                if let pid = try stack.servicePids()["ocr.1"], pid != victim,
                    try await stack.gateway(["status", "--json"]).status == 0
                {
                    restarted = pid
                }
            }
            #expect(restarted != nil, "compose did not restart the killed replica")

            // Random bytes to every port leave every service serving.
            var generator = SystemRandomNumberGenerator()
            for (service, base) in stack.basePorts {
                let replicas = service == "ocr" ? 3 : 1
                for index in 0..<replicas {
                    for _ in 0..<5 {
                        RawSocket.sendAndClose(
                            (0..<512).map { _ in UInt8.random(in: 0...255, using: &generator) }, to: base + index)
                    }
                    RawSocket.sendAndClose([0, 0xFF, 0xFF, 0xFF, 0xFF], to: base + index)
                }
            }
            status = try await stack.gateway(["status", "--json"])
            #expect(status.status == 0, "\(status.output)")
            #expect(try statusInstances(status.output).count == 6)

            // Scaling down removes replicas; down leaves no process behind.
            #expect(try await stack.compose("scale", "ocr=1").status == 0)
            #expect(
                try statusInstances(try await stack.gateway(["status", "--json"]).output).filter {
                    $0["service"] as? String == "ocr"
                }.count == 1)
            let down = try await stack.compose("down")
            #expect(down.status == 0, "\(down.output)")
            #expect(stack.processesOfThisStack().isEmpty)
            #expect(try await stack.gateway(["status"]).status != 0)
        }
    }

    /// compose/compose reads the services file through GatewayKit's ServiceList, its one parser: `compose config`
    /// prints what `ServiceList.render` does, and the same error for the same line, as compose says it.
    @Test func composeReadsTheServicesFileAsServiceListDoes() async throws {
        let shipped = try String(
            contentsOf: Stack.root.appendingPathComponent("compose/services.conf"), encoding: .utf8)
        let texts = [
            shipped, shipped.replacingOccurrences(of: "# arg = ", with: "arg = "),
            "[zoo]\nport = 07100\n\targ=--refresh=0 2 * * 6  \r\n  [ocr]\t\nport=7200\nreplicas = 0\ndata = /var/ocr\narg = -n\narg = a # b",
            "zoo 7100 1 .data/zoo\n", "[zoo]\nport = 7100\ntls = on", "[zoo]\nport = 71x", "[zoo]\nport = 65536",
            "[zoo]\nport = 0",
            "[zoo]\nport = 1\nreplicas = -1", "[zoo]\nport = 1\nreplicas = 100000", "[zoo]\nreplicas = 2\n",
            "[zoo]\nport = 1\nport = 2",
            "[zoo]\nport = 1\n[ocr]\nport = 2\n[zoo]", "port = 1", "[z o]", "[]", "[zoo]\nport = 1\narg =",
            "[zoo]\nport = 1\ndata =  ",
            "[zoo]\nport 7100", "= 1", "[zoo]\nport = 1\n= 1", "[zoo]\nport = 1\nport, replicas = 2",
            "[zoo]\nport = 1\n* = 2",
            // Placement on the nodes of `compose up --nodes N`.
            "[zoo]\nport = 1\nnodes = 3, 1\t,02\n[ocr]\nport = 2\nnodes=1", "[zoo]\nport = 1\nnodes = 1,,2",
            "[zoo]\nport = 1\nnodes = 1,2,",
            "[zoo]\nport = 1\nnodes = 01,1", "[zoo]\nport = 1\nnodes =", "[zoo]\nport = 1\nnodes = 100",
            "[zoo]\nport = 1\nnodes = 0",
            "[zoo]\nport = 1\nnodes = 1\nnodes = 2", "[zoo]\nport = 1\nnodes = ,", "[zoo]\nport = 1\nnodes = one",
            // What compose installs, whether a service clusters, its deploy files.
            "[ocr]\nport = 1\nmodels = ppocr sevenseg\ncluster = yes\nblobs = yes\nproto = a.b\ncontainer = c\nkubernetes = k",
            "[ocr]\nport = 1\nmodels = nothing", "[ocr]\nport = 1\ncluster = on", "[ocr]\nport = 1\nblobs = yes",
        ]
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "menagerie-config-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("services.conf")
        for text in texts {
            try text.write(to: file, atomically: true, encoding: .utf8)
            let composed = try await Stack.run(
                Stack.root.appendingPathComponent("compose/compose").path, ["config"],
                environment: [
                    "MENAGERIE_COMPOSE_CONFIG": file.path, "MENAGERIE_BIN_DIR": Stack.binDirectory,
                    "PATH": ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin",
                ])
            do {
                let services = try ServiceList.parse(text, file: file.path)
                #expect(
                    composed.status == 0 && composed.output == ServiceList.render(services),
                    "\(text)\n→ \(composed.output)")
            } catch {
                #expect(
                    composed.status == 1 && composed.output == "compose: \(error)\n", "\(text)\n→ \(composed.output)")
            }
        }
    }

    /// Each replica gets its service's `arg` lines, those `up` starts and those `scale` adds, and runs in the
    /// services file's folder; the shipped file's weekly zoo refresh, uncommented, is scheduled and loads the data.
    @Test func eachReplicaGetsItsServicesArgumentsAndTheShippedRefreshTurnsOn() async throws {
        let shipped = try String(
            contentsOf: Stack.root.appendingPathComponent("compose/services.conf"), encoding: .utf8)
        #expect(
            try ServiceList.parse(shipped).first { $0.name == "zoo" }?.arguments == [],
            "the shipped file turns the refresh on")
        let zoo = try #require(
            try ServiceList.parse(shipped.replacingOccurrences(of: "# arg = ", with: "arg = ")).first {
                $0.name == "zoo"
            })
        let prefix = "--refresh-source="
        let source = try #require(zoo.arguments.first { $0.hasPrefix(prefix) }?.dropFirst(prefix.count))
        #expect(zoo.arguments == ["--refresh=0 2 * * 6", "\(prefix)\(source)"])
        // The source is relative to the services file's folder; the stack's file lives elsewhere, so there the
        // same data is reached through a relative path of its own.
        let data = Stack.root.appendingPathComponent("compose").appendingPathComponent(String(source))
            .standardizedFileURL
        let arguments = ["--refresh=0 2 * * 6", "\(prefix)open-data"]
        try await Stack.with(services: ["zoo"], arguments: ["zoo": arguments]) { stack in
            try FileManager.default.createSymbolicLink(
                at: stack.directory.appendingPathComponent("open-data"), withDestinationURL: data)
            let up = try await stack.compose("up")
            try #require(up.status == 0, "compose up failed: \(up.output)")
            let status = try await stack.gateway(["zoo", "status"])
            #expect(status.status == 0, "\(status.output)")
            #expect(status.output.contains("refresh: \"0 2 * * 6\" from open-data; next "), "\(status.output)")
            #expect(
                status.output.contains("succeeded") && status.output.contains("from open-data:"), "\(status.output)")

            let scale = try await stack.compose("scale", "zoo=2")
            try #require(scale.status == 0, "\(scale.output)")
            let pids = try stack.servicePids()
            for replica in ["zoo.0", "zoo.1"] {
                let pid = try #require(pids[replica], "\(pids)")
                let commandLine = try #require(FileManager.default.contents(atPath: "/proc/\(pid)/cmdline"))
                let words = commandLine.split(separator: 0).map { String(decoding: $0, as: UTF8.self) }
                #expect(Array(words.suffix(2)) == arguments, "\(replica): \(words)")
            }
        }
    }

    @Test func twoUpsAtOnceStartEachReplicaOnceAndBothSucceed() async throws {
        // ocr before zoo: `status` lists services in the services file's order, not an order of its own.
        try await Stack.with(services: ["ocr", "zoo"]) { stack in
            async let first = stack.compose("up")
            async let second = stack.compose("up")
            let (one, two) = try await (first, second)
            #expect(one.status == 0, "\(one.output)")
            #expect(two.status == 0, "\(two.output)")
            #expect(stack.processesOfThisStack().count == 4)  // 2 supervisors + 2 services
            let status = try await stack.gateway(["status", "--json"])
            #expect(
                try statusInstances(status.output).compactMap { $0["service"] as? String } == ["ocr", "zoo"],
                "\(status.output)")
        }
    }

    @Test func gatewayReportsFailuresWithStatusCodeAndNonZeroExit() async throws {
        // Nothing listens on a fresh free port.
        let port = try RawSocket.freePortBlock(count: 1)
        let result = try await Stack.run(
            "\(Stack.binDirectory)/gateway",
            ["methods", "zoo", "--endpoint", "zoo=127.0.0.1:\(port)", "--timeout", "2"],
            environment: ProcessInfo.processInfo.environment)
        #expect(result.status == Int32(14))
        #expect(result.output.contains("UNAVAILABLE"))
        let missingState = try await Stack.run(
            "\(Stack.binDirectory)/gateway", ["methods", "zoo", "--state", "/nonexistent/menagerie-state"],
            environment: [:])
        #expect(missingState.status == Int32(14))
        #expect(missingState.output.contains("no endpoint known for zoo"), "\(missingState.output)")
        let bad = try await Stack.run(
            "\(Stack.binDirectory)/gateway", ["methods", "zoo", "--endpoint", "nonsense"], environment: [:])
        #expect(bad.status != 0)
        #expect(bad.output.contains("INVALID_ARGUMENT"))
    }

    /// A timeout that is a number but none a call can wait is a bad value (3), like any other (issue 9, #13).
    @Test func gatewayRejectsTimeoutsItCannotWaitAsBadValues() async throws {
        for value in ["nan", "inf", "1e300", "0", "-1"] {
            for command in [
                ["status", "--endpoint", "zoo=127.0.0.1:1"], ["methods", "zoo", "--endpoint", "zoo=127.0.0.1:1"],
                ["probe", "127.0.0.1:1"],
            ] {
                let result = try await Stack.run(
                    "\(Stack.binDirectory)/gateway", command + ["--timeout=\(value)"], environment: [:])
                #expect(
                    result.status == 3, "\(command) --timeout=\(value): \(result.status) \(result.output.prefix(300))")
                #expect(
                    result.output.contains("--timeout"), "\(command) --timeout=\(value): \(result.output.prefix(300))")
            }
        }
    }

    @Test func gatewayRejectsMalformedEndpointsAsInvalidArgument() async throws {
        for endpoint in ["zoo=garbage", "zoo=127.0.0.1:99999", "zoo=127.0.0.1", "zoo=127.0.0.1:1,nonsense"] {
            for command in [["status"], ["status", "--json"], ["methods", "zoo"]] {
                let result = try await Stack.run(
                    "\(Stack.binDirectory)/gateway", command + ["--endpoint", endpoint], environment: [:])
                #expect(result.status == 3, "\(command) --endpoint \(endpoint): \(result.output)")
                #expect(
                    result.output.uppercased().contains("INVALID_ARGUMENT"),
                    "\(command) --endpoint \(endpoint): \(result.output)")
            }
        }
        let fromEnvironment = try await Stack.run(
            "\(Stack.binDirectory)/gateway", ["status"], environment: ["MENAGERIE_ENDPOINTS": "zoo=garbage"])
        #expect(fromEnvironment.status == 3, "\(fromEnvironment.output)")
    }

    @Test func servicesRejectDurationsTheyCannotCountWithAUsageError() async throws {
        let data = FileManager.default.temporaryDirectory.appendingPathComponent("menagerie-flags-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: data) }
        for flag in ["--idle-timeout", "--frame-timeout"] {
            for value in ["1e300", "1e17"] {
                let result = try await Stack.run(
                    "\(Stack.binDirectory)/ocr", ["--port", "0", "--data-dir", data.path, flag, value], environment: [:]
                )
                #expect(result.status == 64, "\(flag) \(value): \(result.status) \(result.output.prefix(300))")
                #expect(result.output.contains(flag), "\(flag) \(value): \(result.output.prefix(300))")
            }
        }
    }

    @Test func upRefusesAServicesFileWhosePortsCollideOrRunOut() async throws {
        try await Stack.with(services: ["zoo", "ocr"]) { stack in
            let zoo = try #require(stack.basePorts["zoo"])
            // Two zoo replicas would take ocr's port; two ocr replicas would need port 65536.
            for config in [
                [
                    ServiceSettings(name: "zoo", port: zoo, replicas: 2, data: "data/zoo"),
                    ServiceSettings(name: "ocr", port: zoo + 1, data: "data/ocr"),
                ],
                [
                    ServiceSettings(name: "zoo", port: zoo, data: "data/zoo"),
                    ServiceSettings(name: "ocr", port: 65535, replicas: 2, data: "data/ocr"),
                ],
            ] {
                try stack.writeConfig(config)
                let up = try await stack.compose(
                    environment: ["MENAGERIE_START_TIMEOUT": Stack.scaledSeconds(5)], ["up"])
                #expect(up.status == 1 && up.output.contains("compose: "), "\(config): \(up.output)")
                #expect(stack.processesOfThisStack().isEmpty, "\(config): up started replicas anyway")
            }
        }
    }

    @Test func scaleRejectsCountsItCannotRunAndChangesNothing() async throws {
        try await Stack.with(services: ["zoo", "ocr"]) { stack in
            // ocr's replicas start two ports above zoo's: zoo has room for two replicas, not three.
            let zoo = try #require(stack.basePorts["zoo"])
            try stack.writeConfig([
                ServiceSettings(name: "zoo", port: zoo, data: "data/zoo"),
                ServiceSettings(name: "ocr", port: zoo + 2, data: "data/ocr"),
            ])
            let up = try await stack.compose("up")
            try #require(up.status == 0, "\(up.output)")
            let pids = try stack.servicePids()
            let fast = ["MENAGERIE_START_TIMEOUT": Stack.scaledSeconds(5)]
            for arguments in [
                ["ocr=-1"], ["nosuch=2"], ["ocr=abc"], ["=2"], ["ocr"], ["ocr="], ["zoo=3"], ["zoo=08"],
                ["zoo=2", "ocr=abc"],
            ] {
                let result = try await stack.compose(environment: fast, ["scale"] + arguments)
                #expect(result.status == 1, "scale \(arguments): \(result.output)")
                #expect(
                    !result.output.isEmpty && Self.onlyComposeLines(result.output),
                    "scale \(arguments): \(result.output)")
            }
            #expect(try stack.servicePids() == pids, "a rejected scale changed the replicas")
            let again = try await stack.compose("up")
            #expect(again.status == 0 && Self.onlyComposeLines(again.output), "\(again.output)")
            #expect(try stack.servicePids() == pids)

            // A count with a leading zero is a decimal count.
            let two = try await stack.compose("scale", "zoo=02")
            #expect(two.status == 0 && two.output.contains("zoo scaled to 2"), "\(two.output)")
            #expect(
                try statusInstances(try await stack.gateway(["status", "--json"]).output).filter {
                    $0["service"] as? String == "zoo"
                }.count == 2)

            // No replica on a port above 65535.
            #expect(try await stack.compose("down").status == 0)
            try stack.writeConfig([
                ServiceSettings(name: "zoo", port: zoo, data: "data/zoo"),
                ServiceSettings(name: "ocr", port: 65535, replicas: 0, data: "data/ocr"),
            ])
            let high = try await stack.compose(environment: fast, ["scale", "ocr=2"])
            #expect(high.status == 1 && high.output.contains("65536"), "\(high.output)")
            #expect(try stack.servicePids().isEmpty)
        }
    }

    @Test func upFailsWhenAnotherProgramAnswersOnAReplicasPortAndStillRecordsWhatStarted() async throws {
        try await Stack.with(services: ["zoo", "ocr"]) { stack in
            // Another Menagerie process (someone's own stack, say) holds ocr.0's port and answers SERVING there.
            let port = try #require(stack.basePorts["ocr"])
            let other = try Stack.spawn(
                "\(Stack.binDirectory)/ocr",
                ["--port", "\(port)", "--data-dir", stack.directory.appendingPathComponent("other").path])
            defer {
                if other.isRunning {
                    other.terminate()
                    other.waitUntilExit()
                }
            }
            try await Stack.waitServing(port: port)

            let up = try await stack.compose(environment: ["MENAGERIE_START_TIMEOUT": Stack.scaledSeconds(5)], ["up"])
            #expect(up.status == 1, "compose up took another process's SERVING for ocr.0's: \(up.output)")
            #expect(up.output.contains("ocr.0"), "\(up.output)")
            // zoo did start, and the gateway finds it.
            let status = try await stack.gateway(["status", "--json"])
            #expect(
                try statusInstances(status.output).contains {
                    $0["service"] as? String == "zoo" && $0["health"] as? String == "SERVING"
                },
                "\(status.output)")

            // Once the port is free, compose's own replica takes it over.
            other.terminate()
            other.waitUntilExit()
            let again = try await stack.compose("up")
            #expect(again.status == 0, "\(again.output)")
            let instances = try statusInstances(try await stack.gateway(["status", "--json"]).output)
            let ocr = try #require(instances.first { $0["service"] as? String == "ocr" })
            #expect(
                (ocr["pid"] as? String).flatMap { Int32($0) } == (try stack.servicePids()["ocr.0"]),
                "pid spelled as an int64: \(instances)")
        }
    }

    @Test func upGivesUpOnAPortThatNeverAnswersWithinItsStartTimeout() async throws {
        try await Stack.with(services: ["ocr"]) { stack in
            // A listener that accepts connections (the kernel does) and never answers: every probe waits its timeout.
            let listener = try SilentListener(port: try #require(stack.basePorts["ocr"]))
            defer { listener.close() }
            let started = ContinuousClock.now
            let up = try await stack.compose(environment: ["MENAGERIE_START_TIMEOUT": Stack.scaledSeconds(4)], ["up"])
            let took = ContinuousClock.now - started
            #expect(up.status == 1, "\(up.output)")
            let timeout = Stack.scaledSeconds(4)
            #expect(up.output.contains("did not report SERVING within \(timeout)s"), "\(up.output)")
            #expect(
                took < .seconds(Int(timeout)! + 11), "compose up waited \(took) with a start timeout of \(timeout) s")
        }
    }

    @Test func staleStateNamingAnotherProgramIsNeitherSignalledNorTakenForAReplica() async throws {
        try await Stack.with(services: ["zoo"]) { stack in
            // A program that is not ours and leads its own process group: what a supervisor's pid in a state
            // left from before a reboot may name now.
            let pidFile = stack.directory.appendingPathComponent("stranger.pid")
            // Not waited for: Foundation learns of a process's exit when every inheritor of a socket it hands
            // the child has closed it, and sleep keeps it.
            _ = try Stack.spawn(
                "/usr/bin/setsid", ["-f", "/bin/sh", "-c", "echo $$ >'\(pidFile.path)'; exec sleep 300"])
            var stranger: Int32?
            for _ in 0..<100 where stranger == nil {
                stranger = (try? String(contentsOf: pidFile, encoding: .utf8)).flatMap {
                    Int32($0.trimmingCharacters(in: .whitespacesAndNewlines))
                }
                if stranger == nil { try await Task.sleep(for: .milliseconds(50)) }
            }
            let pid = try #require(stranger)
            defer { kill(pid, SIGKILL) }
            let supervisorFile = stack.state.appendingPathComponent("zoo.0.supervisor")
            try FileManager.default.createDirectory(at: stack.state, withIntermediateDirectories: true)

            try "\(pid)\n".write(to: supervisorFile, atomically: true, encoding: .utf8)
            let down = try await stack.compose("down")
            #expect(down.status == 0, "\(down.output)")
            #expect(Stack.isRunning(pid), "compose down signalled a process it did not start")

            try "\(pid)\n".write(to: supervisorFile, atomically: true, encoding: .utf8)
            let up = try await stack.compose(environment: ["MENAGERIE_START_TIMEOUT": Stack.scaledSeconds(20)], ["up"])
            #expect(up.status == 0, "compose up took a stranger for zoo.0's supervisor: \(up.output)")
            #expect(try stack.servicePids()["zoo.0"] != nil)
            #expect(try await stack.compose("down").status == 0)
            #expect(Stack.isRunning(pid), "compose down signalled a process it did not start")
            #expect(stack.processesOfThisStack().isEmpty)
        }
    }

    /// Whether every line is compose's own message (no shell error leaked through).
    private static func onlyComposeLines(_ output: String) -> Bool {
        output.split(separator: "\n").allSatisfy { $0.hasPrefix("compose: ") }
    }
}

/// A TCP socket listening on 127.0.0.1 that never accepts: connections complete (in the kernel's
/// backlog) and nothing ever answers them.
private final class SilentListener {
    private let descriptor: Int32

    init(port: Int) throws {
        descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0, listen(descriptor, 128) == 0 else {
            Glibc.close(descriptor)
            throw POSIXError(.EADDRINUSE)
        }
    }

    func close() { Glibc.close(descriptor) }
}
