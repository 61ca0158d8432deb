import Foundation
import GatewayKit
import TestSupport
import Testing

/// Runs the real executables through compose/compose, in a scratch state directory and on free
/// ports, so the tests can run beside a developer's own stack.
final class Stack: @unchecked Sendable {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    static let binDirectory = ProcessInfo.processInfo.environment["MENAGERIE_BIN_DIR"] ?? root.appendingPathComponent(".build/debug").path

    /// The services compose starts, from the one list of them: compose/services.conf.
    static let services: [String] = {
        let file = root.appendingPathComponent("compose/services.conf")
        return ((try? ServiceList.parse((try? String(contentsOf: file, encoding: .utf8)) ?? "")) ?? []).map(\.name)
    }()

    let directory: URL
    let basePorts: [String: Int]
    var state: URL { directory.appendingPathComponent("state") }

    /// A stack whose services each get a block of `replicaRoom` free ports; `arguments` are their `arg` lines.
    init(services: [String] = Stack.services, arguments: [String: [String]] = [:], replicaRoom: Int = 4) throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("menagerie-stack-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        var ports: [String: Int] = [:]
        for service in services { ports[service] = try RawSocket.freePortBlock(count: replicaRoom, avoiding: Array(ports.values)) }
        basePorts = ports
        try writeConfig(services.map {
            ServiceSettings(name: $0, port: ports[$0]!, data: "data/\($0)", arguments: arguments[$0] ?? [])
        })
    }

    /// Replaces the stack's services file.
    func writeConfig(_ services: [ServiceSettings]) throws {
        try ServiceList.render(services).write(to: directory.appendingPathComponent("services.conf"), atomically: true, encoding: .utf8)
    }

    var environment: [String: String] {
        var environment = ProcessInfo.processInfo.environment
        environment["MENAGERIE_COMPOSE_CONFIG"] = directory.appendingPathComponent("services.conf").path
        environment["MENAGERIE_STATE_DIR"] = state.path
        environment["MENAGERIE_BIN_DIR"] = Self.binDirectory
        environment["MENAGERIE_GRACE"] = "5"
        environment["MENAGERIE_START_TIMEOUT"] = "60"
        environment.removeValue(forKey: "MENAGERIE_ENDPOINTS")
        return environment
    }

    /// Runs `compose/compose ARGS`; returns exit status and combined output.
    @discardableResult
    func compose(_ arguments: String...) async throws -> (status: Int32, output: String) {
        try await Self.run(Self.root.appendingPathComponent("compose/compose").path, arguments, environment: environment)
    }

    /// Runs `compose/compose ARGS` with some environment variables changed (e.g. a shorter start timeout).
    @discardableResult
    func compose(environment changes: [String: String], _ arguments: [String]) async throws -> (status: Int32, output: String) {
        try await Self.run(Self.root.appendingPathComponent("compose/compose").path, arguments, environment: environment.merging(changes) { $1 })
    }

    /// Runs the gateway against this stack's state.
    func gateway(_ arguments: [String]) async throws -> (status: Int32, output: String) {
        try await Self.run("\(Self.binDirectory)/gateway", arguments + ["--state", state.path], environment: environment)
    }

    /// Pids of every replica's service process, from compose's state.
    func servicePids() throws -> [String: Int32] {
        let files = try FileManager.default.contentsOfDirectory(atPath: state.path).filter { $0.hasSuffix(".pid") }
        var pids: [String: Int32] = [:]
        for file in files {
            let text = try String(contentsOf: state.appendingPathComponent(file), encoding: .utf8)
            if let pid = Int32(text.trimmingCharacters(in: .whitespacesAndNewlines)) { pids[String(file.dropLast(4))] = pid }
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

    /// Waits until something answers SERVING on 127.0.0.1:`port` (at most a minute).
    static func waitServing(port: Int) async throws {
        for _ in 0..<120 {
            let probe = try await run("\(binDirectory)/gateway", ["probe", "127.0.0.1:\(port)", "--quiet", "--timeout", "1"], environment: [:])
            if probe.status == 0 { return }
            try await Task.sleep(for: .milliseconds(500))
        }
        Issue.record("nothing reported SERVING on port \(port) within a minute")
    }

    /// Whether `pid` is a live process (a zombie nobody reaped yet is not).
    static func isRunning(_ pid: Int32) -> Bool {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let end = stat.lastIndex(of: ")") else { return false }
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
    static func run(_ executable: String, _ arguments: [String], environment: [String: String]) async throws -> (status: Int32, output: String) {
        try await offPool { try runBlocking(executable, arguments, environment: environment) }
    }

    private static func runBlocking(_ executable: String, _ arguments: [String], environment: [String: String]) throws -> (status: Int32, output: String) {
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

/// The instances `gateway status --json` reports: a JSON array of one object per instance, from the first line
/// that opens it (the output is stdout and stderr together).
func statusInstances(_ output: String) throws -> [[String: Any]] {
    let lines = output.split(separator: "\n", omittingEmptySubsequences: false)
    let start = try #require(lines.firstIndex { $0.hasPrefix("[") }, "no JSON array in: \(output)")
    let array = try JSONSerialization.jsonObject(with: Data(lines[start...].joined(separator: "\n").utf8)) as? [[String: Any]]
    return try #require(array, "not an array of objects: \(output)")
}
