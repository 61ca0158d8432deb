import Dqlite
import Foundation
import GatewayKit
import TestSupport
import Testing

/// Runs the real executables through compose/compose, in a scratch state directory and on free
/// ports, so the tests can run beside a developer's own stack.
final class Stack: @unchecked Sendable {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    /// `seconds` stretched by the suite's time scale (`TestTime`), as compose's timeout variables take them.
    static func scaledSeconds(_ seconds: Int) -> String { String(Int((Double(seconds) * TestTime.scale).rounded(.up))) }

    static let binDirectory =
        ProcessInfo.processInfo.environment["MENAGERIE_BIN_DIR"] ?? root.appendingPathComponent(".build/debug").path

    /// The services compose starts, as the one list of them, compose/services.conf, describes them.
    static let shipped: [ServiceSettings] = {
        let file = root.appendingPathComponent("compose/services.conf")
        return (try? ServiceList.parse((try? String(contentsOf: file, encoding: .utf8)) ?? "")) ?? []
    }()
    static let services: [String] = shipped.map(\.name)

    let directory: URL
    let basePorts: [String: Int]
    var state: URL { directory.appendingPathComponent("state") }

    /// A stack whose services each get a block of `replicaRoom` free ports; `arguments` are their `arg` lines.
    init(services: [String] = Stack.services, arguments: [String: [String]] = [:], replicaRoom: Int = 4) throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "menagerie-stack-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        var ports: [String: Int] = [:]
        for service in services {
            ports[service] = try RawSocket.freePortBlock(count: replicaRoom, avoiding: Array(ports.values))
        }
        basePorts = ports
        try writeConfig(
            services.map {
                ServiceSettings(name: $0, port: ports[$0]!, data: "data/\($0)", arguments: arguments[$0] ?? [])
            })
    }

    /// Replaces the stack's services file. A service of the shipped file keeps what the shipped file says of it
    /// beyond its place and arguments (its models, whether it clusters…), as the stack runs the same services.
    func writeConfig(_ services: [ServiceSettings]) throws {
        let services = services.map { service in
            guard let shipped = Self.shipped.first(where: { $0.name == service.name }) else { return service }
            var merged = service
            merged.proto = merged.proto ?? shipped.proto
            if merged.models.isEmpty { merged.models = shipped.models }
            merged.cluster = merged.cluster || shipped.cluster
            merged.blobs = merged.blobs || shipped.blobs
            return merged
        }
        try ServiceList.render(services).write(
            to: directory.appendingPathComponent("services.conf"), atomically: true, encoding: .utf8)
    }

    var environment: [String: String] {
        var environment = ProcessInfo.processInfo.environment
        environment["MENAGERIE_COMPOSE_CONFIG"] = directory.appendingPathComponent("services.conf").path
        environment["MENAGERIE_STATE_DIR"] = state.path
        environment["MENAGERIE_BIN_DIR"] = Self.binDirectory
        environment["MENAGERIE_GRACE"] = "5"
        environment["MENAGERIE_START_TIMEOUT"] = Self.scaledSeconds(60)
        environment.removeValue(forKey: "MENAGERIE_ENDPOINTS")
        return environment
    }

    /// Runs `compose/compose ARGS`; returns exit status and combined output.
    @discardableResult
    func compose(_ arguments: String...) async throws -> (status: Int32, output: String) {
        try await Self.run(
            Self.root.appendingPathComponent("compose/compose").path, arguments, environment: environment)
    }

    /// Runs `compose/compose ARGS` with some environment variables changed (e.g. a shorter start timeout).
    @discardableResult
    func compose(environment changes: [String: String], _ arguments: [String]) async throws -> (
        status: Int32, output: String
    ) {
        try await Self.run(
            Self.root.appendingPathComponent("compose/compose").path, arguments,
            environment: environment.merging(changes) { $1 })
    }

    /// Runs the gateway against this stack's state.
    func gateway(_ arguments: [String]) async throws -> (status: Int32, output: String) {
        try await Self.run(
            "\(Self.binDirectory)/gateway", arguments + ["--state", state.path], environment: environment)
    }

    /// The operator's credentials for the stack's dqlite clusters (`compose up --nodes` makes them in its state,
    /// `cluster/tls`), as `gateway cluster` presents them.
    func operatorClusterTLS() throws -> ClusterTLS {
        let directory = state.appendingPathComponent("cluster/tls")
        return try ClusterTLS(
            certificateFile: directory.appendingPathComponent("menagerie-operator.pem").path,
            keyFile: directory.appendingPathComponent("menagerie-operator.key").path,
            caFile: directory.appendingPathComponent("ca.pem").path)
    }

    /// Pids of every replica's service process, from compose's state.
    func servicePids() throws -> [String: Int32] {
        let files = try FileManager.default.contentsOfDirectory(atPath: state.path).filter { $0.hasSuffix(".pid") }
        var pids: [String: Int32] = [:]
        for file in files {
            let text = try String(contentsOf: state.appendingPathComponent(file), encoding: .utf8)
            if let pid = Int32(text.trimmingCharacters(in: .whitespacesAndNewlines)) {
                pids[String(file.dropLast(4))] = pid
            }
        }
        return pids
    }

    /// Every process whose command line runs a binary from this stack's data directories.
    func processesOfThisStack() -> [Int32] {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.compactMap(Int32.init).filter { pid in
            guard let data = FileManager.default.contents(atPath: "/proc/\(pid)/cmdline") else { return false }
            return String(decoding: data, as: UTF8.self).contains(directory.path)
        }
    }

    /// The admin token of the tests' stacks and replicas: every program the tests start gets it as
    /// `MENAGERIE_ADMIN_TOKEN` unless its environment names one (an empty one: none), so a replica started
    /// alone takes it as its admin's, `compose up` makes it the stack's, and the gateway sends it — the tests
    /// act as the operator, as a developer beside a stack does. `AuthorizationStackTests` leaves it out.
    static let adminToken = "mnt_" + (0..<32).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()

    static func withAdminToken(_ environment: [String: String]) -> [String: String] {
        var environment = environment
        if environment["MENAGERIE_ADMIN_TOKEN"] == nil { environment["MENAGERIE_ADMIN_TOKEN"] = adminToken }
        return environment
    }

    /// Starts a program beside the stack (its output discarded); the caller terminates it.
    static func spawn(_ executable: String, _ arguments: [String]) throws -> Process {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.environment = withAdminToken(ProcessInfo.processInfo.environment)
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        return process
    }

    /// `service` started alone on `port` with `data` as its data directory (then `arguments`), once it answers
    /// SERVING. The caller stops it (`Process.stop`).
    static func serveAlone(_ service: String, port: Int, data: URL, _ arguments: [String] = []) async throws -> Process
    {
        let process = try spawn(
            "\(binDirectory)/\(service)", ["--port", "\(port)", "--data-dir", data.path] + arguments)
        do {
            try await waitServing(port: port)
        } catch {
            process.stop()
            throw error
        }
        return process
    }

    /// A new directory under the temporary one, named `prefix-UUID`; the caller removes it.
    static func scratchDirectory(_ prefix: String) throws -> URL {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("\(prefix)-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        return directory
    }

    /// What a client script reported: the JSON on the last line of its `output` (the tests' Python clients print
    /// their findings so), as `T`.
    static func report<T>(_ output: String, as type: T.Type = T.self) throws -> T {
        let line = try #require(output.split(separator: "\n").last.map(String.init), "the script printed nothing")
        return try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? T, "\(output)")
    }

    /// Waits until something answers SERVING on 127.0.0.1:`port` (at most a minute, stretched by the time scale).
    static func waitServing(port: Int) async throws {
        for _ in 0..<Int((120 * TestTime.scale).rounded(.up)) {
            let probe = try await run(
                "\(binDirectory)/gateway", ["probe", "127.0.0.1:\(port)", "--quiet", "--timeout", "1"], environment: [:]
            )
            if probe.status == 0 { return }
            try await Task.sleep(for: .milliseconds(500))
        }
        Issue.record("nothing reported SERVING on port \(port) within \(Self.scaledSeconds(60)) s")
    }

    /// Whether `pid` is a live process (a zombie nobody reaped yet is not).
    static func isRunning(_ pid: Int32) -> Bool {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let end = stat.lastIndex(of: ")")
        else { return false }
        return !stat[stat.index(after: end)...].trimmingCharacters(in: .whitespaces).hasPrefix("Z")
    }

    /// Runs `body` against a new stack and tears the stack down however `body` ends.
    static func with(
        services: [String] = Stack.services, arguments: [String: [String]] = [:], _ body: (Stack) async throws -> Void
    ) async throws {
        let stack = try Stack(services: services, arguments: arguments)
        do {
            try await body(stack)
        } catch {
            await stack.tearDown()
            throw error
        }
        await stack.tearDown()
    }

    func tearDown() async {
        _ = try? await compose("down")
        try? FileManager.default.removeItem(at: directory)
    }

    /// Runs a program to completion (off the cooperative pool); returns its status and output.
    static func run(_ executable: String, _ arguments: [String], environment: [String: String]) async throws -> (
        status: Int32, output: String
    ) {
        try await offPool { try runBlocking(executable, arguments, environment: environment) }
    }

    private static func runBlocking(_ executable: String, _ arguments: [String], environment: [String: String]) throws
        -> (status: Int32, output: String)
    {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.environment = withAdminToken(environment)
        let output = FileManager.default.temporaryDirectory.appendingPathComponent("menagerie-out-\(UUID().uuidString)")
        _ = FileManager.default.createFile(atPath: output.path, contents: nil)
        let handle = try FileHandle(forWritingTo: output)
        process.standardOutput = handle
        process.standardError = handle
        process.standardInput = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        try handle.close()
        let text = (try? String(contentsOf: output, encoding: .utf8)) ?? ""
        try? FileManager.default.removeItem(at: output)
        return (process.terminationStatus, text)
    }
}

/// Three replicas of one service whose database is one dqlite cluster (`--cluster`) on loopback, started beside any
/// stack (not through compose), each with a data directory of its own and the identity store shared, and driven
/// through the gateway; what still runs is stopped, and the directory removed, when this goes.
final class ClusterReplicas {
    let service: String
    let directory: URL
    let servicePorts: [Int]
    let nodeAddresses: [String]
    var processes: [Process?] = []
    /// Loopback answers in microseconds; 20 ms keeps elections clear of a loaded test machine's stalls.
    let latency = 20
    /// The gateway's command group for the service (`classify` for classification) and the environment it runs in.
    private let command: String
    private let gatewayEnvironment: [String: String]
    /// What every replica is given beyond the flags of its port, directories and cluster.
    private let arguments: [String]

    /// - Parameter arguments: the further flags, given the replicas' service ports (blob peers, say).
    init(
        _ service: String, command: String? = nil, arguments: (_ servicePorts: [Int]) -> [String] = { _ in [] },
        gatewayEnvironment: [String: String] = ProcessInfo.processInfo.environment
    ) throws {
        self.service = service
        self.command = command ?? service
        directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "\(service)-cluster-\(UUID().uuidString)")
        let base = try RawSocket.freePortBlock(count: 6)
        servicePorts = (0..<3).map { base + $0 }
        nodeAddresses = (3..<6).map { "127.0.0.1:\(base + $0)" }
        self.arguments = arguments(servicePorts)
        var environment = gatewayEnvironment
        environment["XDG_DATA_HOME"] = directory.appendingPathComponent("xdg").path
        self.gatewayEnvironment = environment
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        for replica in 0..<3 { processes.append(try start(replica)) }
    }

    func dataDirectory(_ replica: Int) -> URL { directory.appendingPathComponent("r\(replica)") }

    func start(_ replica: Int) throws -> Process {
        try Stack.spawn(
            "\(Stack.binDirectory)/\(service)",
            [
                "--port", "\(servicePorts[replica])", "--data-dir", dataDirectory(replica).path,
                "--identity", directory.appendingPathComponent("identity.sqlite").path, "--log-level", "error",
                "--cluster", nodeAddresses.joined(separator: ","), "--cluster-bind", nodeAddresses[replica],
                "--cluster-latency", "\(latency)",
            ] + arguments)
    }

    func kill9(_ replica: Int) {
        guard let process = processes[replica] else { return }
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        processes[replica] = nil
    }

    /// The gateway's `arguments` (after the service's command group) through `replica`.
    func gateway(_ replica: Int, _ arguments: [String]) async throws -> (status: Int32, output: String) {
        try await Stack.run(
            "\(Stack.binDirectory)/gateway",
            [command] + arguments + ["--endpoint", "\(service)=127.0.0.1:\(servicePorts[replica])"],
            environment: gatewayEnvironment)
    }

    /// The gateway's call through `replica`, again every `pause` while it answers UNAVAILABLE (a leader being
    /// elected: nothing was written), as a client would, for up to `window` stretched by the time scale.
    func gatewayRetrying(
        _ replica: Int, _ arguments: [String], within window: Duration = .seconds(30),
        every pause: Duration = .milliseconds(300)
    ) async throws -> (status: Int32, output: String) {
        let start = ContinuousClock.now, window = window * TestTime.scale
        var result = try await gateway(replica, arguments)
        while result.status == 14, ContinuousClock.now - start < window {
            try await Task.sleep(for: pause)
            result = try await gateway(replica, arguments)
        }
        return result
    }

    deinit {
        for process in processes.compactMap({ $0 }) { process.stop() }
        try? FileManager.default.removeItem(at: directory)
    }
}

/// The instances `gateway status --json` reports: a JSON array of one object per instance, from the first line
/// that opens it (the output is stdout and stderr together).
func statusInstances(_ output: String) throws -> [[String: Any]] {
    let lines = output.split(separator: "\n", omittingEmptySubsequences: false)
    let start = try #require(lines.firstIndex { $0.hasPrefix("[") }, "no JSON array in: \(output)")
    let array =
        try JSONSerialization.jsonObject(with: Data(lines[start...].joined(separator: "\n").utf8)) as? [[String: Any]]
    return try #require(array, "not an array of objects: \(output)")
}

extension Process {
    /// Ends a program the test started, and waits for it to go.
    func stop() {
        terminate()
        waitUntilExit()
    }
}
