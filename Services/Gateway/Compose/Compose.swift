import Base
import ComposeKit
import Foundation
import GatewayKit

#if canImport(Glibc)
    import Glibc
#endif

/// compose's settings for one command: the services file, where the state, cache and binaries are, how long it
/// waits; from the variables compose/compose documents (it sets the paths before it hands over).
struct Compose {
    let manifest: Manifest
    /// compose's folder (compose/compose, supervise, the default state and cache).
    let home: String
    let state: String
    let cache: String
    /// The services' executables (and the gateway's, which probes them).
    let bin: String
    /// Seconds a replica gets between SIGTERM and SIGKILL.
    let grace: Int
    /// Seconds a replica gets to report SERVING.
    let startTimeout: Int

    static func load(environment: [String: String] = ProcessInfo.processInfo.environment) throws(ComposeFailure)
        -> Compose
    {
        let manifest = try Manifest.load(environment: environment)
        let home =
            environment["MENAGERIE_COMPOSE_HOME"].flatMap { $0.isEmpty ? nil : $0 }
            ?? UpwardSearch.find("compose/compose")?.deletingLastPathComponent().path ?? manifest.folder.path
        func seconds(_ name: String, _ fallback: Int) throws(ComposeFailure) -> Int {
            guard let text = environment[name], !text.isEmpty else { return fallback }
            guard text.count <= 6, let value = Int(text), value >= 0 else {
                throw ComposeFailure("\(name) must be a number of seconds (got '\(text)')")
            }
            return value
        }
        return Compose(
            manifest: manifest, home: home,
            state: environment["MENAGERIE_STATE_DIR"].flatMap { $0.isEmpty ? nil : $0 } ?? "\(home)/.state",
            cache: environment["MENAGERIE_CACHE_DIR"].flatMap { $0.isEmpty ? nil : $0 } ?? "\(home)/.cache",
            bin: environment["MENAGERIE_BIN_DIR"].flatMap { $0.isEmpty ? nil : $0 }
                ?? UpwardSearch.executableDirectory.path,
            grace: try seconds("MENAGERIE_GRACE", 15), startTimeout: try seconds("MENAGERIE_START_TIMEOUT", 120))
    }

    // MARK: Saying things

    static func say(_ message: String) { FileHandle.standardOutput.write(Data("compose: \(message)\n".utf8)) }
    static func warn(_ text: String) { FileHandle.standardError.write(Data(text.utf8)) }

    // MARK: State

    /// One command that changes replicas at a time per state directory: two `up`s at once would each start the
    /// replicas the other had not recorded yet, and race on the endpoints file. Held until the process exits.
    func lockState() throws(ComposeFailure) {
        try Files.makeDirectory(state)
        let descriptor = open("\(state)/lock", O_WRONLY | O_CREAT | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else { throw ComposeFailure("cannot open \(state)/lock") }
        while flock(descriptor, LOCK_EX) != 0 {
            guard errno == EINTR else { throw ComposeFailure("cannot lock \(state)/lock") }
        }
    }

    /// The replica count the stack runs of `service`: what `scale` chose, else the file's.
    func desired(_ service: ServiceSettings) -> Int {
        Files.read("\(state)/replicas/\(service.name)").flatMap {
            Int($0.trimmingCharacters(in: .whitespacesAndNewlines))
        } ?? service.replicas
    }

    func port(_ service: ServiceSettings, _ index: Int) -> Int { service.port + index }

    /// Whether any replica was started (on one machine or on nodes) and not stopped by down.
    var stackStarted: Bool {
        !Files.list(state, suffix: ".supervisor").isEmpty
            || Files.list("\(state)/nodes").contains {
                !Files.list("\(state)/nodes/\($0)", suffix: ".supervisor").isEmpty
            }
    }

    /// Whether the stack runs on nodes (compose up --nodes): their network is written down in the state.
    var onNodes: Bool { FileManager.default.fileExists(atPath: "\(state)/network") }

    /// The stack's identity: one user table every replica of every service shares (STATE/identity.sqlite), and the
    /// admin token (STATE/admin-token, readable by its owner only), made once and kept across `down`, which the
    /// services take as the admin's and the gateway run beside the stack sends. With MENAGERIE_ADMIN_TOKEN set,
    /// that is the stack's admin token.
    func ensureIdentity() throws(ComposeFailure) {
        if let token = Files.read("\(state)/admin-token"), !token.isEmpty { return }
        var token = ProcessInfo.processInfo.environment["MENAGERIE_ADMIN_TOKEN"] ?? ""
        if token.isEmpty {
            var generator = SystemRandomNumberGenerator()
            token =
                "mnt_"
                + (0..<32).map { _ in String(format: "%02x", UInt8.random(in: 0...255, using: &generator)) }.joined()
        }
        let temporary = "\(state)/admin-token.tmp"
        guard
            FileManager.default.createFile(
                atPath: temporary, contents: Data("\(token)\n".utf8), attributes: [.posixPermissions: 0o600]),
            rename(temporary, "\(state)/admin-token") == 0
        else { throw ComposeFailure("cannot write the admin token in \(state)") }
    }
}

/// The few file operations compose needs, quietly: a missing file is nil or empty, not an error.
enum Files {
    static func read(_ path: String) -> String? { try? String(contentsOfFile: path, encoding: .utf8) }

    static func exists(_ path: String) -> Bool { FileManager.default.fileExists(atPath: path) }

    /// The names in `directory` ending in `suffix`, sorted (as a shell glob lists them).
    static func list(_ directory: String, suffix: String = "") -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).filter { $0.hasSuffix(suffix) }
            .sorted()
    }

    static func makeDirectory(_ path: String) throws(ComposeFailure) {
        do { try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true) } catch {
            throw ComposeFailure("cannot make \(path): \(error.localizedDescription)")
        }
    }

    static func remove(_ path: String) { try? FileManager.default.removeItem(atPath: path) }

    static func write(_ text: String, to path: String) throws(ComposeFailure) {
        do { try text.write(toFile: path, atomically: true, encoding: .utf8) } catch {
            throw ComposeFailure("cannot write \(path)")
        }
    }
}

/// Other programs compose runs: the gateway's probe, openssl, ip, the supervisor.
enum Programs {
    /// Runs `arguments[0]` (found on PATH) to its end; its output goes where compose's goes, or nowhere when `quiet`.
    @discardableResult
    static func run(_ arguments: [String], quiet: Bool = false, environment: [String: String]? = nil) -> Int32 {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = arguments
        if let environment { process.environment = environment }
        process.standardInput = FileHandle.nullDevice
        if quiet {
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
        }
        do { try process.run() } catch { return 127 }
        process.waitUntilExit()
        return process.terminationStatus
    }

    /// Runs a program and returns its status and standard output (its errors discarded).
    static func output(_ arguments: [String]) -> (status: Int32, output: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = arguments
        let pipe = Pipe()
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = pipe
        process.standardError = FileHandle.nullDevice
        do { try process.run() } catch { return (127, "") }
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: data, as: UTF8.self))
    }

    /// Starts `arguments` in a session of its own (so that its process group outlives compose and can be signalled
    /// as one), its input and output on /dev/null, with `environment` added to compose's; returns its pid.
    static func spawnSession(_ arguments: [String], adding environment: [String: String]) throws(ComposeFailure)
        -> pid_t
    {
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        posix_spawnattr_setflags(&attributes, Int16(0x80))  // POSIX_SPAWN_SETSID
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        let merged = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        let argv = arguments.map { strdup($0) } + [nil]
        let envp = merged.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { (argv + envp).forEach { free($0) } }
        var pid: pid_t = 0
        let status = posix_spawnp(&pid, arguments[0], &actions, &attributes, argv, envp)
        guard status == 0 else {
            throw ComposeFailure("cannot start \(arguments[0]): \(String(cString: strerror(status)))")
        }
        return pid
    }
}
