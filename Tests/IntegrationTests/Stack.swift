import Foundation
import Testing

/// Runs the real executables through compose/compose, in a scratch state directory and on free
/// ports, so the tests can run beside a developer's own stack.
final class Stack: @unchecked Sendable {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    static let binDirectory = ProcessInfo.processInfo.environment["MENAGERIE_BIN_DIR"] ?? root.appendingPathComponent(".build/debug").path

    let directory: URL
    let basePorts: [String: Int]
    var state: URL { directory.appendingPathComponent("state") }

    /// A stack whose services each get a block of `replicaRoom` free ports.
    init(services: [String] = ["zoo", "ocr", "health", "classification"], replicaRoom: Int = 4) throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("menagerie-stack-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        var ports: [String: Int] = [:]
        for service in services { ports[service] = try Self.freePortBlock(count: replicaRoom, avoiding: Array(ports.values)) }
        basePorts = ports
        let config = services.map { "\($0) \(ports[$0]!) 1 data/\($0)" }.joined(separator: "\n")
        try config.write(to: directory.appendingPathComponent("services.conf"), atomically: true, encoding: .utf8)
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
    func compose(_ arguments: String...) throws -> (status: Int32, output: String) {
        try Self.run(Self.root.appendingPathComponent("compose/compose").path, arguments, environment: environment)
    }

    /// Runs the gateway against this stack's state.
    func gateway(_ arguments: [String]) throws -> (status: Int32, output: String) {
        try Self.run("\(Self.binDirectory)/gateway", arguments + ["--state", state.path], environment: environment)
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

    func tearDown() {
        _ = try? compose("down")
        try? FileManager.default.removeItem(at: directory)
    }

    static func run(_ executable: String, _ arguments: [String], environment: [String: String]) throws -> (status: Int32, output: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.environment = environment
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

    /// A port p such that p…p+count-1 are all free now.
    static func freePortBlock(count: Int, avoiding taken: [Int]) throws -> Int {
        for _ in 0..<200 {
            let base = Int.random(in: 20_000...60_000)
            let range = base..<(base + count)
            if taken.contains(where: { abs($0 - base) < count }) { continue }
            if range.allSatisfy(isFree) { return base }
        }
        throw POSIXError(.EADDRINUSE)
    }

    static func isFree(_ port: Int) -> Bool {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(descriptor) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        } == 0
    }

    /// Sends `bytes` to 127.0.0.1:`port` and closes.
    static func sendGarbage(_ bytes: [UInt8], to port: Int) {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(descriptor) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        } == 0
        if connected { _ = bytes.withUnsafeBytes { send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) } }
    }
}

/// The instances `gateway status --json` reports.
func statusInstances(_ output: String) throws -> [[String: Any]] {
    let start = try #require(output.firstIndex(of: "{"), "no JSON in: \(output)")
    let object = try JSONSerialization.jsonObject(with: Data(output[start...].utf8)) as? [String: Any]
    return try #require(object?["instances"] as? [[String: Any]])
}
