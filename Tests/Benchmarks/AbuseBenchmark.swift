import Base
import Foundation
import RPC
import RPCWire
import Schema
import Synchronization
import TLS
import Transport
import ZooAPI
import ZooCore

/// Issue 9's robustness suite: the hostile probe's attacks, bounded in count and time, against a real
/// zoo replica (the built `zoo` executable beside this one, on a free loopback port, with the real
/// data when `../shared/datasets/zoo` is there, else its sample data). Per attack it prints whether
/// the replica lived (same pid), the health-check and search latency measured meanwhile beside the
/// unloaded figures of the same run, the peak RSS (VmHWM, reset between attacks through
/// /proc/PID/clear_refs) beside the documented budget, and a verdict per goal.
struct AbuseBenchmark {
    /// Multiplies the attacks' counts (1 = the issue's: 1,000 pipelined exports, 40 large frames,
    /// 1,100 idle sockets, 200 slowloris clients, …); `--abuse-scale 0.1` for a quick debug run.
    let scale: Double
    /// Seconds each attack holds its sockets while the probes run.
    let holdSeconds: Double
    /// Runs only the attacks whose name contains one of these (`--abuse-only`); nil: all of them.
    var only: [String]? = nil
    /// `--abuse-tls`: the replica serves TLS only (mutual TLS on the binary protocol, as `compose up --tls`
    /// runs it) and every attack and probe goes through TLS, plus attacks on the handshake itself.
    var tls = false

    /// The zoo's documented limits (README, `zoo --help`): `--memory-budget` 256 MiB for large frames
    /// and unread answers, and frames under 64 KiB bounded by the connection limit (64 KiB × 1,024).
    static let memoryBudget = 256 << 20
    static let smallFrameBound = 64 << 20
    static let healthGoal = 0.100
    /// The replica's `--upload-idle-timeout` (seconds): short, so that an upload left open ends within the hold.
    static let uploadIdleTimeout = 2.0
    /// The replica's admin token (`MENAGERIE_ADMIN_TOKEN`), which issue 24's attacks send to be let in.
    static let adminToken = (0..<4).map { _ in UUID().uuidString.replacingOccurrences(of: "-", with: "") }.joined()

    func count(_ full: Int, minimum: Int = 1) -> Int { max(minimum, Int((Double(full) * scale).rounded())) }

    func run() async throws {
        guard let binary = zooExecutableBesideBenchmark(suite: "Abuse") else { return }
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("abuse-bench-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: scratch) }
        let port = try Self.freePort()
        let realData = FileManager.default.fileExists(atPath: ZooBenchmark.realData.path)
        let dataDirectory = scratch.appendingPathComponent("data")
        if realData {
            // Imported here, as the benchmark of the zoo does; the replica finds its database filled.
            try FileManager.default.createDirectory(at: dataDirectory, withIntermediateDirectories: true)
            let library = try ZooLibrary(path: dataDirectory.appendingPathComponent("zoo.sqlite").path)
            try library.importFiles(
                ZooSourceFile.directory(ZooBenchmark.realData), source: ZooBenchmark.realData.path, trigger: .client)
        }
        let zoo = Process()
        zoo.executableURL = binary
        // A short upload idle timeout so that issue 24's open uploads end within an attack's hold (only client
        // streams pace, which no other attack opens), and an admin token for the admin-only imports they call.
        zoo.arguments = [
            "--port", "\(port)", "--data-dir", dataDirectory.path, "--log-level", "warning",
            "--upload-idle-timeout", String(Self.uploadIdleTimeout), "--loops", "\(serverLoops)",
        ]
        zoo.environment = ProcessInfo.processInfo.environment.merging(["MENAGERIE_ADMIN_TOKEN": Self.adminToken]) { $1 }
        let certificates = tls ? try BenchCertificates() : nil
        defer { certificates?.remove() }
        var clientTLS: TLSCredentials?
        if let certificates {
            zoo.arguments! += [
                "--tls-cert", certificates.server.certificate, "--tls-key", certificates.server.key, "--tls-ca",
                certificates.ca,
            ]
            let client = try TLSCredentials.client(
                certificateFile: certificates.client.certificate, keyFile: certificates.client.key,
                caFile: certificates.ca)
            let http = try TLSContext(
                role: .client, certificateFile: nil, keyFile: nil, caFile: certificates.ca,
                protocols: [TLSCredentials.httpProtocol])
            let anonymous = try TLSContext(
                role: .client, certificateFile: nil, keyFile: nil, caFile: certificates.ca,
                protocols: [TLSCredentials.binaryProtocol])
            AttackSocket.tls.withLock { $0 = .init(binary: client.context, http: http, anonymous: anonymous) }
            clientTLS = client
        }
        defer { AttackSocket.tls.withLock { $0 = nil } }
        // Opt-in: the replica on cores of its own (taskset's CPU list, e.g. 1), so that the attacker
        // (run this under `taskset -c 0`) does not compete with it for the same cores.
        let zooCPUs = ProcessInfo.processInfo.environment["MENAGERIE_ABUSE_ZOO_CPUS"].flatMap { $0.isEmpty ? nil : $0 }
        if let zooCPUs {
            zoo.executableURL = URL(fileURLWithPath: "/usr/bin/taskset")
            zoo.arguments = ["-c", zooCPUs, binary.path] + (zoo.arguments ?? [])
        }
        let log = scratch.appendingPathComponent("zoo.log")
        _ = FileManager.default.createFile(atPath: log.path, contents: nil)
        let logHandle = try FileHandle(forWritingTo: log)
        zoo.standardOutput = logHandle
        zoo.standardError = logHandle
        zoo.standardInput = FileHandle.nullDevice
        try zoo.run()
        let pid = zoo.processIdentifier
        defer {
            if zoo.isRunning { kill(pid, SIGKILL) }
            zoo.waitUntilExit()
        }
        let started = ContinuousClock.now
        while Probe.health(port: port) == nil {
            guard zoo.isRunning, ContinuousClock.now - started < .seconds(300) else {
                print(
                    "Abuse benchmark: the zoo did not start serving; its log:\n"
                        + ((try? String(contentsOf: log, encoding: .utf8)) ?? ""))
                return
            }
            try await Task.sleep(for: .milliseconds(200))
        }
        let client = RPCClient(
            transports: [try TCPClientTransport(endpoint: "127.0.0.1:\(port)", tls: clientTLS)],
            retry: .init(maxAttempts: 1))
        defer { client.close() }
        print(
            "Abuse benchmark: zoo pid \(pid) on 127.0.0.1:\(port) with \(realData ? "the real data" : "its sample data"), scale \(scale), "
                + "\(holdSeconds) s per attack, \(ProcessInfo.processInfo.activeProcessorCount) cores, the replica on \(serverLoops) loop(s)"
                + (tls ? "; TLS only (mutual TLS on the binary protocol): every attack and probe handshakes first" : "")
                + (zooCPUs.map { "; the zoo pinned to CPUs \($0) (MENAGERIE_ABUSE_ZOO_CPUS)" } ?? ""))

        // Unloaded figures, measured the same way as under attack.
        let quiet = Probes(port: port, client: client)
        quiet.start()
        try await Task.sleep(for: .seconds(max(1, holdSeconds)))
        let unloaded = await quiet.stop()
        let baseRSS = Memory.read(pid).rss
        let rssGoal = baseRSS + Self.memoryBudget + Self.smallFrameBound
        print(
            String(
                format:
                    "unloaded: health p50 %.2f ms p99 %.2f ms max %.2f ms (%d probes), search p50 %.2f ms p95 %.2f ms p99 %.2f ms max %.2f ms (%d)",
                unloaded.health.p50 * 1000, unloaded.health.p99 * 1000, unloaded.health.max * 1000,
                unloaded.health.samples.count,
                unloaded.search.p50 * 1000, unloaded.search.p95 * 1000, unloaded.search.p99 * 1000,
                unloaded.search.max * 1000,
                unloaded.search.samples.count)
                + "; RSS \(Memory.mib(baseRSS)); RSS goal: \(Memory.mib(baseRSS)) + \(Memory.mib(Self.memoryBudget)) budget + "
                + "\(Memory.mib(Self.smallFrameBound)) of small frames = \(Memory.mib(rssGoal))")
        let searchGoal = max(unloaded.search.p50, 0.0001) * 10

        var rows: [[String]] = []
        var failures: [String] = []
        var cpuRows: [[String]] = []
        for attack in attacks(port: port)
        where only.map({ names in names.contains { attack.name.contains($0) } }) ?? true {
            Memory.resetPeak(pid)
            let before = await Self.serverFigures(client: client)
            let zooCPUBefore = ThreadCPU.read(pid), benchCPUBefore = processCPUSeconds(),
                machineBefore = ThreadCPU.machineBusySeconds()
            let probes = Probes(port: port, client: client)
            probes.start()
            let began = ContinuousClock.now
            let hold = holdSeconds
            let outcome = await Self.onThread { () -> (lost: Int, note: String) in
                // A quick attack is repeated until the hold is over, so that the probes measure it.
                var (lost, note) = attack.run()
                var rounds = 1
                while attack.repeats && ContinuousClock.now - began < .milliseconds(Int64(hold * 1000)) {
                    let outcome = attack.run()
                    lost += outcome.lost
                    rounds += 1
                }
                return (lost, rounds > 1 ? "\(rounds) rounds of: " + note : note)
            }
            let figures = await probes.stop()
            let zooCPU = ThreadCPU.read(pid).since(zooCPUBefore), benchCPU = processCPUSeconds() - benchCPUBefore
            let machine = ThreadCPU.machineBusySeconds()
            let othersCPU = machine.busy - machineBefore.busy - zooCPU.total - benchCPU,
                steal = machine.steal - machineBefore.steal
            let after = await Self.serverFigures(client: client)
            let exports = after.exports - before.exports
            let longTurns = zip(after.loop?.turnsOver ?? [], before.loop?.turnsOver ?? []).map { $0 - $1 }
            let peak = Memory.read(pid).peak
            let alive = zoo.isRunning && kill(pid, 0) == 0
            let lost = outcome.lost + figures.health.failures + figures.search.failures
            let verdicts = [
                ("alive", alive),
                ("health", figures.health.max <= Self.healthGoal && figures.health.failures == 0),
                ("search", figures.search.max <= searchGoal && figures.search.failures == 0),
                ("RSS", peak <= rssGoal),
                ("nothing lost", lost == 0),
            ]
            let missed = verdicts.filter { !$0.1 }.map(\.0)
            if !missed.isEmpty { failures.append("\(attack.name): \(missed.joined(separator: ", ")) not met") }
            rows.append([
                attack.name, alive ? "yes (pid \(pid))" : "NO",
                String(format: "%.1f / %.1f", figures.health.p50 * 1000, figures.health.max * 1000)
                    + (figures.health.failures > 0 ? " (\(figures.health.failures) failed)" : ""),
                String(
                    format: "%.1f / %.1f / %.1f / %.1f", figures.search.p50 * 1000, figures.search.p95 * 1000,
                    figures.search.p99 * 1000, figures.search.max * 1000)
                    + (figures.search.failures > 0 ? " (\(figures.search.failures) failed)" : ""),
                // Not a verdict (the goal's is above): the same statistic under attack and unloaded.
                [
                    ("p50", figures.search.p50, unloaded.search.p50), ("p95", figures.search.p95, unloaded.search.p95),
                    ("max", figures.search.max, unloaded.search.max),
                ]
                .map { "\($0.0) " + ($0.1 <= 10 * $0.2 ? "ok" : "NO") }.joined(separator: ", "),
                Memory.mib(peak), "\(lost)", missed.isEmpty ? "all met" : "NOT met: " + missed.joined(separator: ", "),
                String(format: "%.1f s", (ContinuousClock.now - began).seconds) + "; " + outcome.note
                    + (figures.search.firstFailure.map { "; a search failed: \($0)" } ?? ""),
            ])
            let elapsed = (ContinuousClock.now - began).seconds
            cpuRows.append([
                attack.name, String(format: "%.1f s", elapsed), String(format: "%.2f", zooCPU.total),
                ThreadCPU.describe(zooCPU.byName),
                String(format: "%.2f", benchCPU), String(format: "%.2f / %.2f", max(0, othersCPU), steal), "\(exports)",
                longTurns.isEmpty
                    ? "?"
                    : longTurns.map(String.init).joined(separator: " / ")
                        + (after.loop.map {
                            $0.longestMilliseconds > before.loop?.longestMilliseconds ?? 0
                                ? String(format: " (%.0f ms)", $0.longestMilliseconds) : ""
                        } ?? ""),
                String(format: "%.2f", zooCPU.waited(named: "zoo-loop")),
                [("health", figures.health), ("search", figures.search)].compactMap { name, figures in
                    figures.slowest.map { name + String(format: " %.0f ms at +%.1f s", $0.took * 1000, $0.at) }
                }.joined(separator: ", "),
            ])
            guard alive else { break }
            try await Task.sleep(for: .milliseconds(300))  // let the server close what the attack left
        }
        print(
            String(
                format: "goals: health max ≤ %.0f ms; search max ≤ 10 × unloaded p50 = %.2f ms", Self.healthGoal * 1000,
                searchGoal * 1000)
                + " (\"search ≤ 10× same stat\" compares like with like, each figure with 10 × the unloaded one: informational)"
                + "; peak RSS ≤ \(Memory.mib(rssGoal)); nothing lost")
        printTable(
            [
                "attack", "alive", "health p50/max ms", "search p50/p95/p99/max ms", "search ≤ 10× same stat",
                "peak RSS", "lost", "verdict", "notes",
            ], rows)
        print(
            "where the time went (CPU seconds during each attack; the zoo's by thread name, the benchmark's = attacker + probes, "
                + "others' = the rest of the machine's busy time, steal = time the hypervisor ran other machines instead; "
                + "zoo loop turns: how many turns of its event loops ran over 1 / 10 / 100 ms, each one a stall that every client of that loop felt, "
                + "with the longest turn so far when this attack made it; zoo loop waited = seconds its loop threads were runnable but "
                + "had no CPU, which long turns include):")
        printTable(
            [
                "attack", "took", "zoo CPU s", "zoo by thread", "bench CPU s", "others' CPU / steal s",
                "exports answered",
                "zoo loop turns > 1/10/100 ms", "zoo loop waited s", "slowest probes",
            ], cpuRows)
        print(
            failures.isEmpty
                ? "every goal met under every attack" : "goals not met:\n  " + failures.joined(separator: "\n  "))
        let warnings = ((try? String(contentsOf: log, encoding: .utf8)) ?? "").split(separator: "\n")
        print(
            "the zoo logged \(warnings.count) lines at warning level or above\(warnings.isEmpty ? "" : ", the last: \(warnings.last!)")"
        )
    }

    // MARK: The attacks

    struct Attack {
        let name: String
        /// Over in a moment: repeated for the hold.
        var repeats = false
        /// Runs the attack (blocking, on a thread of its own); what it lost and a note.
        let run: @Sendable () -> (lost: Int, note: String)
    }

    func attacks(port: Int) -> [Attack] {
        let hold = holdSeconds
        let export = ZooV1.Zoo.exportGeoJSON.path
        let pipelined = count(1000, minimum: 50), unreadConnections = 4, unreadCalls = count(300, minimum: 20)
        let largeFrames = count(40, minimum: 4), idle = count(1100, minimum: 50), slow = count(200, minimum: 10)
        let garbage = count(50, minimum: 5), nuls = count(200, minimum: 12), reused = count(100, minimum: 5)
        return [
            Attack(name: "pipelined exports") {
                // 100 calls kept open (the per-connection limit) until `pipelined` were answered, all read.
                guard let socket = AttackSocket(port: port, timeout: 60) else { return (1, "could not connect") }
                var next: UInt64 = 1, answered = 0, refused = 0, lost = 0
                func send() {
                    socket.write(Frames.request(id: next, method: export))
                    next += 1
                }
                while next <= UInt64(min(100, pipelined)) { send() }
                while answered < pipelined {
                    guard let frame = socket.readFrame() else {
                        lost = pipelined - answered
                        break
                    }
                    guard frame.kind == .status else { continue }
                    answered += 1
                    if frame.statusCode != 0 { refused += 1 }
                    if next <= UInt64(pipelined) { send() }
                }
                return (lost, "\(answered) of \(pipelined) answered, \(refused) with an error")
            },
            Attack(name: "unread answers") {
                // Connections that ask for exports and read nothing for the hold, then read what came.
                let sockets = (0..<unreadConnections).compactMap { _ in AttackSocket(port: port, timeout: 10) }
                for socket in sockets {
                    socket.write((1...unreadCalls).flatMap { Frames.request(id: UInt64($0), method: export) })
                }
                Thread.sleep(forTimeInterval: hold)
                var answers = 0, closedWithStatus = 0, lost = unreadConnections - sockets.count
                for socket in sockets {
                    var seen = 0
                    while seen < unreadCalls, let frame = socket.readFrame() {
                        if frame.callID == 0 {
                            closedWithStatus += 1
                            break
                        }
                        if frame.kind == .status { seen += 1 }
                    }
                    answers += seen
                    // Every call answered, or the connection closed with its reason (the memory budget).
                    if seen < unreadCalls && !socket.sawConnectionStatus { lost += 1 }
                }
                return (
                    lost,
                    "\(answers) of \(unreadConnections * unreadCalls) answers read, \(closedWithStatus) connections closed with a status"
                )
            },
            Attack(name: "almost complete 16 MiB frames") {
                let size = FrameCodec.defaultMaxFrameSize - 16
                let done = Tally()
                let sockets = (0..<largeFrames).compactMap { _ in AttackSocket(port: port, timeout: 0.2, sendTimeout: 5)
                }
                let group = DispatchGroup()
                for socket in sockets {
                    group.enter()
                    Thread.detachNewThread {
                        defer { group.leave() }
                        guard socket.write(Frames.header(length: size)) else { return }
                        let chunk = [UInt8](repeating: 0, count: 1 << 20)
                        var sent = 0
                        while sent + chunk.count < size - 1024 {
                            guard socket.write(chunk) else { return }
                            sent += chunk.count
                        }
                        done.value.add(1, ordering: .relaxed)
                    }
                }
                group.wait()
                Thread.sleep(forTimeInterval: hold)
                let refused = sockets.filter { $0.drainForConnectionStatus() == StatusCode.resourceExhausted.rawValue }
                    .count
                return (
                    0,
                    "\(sockets.count) connections, \(done.value.load(ordering: .relaxed)) sent all but the last KiB, \(refused) told RESOURCE_EXHAUSTED"
                )
            },
            Attack(name: "idle sockets, per-peer and process limit") {
                // Over the per-peer limit from 127.0.0.1, and past the process limit from other addresses;
                // each keeps its slot with a CANCEL of an unused id.
                var sockets: [AttackSocket] = []
                for index in 0..<idle {
                    let source = index < idle * 3 / 11 ? "127.0.0.1" : "127.0.0.\(2 + index % 5)"
                    guard let socket = AttackSocket(port: port, from: source, timeout: 0.002) else { continue }
                    socket.write(FrameCodec.encode(RpcV1.Frame(callID: 99, kind: .cancel).serializedBytes()))
                    sockets.append(socket)
                }
                Thread.sleep(forTimeInterval: hold)
                let told = sockets.filter { $0.drainForConnectionStatus() != nil }.count
                return (0, "\(sockets.count) of \(idle) connected, \(told) closed to make room (with a status)")
            },
            Attack(name: "slowloris") {
                let sockets = (0..<slow).compactMap { _ in AttackSocket(port: port, timeout: 1) }
                for socket in sockets { socket.write(Frames.header(length: 1000)) }
                let end = Date().addingTimeInterval(hold)
                var bytes = 0
                while Date() < end {
                    for socket in sockets where socket.write([0]) { bytes += 1 }
                    Thread.sleep(forTimeInterval: 0.2)
                }
                return (0, "\(sockets.count) clients sent \(bytes) bytes, one at a time")
            },
            Attack(name: "garbage, huge lengths, 1-byte writes", repeats: true) {
                var lost = 0
                let kinds = garbage
                for index in 0..<kinds {
                    guard let socket = AttackSocket(port: port, timeout: 5) else {
                        lost += 1
                        continue
                    }
                    switch index % 4 {
                    case 0: socket.write([0xFF] + (0..<1024).map { _ in UInt8.random(in: 0...255) })  // bad flag byte
                    case 1: socket.write([0, 0xFF, 0xFF, 0xFF, 0xFF])  // a 4 GiB frame
                    case 2: socket.write([0, 0, 0, 0, 0])  // zero-length frame
                    default:
                        socket.write(
                            FrameCodec.encode(
                                RpcV1.Frame(callID: 1, kind: RpcV1.FrameKind(rawValue: 42)).serializedBytes()))
                    }
                    if socket.drainForConnectionStatus() == nil { lost += 1 }
                }
                // A well-formed health check written one byte at a time is answered.
                let byByte = count(20, minimum: 3)
                for _ in 0..<byByte {
                    guard let socket = AttackSocket(port: port, timeout: 5) else {
                        lost += 1
                        continue
                    }
                    for byte in Frames.request(
                        id: 1, method: RpcV1.Health.check.path, payload: RpcV1.HealthCheckRequest().serializedBytes())
                    {
                        socket.write([byte])
                        usleep(200)
                    }
                    if socket.readFrame()?.statusCode != 0 { lost += 1 }
                }
                return (
                    lost,
                    "\(kinds) garbage connections each expected to get a call-id-0 status, \(byByte) byte-by-byte health checks"
                )
            },
            Attack(name: "NUL in method, metadata, search", repeats: true) {
                guard let socket = AttackSocket(port: port, timeout: 10) else { return (1, "could not connect") }
                let search = ZooV1.Zoo.searchAnimals.path
                var ids: [UInt64] = []
                var id: UInt64 = 0
                while ids.count < nuls {
                    id += 1
                    if Frames.varint(id).contains(Frames.marker) { continue }  // the marker byte becomes the NUL
                    ids.append(id)
                }
                var bytes: [UInt8] = []
                for (index, id) in ids.enumerated() {
                    switch index % 3 {
                    case 0: bytes += Frames.withNUL(Frames.request(id: id, method: search + "~junk"))
                    case 1:
                        bytes += Frames.withNUL(
                            Frames.request(
                                id: id, method: search, metadata: [RpcV1.MetadataEntry(key: "k", value: "v~w")]))
                    default:
                        bytes += Frames.request(
                            id: id, method: search,
                            payload: Frames.withNUL(ZooV1.SearchAnimalsRequest(text: "zel~xyz").serializedBytes()))
                    }
                }
                socket.write(bytes)
                var invalid = 0, other = 0
                for _ in ids {
                    guard let frame = socket.readFrame() else { break }
                    if frame.statusCode == StatusCode.invalidArgument.rawValue { invalid += 1 } else { other += 1 }
                }
                // The connection stays open.
                socket.write(
                    Frames.request(
                        id: id + 1, method: RpcV1.Health.check.path,
                        payload: RpcV1.HealthCheckRequest().serializedBytes()))
                let after = socket.readFrame()?.statusCode == 0
                return (
                    ids.count - invalid + (after ? 0 : 1),
                    "\(invalid) of \(ids.count) INVALID_ARGUMENT, \(other) other, connection \(after ? "still serves" : "LOST")"
                )
            },
            Attack(name: "reused call ids", repeats: true) {
                var told = 0
                let sockets = (0..<reused).compactMap { _ in AttackSocket(port: port, timeout: 10) }
                for socket in sockets {
                    socket.write(Frames.request(id: 7, method: export) + Frames.request(id: 7, method: export))
                }
                for socket in sockets {
                    // Exactly one frame: the connection's INTERNAL status; the first call is not answered under id 7.
                    if let frame = socket.readFrame(), frame.callID == 0,
                        frame.statusCode == StatusCode.internalError.rawValue, socket.readFrame() == nil
                    {
                        told += 1
                    }
                }
                return (
                    reused - told,
                    "\(told) of \(reused) connections closed with INTERNAL and nothing under the reused id"
                )
            },
        ] + httpAttacks(port: port) + jobAndUploadAttacks(port: port) + (tls ? tlsAttacks(port: port) : [])
    }

    /// Issue 24's attacks, as the admin (whose calls the replica lets in): uploads opened and left silent,
    /// past the connection limit, and a flood of import jobs.
    func jobAndUploadAttacks(port: Int) -> [Attack] {
        let hold = holdSeconds
        let authorization = RpcV1.MetadataEntry(key: "authorization", value: "Bearer \(Self.adminToken)")
        let uploads = count(1100, minimum: 50), jobs = min(100, count(100, minimum: 10))
        let dataDirectory =
            FileManager.default.fileExists(atPath: ZooBenchmark.realData.path)
            ? ZooBenchmark.realData : ZooDataSet.bundledSampleDirectory
        return [
            Attack(name: "open uploads") {
                // ImportTiles client streams that send one small message and then nothing, from 127.0.0.1-5, past
                // the connection limit (1,024, 256 per address): each must end DEADLINE_EXCEEDED after the idle
                // timeout, be refused RESOURCE_EXHAUSTED (past --max-uploads) or be closed to make room; none may hang.
                var opening = RpcV1.Frame()
                opening.callID = 1
                opening.kind = .request
                opening.method = ZooV1.Zoo.importTiles.path
                opening.metadata = [authorization]
                opening.clientStream = true
                var message = RpcV1.Frame()
                message.callID = 1
                message.kind = .message
                message.hasPayload = true
                // The start of an MBTiles file (SQLite's header, which the handler checks first), then zeros: 1 KiB.
                let start = Array("SQLite format 3\0".utf8)
                message.payload = ZooV1.ImportTilesRequest(
                    data: start + [UInt8](repeating: 0, count: 1024 - start.count)
                ).serializedBytes()
                let bytes = FrameCodec.encode(opening.serializedBytes()) + FrameCodec.encode(message.serializedBytes())
                var sockets: [AttackSocket] = []
                for index in 0..<uploads {
                    guard
                        let socket = AttackSocket(
                            port: port, from: "127.0.0.\(1 + index % 5)", timeout: 0.01, sendTimeout: 5)
                    else { continue }
                    socket.write(bytes)
                    sockets.append(socket)
                }
                Thread.sleep(forTimeInterval: max(hold, Self.uploadIdleTimeout + 2))
                // By now every upload has had its answer: a short read timeout (10 ms) tells the silent ones.
                var ended = 0, refused = 0, otherStatus = 0, reclaimed = 0, hung = 0, closedUntold = 0
                var firstOther: String?
                for socket in sockets {
                    var callStatus: RpcV1.Frame?
                    while let frame = socket.readFrame() {
                        if frame.callID == 1 && frame.kind == .status && callStatus == nil { callStatus = frame }
                    }
                    if socket.sawConnectionStatus { reclaimed += 1 }
                    switch callStatus?.statusCode {
                    case StatusCode.deadlineExceeded.rawValue?: ended += 1
                    case StatusCode.resourceExhausted.rawValue?: refused += 1
                    case let code?:
                        otherStatus += 1
                        firstOther = firstOther ?? "\(code): \(callStatus!.statusMessage)"
                    case nil where socket.sawConnectionStatus: break
                    case nil: if socket.peerClosed { closedUntold += 1 } else { hung += 1 }
                    }
                }
                return (
                    hung + otherStatus + closedUntold,
                    "\(sockets.count) of \(uploads) connected, uploads: \(ended) ended DEADLINE_EXCEEDED, \(refused) refused "
                        + "RESOURCE_EXHAUSTED, \(reclaimed) connections closed to make room (with a status), \(hung) still open, "
                        + "\(closedUntold) closed untold"
                        + (firstOther.map { ", \(otherStatus) other statuses, the first \($0)" } ?? "")
                )
            },
            Attack(name: "job flood") {
                // As many import jobs as one connection keeps open (100), pipelined, each carrying the lexicon: the
                // replica accepts what its job bounds allow (--max-jobs-per-user) and refuses the rest at once.
                guard let lexicon = try? Data(contentsOf: dataDirectory.appendingPathComponent("lexikon-zvirat.csv"))
                else {
                    return (1, "no lexicon in \(dataDirectory.path)")
                }
                let request = ZooV1.ImportDataRequest(
                    files: [ZooV1.ImportFile(kind: .lexiconCsv, name: "lexikon-zvirat.csv", content: Array(lexicon))],
                    source: "abuse benchmark job flood")
                let payload = request.serializedBytes()
                let began = ContinuousClock.now
                guard let socket = AttackSocket(port: port, timeout: 60) else { return (1, "could not connect") }
                socket.write(
                    (1...jobs).flatMap {
                        Frames.request(
                            id: UInt64($0), method: ZooV1.Zoo.importData.path, payload: payload,
                            metadata: [authorization])
                    })
                var accepted = 0, refused = 0, other = 0, answered = 0, laneFull = 0
                var firstOther: String?, firstRefusal: String?
                while answered < jobs, let frame = socket.readFrame() {
                    guard frame.kind == .status, frame.callID != 0 else { continue }
                    answered += 1
                    if frame.statusMessage.contains("lane queue is full") { laneFull += 1 }
                    switch frame.statusCode {
                    case 0: accepted += 1
                    case StatusCode.resourceExhausted.rawValue:
                        refused += 1
                        firstRefusal = firstRefusal ?? frame.statusMessage
                    default:
                        other += 1
                        firstOther = firstOther ?? "\(frame.statusCode): \(frame.statusMessage)"
                    }
                }
                // The probes go on for the hold while the accepted jobs run.
                let left = hold - (ContinuousClock.now - began).seconds
                if left > 0 { Thread.sleep(forTimeInterval: left) }
                return (
                    jobs - answered + other,
                    "\(lexicon.count / 1024) KiB each; \(accepted) of \(jobs) jobs accepted, \(refused) RESOURCE_EXHAUSTED"
                        + (firstRefusal.map { " (\"\($0)\")" } ?? "") + ", \(laneFull) \"lane queue is full\""
                        + (firstOther.map { ", \(other) other, the first \($0)" } ?? "")
                )
            },
        ]
    }

    /// Under `--abuse-tls`, attacks on TLS itself: handshakes left half-way, a flood of full handshakes,
    /// plaintext and garbage sent to the TLS-only port, and clients without a certificate on the binary
    /// protocol. None may be served; the replica must stay as quick as under the others.
    func tlsAttacks(port: Int) -> [Attack] {
        let hold = holdSeconds
        let halfway = count(200, minimum: 10), floodThreads = 4, strangers = count(50, minimum: 5)
        let health = Frames.request(
            id: 1, method: RpcV1.Health.check.path, payload: RpcV1.HealthCheckRequest().serializedBytes())
        let contexts = AttackSocket.tls.withLock { $0! }
        let binary = contexts.binary
        return [
            Attack(name: "TLS handshakes held half-way") {
                // Each sends the first half of its ClientHello and nothing more for the hold.
                var sockets: [AttackSocket] = []
                for _ in 0..<halfway {
                    guard let socket = AttackSocket(port: port, timeout: 0.05, tls: binary, handshake: false),
                        let hello = socket.clientHello()
                    else { continue }
                    socket.sendRaw(Array(hello.prefix(hello.count / 2)))
                    sockets.append(socket)
                }
                Thread.sleep(forTimeInterval: hold)
                let served = sockets.filter { $0.readFrame() != nil }.count
                let closed = sockets.filter(\.peerClosed).count
                return (
                    served,
                    "\(sockets.count) connections sent half a ClientHello and stalled; \(closed) closed by the replica within the hold, \(served) served"
                )
            },
            Attack(name: "TLS handshake flood") {
                // Full mutual-TLS handshakes, each on a new connection closed at once, from four threads for the hold.
                let done = Tally(), failed = Tally()
                let end = ContinuousClock.now + .milliseconds(Int64(hold * 1000))
                let group = DispatchGroup()
                for _ in 0..<floodThreads {
                    group.enter()
                    Thread.detachNewThread {
                        defer { group.leave() }
                        while ContinuousClock.now < end {
                            if AttackSocket(port: port, timeout: 5, tls: binary) != nil {
                                done.value.add(1, ordering: .relaxed)
                            } else {
                                failed.value.add(1, ordering: .relaxed)
                            }
                        }
                    }
                }
                group.wait()
                let handshakes = done.value.load(ordering: .relaxed), failures = failed.value.load(ordering: .relaxed)
                return (
                    0,
                    String(
                        format:
                            "%d handshakes completed (%.0f a second), %d refused (the connection limit or the backlog)",
                        handshakes, Double(handshakes) / max(hold, 0.001), failures)
                )
            },
            Attack(name: "plaintext and garbage to the TLS port", repeats: true) {
                // Our frames in plaintext, and a TLS record header followed by garbage: closed, never served.
                var served = 0
                for index in 0..<strangers {
                    guard let socket = AttackSocket(port: port, timeout: 5, tls: nil) else { continue }
                    socket.sendRaw(
                        index % 2 == 0 ? health : [0x16, 0x03, 0x01, 0x00, 0x40] + [UInt8](repeating: 0x41, count: 64))
                    // A plaintext client is told why (an UNAUTHENTICATED status on call 0); only an answer to its call is service.
                    if let frame = socket.readFrame(), frame.callID == 1 { served += 1 }
                }
                return (
                    served,
                    "\(strangers) connections (plaintext health checks, garbage after a record header); \(served) served"
                )
            },
            Attack(name: "TLS without a client certificate", repeats: true) {
                // ALPN names the binary protocol, whose replicas require a certificate: refused, never served.
                var served = 0
                for _ in 0..<strangers {
                    guard let socket = AttackSocket(port: port, timeout: 5, tls: contexts.anonymous) else { continue }
                    socket.write(health)
                    if let frame = socket.readFrame(), frame.kind == .status, frame.callID == 1 { served += 1 }
                }
                return (
                    served, "\(strangers) connections offered no certificate on the binary protocol; \(served) served"
                )
            },
        ]
    }

    /// The same port's HTTP face (Connect and the zoo app's routes) under the same kinds of attack.
    func httpAttacks(port: Int) -> [Attack] {
        let hold = holdSeconds
        let get =
            "GET /menagerie.zoo.v1.Zoo/ExportGeoJSON?connect=v1&encoding=json&message=%7B%7D HTTP/1.1\r\nHost: zoo\r\n\r\n"
        let pipelined = count(1000, minimum: 50), unreadConnections = 4, unreadCalls = count(300, minimum: 20)
        let slow = count(200, minimum: 10), large = count(40, minimum: 4), malformed = count(50, minimum: 5)
        return [
            Attack(name: "HTTP pipelined GETs") {
                guard let socket = AttackSocket(port: port, timeout: 60, http: true) else {
                    return (1, "could not connect")
                }
                socket.write(Array(String(repeating: get, count: pipelined).utf8))
                let (answers, ok) = socket.readHTTPStatuses(until: pipelined)
                return (pipelined - answers, "\(answers) of \(pipelined) answered in order, \(ok) with 200")
            },
            Attack(name: "HTTP unread answers") {
                let sockets = (0..<unreadConnections).compactMap { _ in
                    AttackSocket(port: port, timeout: 10, http: true)
                }
                for socket in sockets { socket.write(Array(String(repeating: get, count: unreadCalls).utf8)) }
                Thread.sleep(forTimeInterval: hold)
                var answers = 0, lost = unreadConnections - sockets.count
                for socket in sockets {
                    let (seen, _) = socket.readHTTPStatuses(until: unreadCalls)
                    answers += seen
                    if seen < unreadCalls && !socket.peerClosed { lost += 1 }
                }
                return (lost, "\(answers) of \(unreadConnections * unreadCalls) answers read")
            },
            Attack(name: "HTTP slowloris headers") {
                let sockets = (0..<slow).compactMap { _ in AttackSocket(port: port, timeout: 1, http: true) }
                for socket in sockets {
                    socket.write(Array("POST /menagerie.zoo.v1.Zoo/SearchAnimals HTTP/1.1\r\nHost: zoo\r\n".utf8))
                }
                let end = Date().addingTimeInterval(hold)
                var bytes = 0
                while Date() < end {
                    for socket in sockets where socket.write(Array("X".utf8)) { bytes += 1 }
                    Thread.sleep(forTimeInterval: 0.2)
                }
                let closed = sockets.filter {
                    $0.write(Array("X".utf8)) == false || $0.readHTTPStatuses(until: 1).answers == 1
                }.count
                return (
                    0,
                    "\(sockets.count) clients sent \(bytes) header bytes, one at a time; \(closed) closed or answered"
                )
            },
            Attack(name: "HTTP almost complete 60 MiB bodies") {
                let size = 60 << 20
                let sockets = (0..<large).compactMap { _ in
                    AttackSocket(port: port, timeout: 0.2, sendTimeout: 5, http: true)
                }
                let done = Tally()
                let group = DispatchGroup()
                for socket in sockets {
                    group.enter()
                    Thread.detachNewThread {
                        defer { group.leave() }
                        let head =
                            "POST /menagerie.zoo.v1.Zoo/SearchAnimals HTTP/1.1\r\nHost: zoo\r\nContent-Type: application/proto\r\nContent-Length: \(size)\r\n\r\n"
                        guard socket.write(Array(head.utf8)) else { return }
                        let chunk = [UInt8](repeating: 0, count: 1 << 20)
                        var sent = 0
                        while sent + chunk.count < size - 1024 {
                            guard socket.write(chunk) else { return }
                            sent += chunk.count
                        }
                        done.value.add(1, ordering: .relaxed)
                    }
                }
                group.wait()
                Thread.sleep(forTimeInterval: hold)
                let refused = sockets.filter { $0.readHTTPStatuses(until: 1).answers == 1 }.count
                return (
                    0,
                    "\(sockets.count) connections, \(done.value.load(ordering: .relaxed)) sent all but the last KiB, \(refused) answered (503/413) before the end"
                )
            },
            Attack(name: "HTTP malformed requests", repeats: true) {
                let forms = [
                    "GET / HTTP/1.1\nHost: zoo\n\n",  // bare LF
                    "GET / HTTP/1.1\r\nHost: zoo\r\nHost: other\r\n\r\n",  // two Hosts
                    "POST /x HTTP/1.1\r\nHost: zoo\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello",
                    "POST /x HTTP/1.1\r\nHost: zoo\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
                    "GET / HTTP/1.1\r\nHost : zoo\r\n\r\n",  // space before the colon
                ]
                var lost = 0
                for index in 0..<malformed {
                    guard let socket = AttackSocket(port: port, timeout: 5, http: true) else {
                        lost += 1
                        continue
                    }
                    socket.write(Array(forms[index % forms.count].utf8))
                    if socket.readHTTPStatuses(until: 1).answers != 1 { lost += 1 }
                }
                return (lost, "\(malformed) malformed requests each expected to get a 4xx and a close")
            },
        ]
    }

    // MARK: Helpers

    /// From the replica's Stats service: the exports it answered so far, whatever their status (0 when
    /// it does not say), and its event loop's turns.
    static func serverFigures(client: RPCClient) async -> (exports: Int, loop: LoopFigures?) {
        let stats = try? await client.unary(
            RpcV1.Stats.getStats, RpcV1.GetStatsRequest(), options: CallOptions(timeout: .seconds(10)))
        let exports = Int(stats?.methods.first { $0.path == ZooV1.Zoo.exportGeoJSON.path }?.calls ?? 0)
        return (
            exports,
            stats?.loop.map { loop in
                var figures = LoopFigures()
                figures.turns = loop.turns
                figures.longestMilliseconds = loop.longestTurnMs
                figures.turnsOver = [loop.turnsOver1ms, loop.turnsOver10ms, loop.turnsOver100ms]
                return figures
            }
        )
    }

    /// Runs blocking work on a thread of its own (not the cooperative pool).
    static func onThread<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            Thread.detachNewThread { continuation.resume(returning: body()) }
        }
    }

    static func freePort() throws -> Int {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(descriptor) }
        var address = AttackSocket.address("127.0.0.1", port: 0)
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, length) == 0 && getsockname(descriptor, $0, &length) == 0
            }
        }
        guard bound else { throw POSIXError(.EADDRINUSE) }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}

/// CPU time of a process's threads, from /proc/PID/task/*/stat, to tell the event loop's share from
/// the workers'.
struct ThreadCPU {
    /// Seconds of user + system time by thread id, with the thread's name.
    var threads: [Int: (name: String, seconds: Double)] = [:]
    /// Seconds each thread waited on a run queue, runnable but not running (/proc schedstat): what
    /// other threads of the machine, the attacker's among them, kept it from its CPU.
    var waited: [Int: Double] = [:]

    static func read(_ pid: Int32) -> ThreadCPU {
        var result = ThreadCPU()
        let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))
        let directory = "/proc/\(pid)/task"
        for tid in (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? [] {
            guard let stat = try? String(contentsOfFile: "\(directory)/\(tid)/stat", encoding: .utf8),
                let open = stat.firstIndex(of: "("), let close = stat.lastIndex(of: ")")
            else { continue }
            let name = String(stat[stat.index(after: open)..<close])
            // After the name: state is field 3; utime and stime are fields 14 and 15.
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]), let id = Int(tid)
            else { continue }
            result.threads[id] = (name, (user + system) / ticks)
            if let schedstat = try? String(contentsOfFile: "\(directory)/\(tid)/schedstat", encoding: .utf8),
                let nanoseconds = schedstat.split(separator: " ").dropFirst().first.flatMap({ Double($0) })
            {
                result.waited[id] = nanoseconds / 1e9
            }
        }
        return result
    }

    /// The time each thread used since `earlier` (threads that started meanwhile count from zero).
    func since(_ earlier: ThreadCPU) -> ThreadCPU {
        var result = ThreadCPU()
        for (id, thread) in threads {
            let same = earlier.threads[id]?.name == thread.name
            result.threads[id] = (thread.name, thread.seconds - (same ? earlier.threads[id]!.seconds : 0))
            result.waited[id] = (waited[id] ?? 0) - (same ? earlier.waited[id] ?? 0 : 0)
        }
        return result
    }

    var total: Double { threads.values.reduce(0) { $0 + $1.seconds } }

    /// Seconds the threads named `name` (and `name` with a number: the replica's other loops) waited on a run queue, summed.
    func waited(named name: String) -> Double {
        threads.filter {
            $0.value.name == name
                || ($0.value.name.hasPrefix(name) && $0.value.name.dropFirst(name.count).allSatisfy(\.isNumber))
        }.keys.reduce(0) { $0 + (waited[$1] ?? 0) }
    }

    /// CPU seconds the whole machine has been busy (all cores, /proc/stat), and those the hypervisor
    /// gave to other machines while this one wanted to run (steal), to tell how much others took
    /// during an attack on a shared machine.
    static func machineBusySeconds() -> (busy: Double, steal: Double) {
        guard let stat = try? String(contentsOfFile: "/proc/stat", encoding: .utf8),
            let line = stat.split(separator: "\n").first, line.hasPrefix("cpu ")
        else { return (0, 0) }
        let ticks = line.split(separator: " ").dropFirst().compactMap { Double($0) }
        guard ticks.count >= 8 else { return (0, 0) }
        let hz = Double(sysconf(Int32(_SC_CLK_TCK)))
        // user nice system idle iowait irq softirq steal: busy is all but idle, iowait and steal.
        return ((ticks[0] + ticks[1] + ticks[2] + ticks[5] + ticks[6]) / hz, ticks[7] / hz)
    }

    /// Seconds by thread name, most first, with how many threads had that name.
    var byName: [(name: String, threads: Int, seconds: Double)] {
        Dictionary(grouping: threads.values, by: \.name)
            .map { (name: $0.key, threads: $0.value.count, seconds: $0.value.reduce(0) { $0 + $1.seconds }) }
            .sorted { $0.seconds > $1.seconds }
    }

    static func describe(_ groups: [(name: String, threads: Int, seconds: Double)]) -> String {
        groups.filter { $0.seconds >= 0.005 }
            .map { $0.name + ($0.threads > 1 ? "×\($0.threads)" : "") + String(format: " %.2f", $0.seconds) }
            .joined(separator: ", ")
    }
}

/// A count shared by threads.
final class Tally: Sendable {
    let value = Atomic<Int>(0)
}

/// Peak and current resident memory of a process, from /proc.
enum Memory {
    static func read(_ pid: Int32) -> (rss: Int, peak: Int) {
        let status = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
        func kib(_ key: String) -> Int {
            guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix(key + ":") }) else { return 0 }
            return (Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0) * 1024
        }
        return (kib("VmRSS"), kib("VmHWM"))
    }

    /// Resets VmHWM to the current RSS (`echo 5 > /proc/PID/clear_refs`).
    static func resetPeak(_ pid: Int32) {
        try? "5".write(toFile: "/proc/\(pid)/clear_refs", atomically: false, encoding: .utf8)
    }

    static func mib(_ bytes: Int) -> String { String(format: "%.0f MiB", Double(bytes) / Double(1 << 20)) }
}

/// A health check on a new connection every 50 ms (so a client that connects now is measured, as
/// `gateway probe` would be) and a search through a long-lived client every 50 ms, until stopped.
final class Probes: @unchecked Sendable {
    struct Figures {
        var samples: [Double] = []
        /// The slowest sample and when it began, in seconds after the probes started.
        var slowest: (took: Double, at: Double)?
        mutating func add(_ took: Double, at: Double) {
            samples.append(took)
            if took > slowest?.took ?? -1 { slowest = (took, at) }
        }
        var failures = 0
        /// Why the first failed probe failed.
        var firstFailure: String?
        var p50: Double { samples.isEmpty ? .infinity : samples.sorted()[(samples.count - 1) / 2] }
        /// The 99th percentile (nearest rank), which with a few dozen samples is one of the largest.
        var p99: Double { quantile(0.99) }
        var p95: Double { quantile(0.95) }
        /// Nearest rank: with the ~60 probes of a 3-second hold, p99 is the largest and p95 the third largest.
        func quantile(_ q: Double) -> Double {
            samples.isEmpty
                ? .infinity : samples.sorted()[Swift.max(0, Int((Double(samples.count) * q).rounded(.up)) - 1)]
        }
        var max: Double { samples.max() ?? .infinity }
    }

    let port: Int
    let client: RPCClient
    private let stopped = Atomic<Bool>(false)
    private let health = Mutex(Figures())
    private let search = Mutex(Figures())
    private var healthThread: Task<Void, Never>?
    private var searchTask: Task<Void, Never>?

    init(port: Int, client: RPCClient) {
        self.port = port
        self.client = client
    }

    /// When the probes started.
    private(set) var started = ContinuousClock.now

    func start() {
        started = .now
        healthThread = Task { [self] in
            await AbuseBenchmark.onThread { [self] in
                while !stopped.load(ordering: .relaxed) {
                    let began = ContinuousClock.now
                    let ok = Probe.health(port: port) == 0
                    let took = (ContinuousClock.now - began).seconds
                    let at = (began - started).seconds
                    health.withLock { if ok { $0.add(took, at: at) } else { $0.failures += 1 } }
                    usleep(50_000)
                }
            }
        }
        searchTask = Task { [self] in
            while !stopped.load(ordering: .relaxed) {
                let began = ContinuousClock.now
                do {
                    _ = try await client.unary(
                        ZooV1.Zoo.searchAnimals, ZooV1.SearchAnimalsRequest(text: "zel"),
                        options: CallOptions(timeout: .seconds(10)))
                    let took = (ContinuousClock.now - began).seconds
                    search.withLock { $0.add(took, at: (began - started).seconds) }
                } catch {
                    search.withLock {
                        $0.failures += 1
                        $0.firstFailure = $0.firstFailure ?? "\(error)"
                    }
                }
                try? await Task.sleep(for: .milliseconds(50))
            }
        }
    }

    func stop() async -> (health: Figures, search: Figures) {
        stopped.store(true, ordering: .relaxed)
        await healthThread?.value
        await searchTask?.value
        return (health.withLock { $0 }, search.withLock { $0 })
    }
}

enum Probe {
    /// A health check on a new connection: the status code, or nil when it got no answer within 5 s.
    static func health(port: Int) -> UInt32? {
        guard let socket = AttackSocket(port: port, timeout: 5) else { return nil }
        socket.write(
            Frames.request(
                id: 1, method: RpcV1.Health.check.path, payload: RpcV1.HealthCheckRequest().serializedBytes()))
        return socket.readFrame().map(\.statusCode)
    }
}

/// Frames written by hand, as a hostile client writes them.
enum Frames {
    static let marker = UInt8(ascii: "~")

    static func request(id: UInt64, method: String, payload: [UInt8] = [], metadata: [RpcV1.MetadataEntry] = [])
        -> [UInt8]
    {
        FrameCodec.encode(
            RpcV1.Frame(
                callID: id, kind: .request, method: method, metadata: metadata, hasPayload: true, payload: payload
            ).serializedBytes())
    }

    /// The 5-byte header of a frame of `length` bytes (flag byte 0, big-endian length).
    static func header(length: Int) -> [UInt8] {
        [0, UInt8(length >> 24 & 0xFF), UInt8(length >> 16 & 0xFF), UInt8(length >> 8 & 0xFF), UInt8(length & 0xFF)]
    }

    /// Our encoder cannot write a NUL into a string (protobuf-c's are C strings): `~` becomes one after.
    static func withNUL(_ bytes: [UInt8]) -> [UInt8] { bytes.map { $0 == marker ? 0 : $0 } }

    static func varint(_ value: UInt64) -> [UInt8] {
        var value = value, bytes: [UInt8] = []
        repeat {
            bytes.append(UInt8(value & 0x7F) | (value > 0x7F ? 0x80 : 0))
            value >>= 7
        } while value > 0
        return bytes
    }
}

/// A blocking TCP socket to 127.0.0.1 from a chosen loopback address, speaking raw bytes.
final class AttackSocket: @unchecked Sendable {
    private let descriptor: Int32
    private let decoder = FrameDecoder(maxFrameSize: 64 << 20)
    private var closed = false
    /// Whether a STATUS frame with call id 0 (the connection's last word) arrived.
    private(set) var sawConnectionStatus = false
    /// Under `--abuse-tls`: the session every byte goes through once the handshake is done.
    private var session: TLSSession?

    /// Under `--abuse-tls`, what attackers' sockets handshake with: the binary protocol's context (a
    /// client certificate, ALPN `menagerie`) and HTTP's (no certificate, ALPN `http/1.1`); nil: plaintext.
    static let tls = Mutex<TLSContexts?>(nil)

    struct TLSContexts: Sendable {
        var binary: TLSContext
        var http: TLSContext
        /// The binary protocol's ALPN without a client certificate (a stranger).
        var anonymous: TLSContext
    }

    /// Connects (and under `--abuse-tls` completes a TLS handshake, allowing it 10 s whatever `timeout`
    /// says, so that the attack that follows is the one measured); reads give up after `timeout` seconds,
    /// sends after `sendTimeout` (default: the same). `http`: the socket speaks HTTP/1.1 (its ALPN under TLS).
    convenience init?(
        port: Int, from source: String = "127.0.0.1", timeout: Double, sendTimeout: Double? = nil, http: Bool = false
    ) {
        self.init(
            port: port, from: source, timeout: timeout, sendTimeout: sendTimeout,
            tls: Self.tls.withLock { $0.map { http ? $0.http : $0.binary } })
    }

    /// Connects, speaking TLS with `tls` when given (no handshake when `handshake` is false: the attack
    /// drives it), plaintext otherwise.
    init?(
        port: Int, from source: String = "127.0.0.1", timeout: Double, sendTimeout: Double? = nil, tls: TLSContext?,
        handshake: Bool = true
    ) {
        descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { return nil }
        var local = Self.address(source, port: 0)
        var remote = Self.address("127.0.0.1", port: port)
        let size = socklen_t(MemoryLayout<sockaddr_in>.size)
        let connected = withUnsafePointer(to: &local) { local in
            withUnsafePointer(to: &remote) { remote in
                local.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, size) } == 0
                    && remote.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, size) } == 0
            }
        }
        guard connected else {
            close(descriptor)
            return nil
        }
        func interval(_ seconds: Double) -> timeval {
            timeval(tv_sec: Int(seconds), tv_usec: Int((seconds - seconds.rounded(.down)) * 1e6))
        }
        var receive = interval(timeout), sending = interval(sendTimeout ?? timeout)
        if let tls {
            guard let session = try? TLSSession(context: tls, serverName: "127.0.0.1") else { return nil }
            self.session = session
            if handshake {
                var patient = interval(max(timeout, 10))
                setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &patient, socklen_t(MemoryLayout<timeval>.size))
                setsockopt(descriptor, SOL_SOCKET, SO_SNDTIMEO, &patient, socklen_t(MemoryLayout<timeval>.size))
                guard completeHandshake() else { return nil }
            }
        }
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &receive, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(descriptor, SOL_SOCKET, SO_SNDTIMEO, &sending, socklen_t(MemoryLayout<timeval>.size))
    }

    /// Runs the TLS handshake to its end over the blocking socket; false when it failed or the peer left.
    func completeHandshake() -> Bool {
        guard let session else { return true }
        var buffer = [UInt8](repeating: 0, count: 1 << 14)
        while true {
            let progress = try? session.handshake()
            guard flushCiphertext(), let progress else { return false }
            if progress == .established { return true }
            let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            guard count > 0 else { return false }
            buffer.withUnsafeBytes { session.feed(UnsafeRawBufferPointer(rebasing: $0[0..<count])) }
        }
    }

    /// The ClientHello this socket's session would send, not sent (an attack sends what it likes of it).
    func clientHello() -> [UInt8]? {
        guard let session, (try? session.handshake()) == .wantsMore else { return nil }
        var hello: [UInt8] = [], chunk = [UInt8](repeating: 0, count: 1 << 14)
        while session.pendingCiphertext > 0 {
            let count = chunk.withUnsafeMutableBytes { session.drainCiphertext(into: $0) }
            guard count > 0 else { break }
            hello += chunk[0..<count]
        }
        return hello
    }

    /// Sends what the TLS session has made for the peer.
    private func flushCiphertext() -> Bool {
        guard let session else { return true }
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        while session.pendingCiphertext > 0 {
            let count = chunk.withUnsafeMutableBytes { session.drainCiphertext(into: $0) }
            guard count > 0 else { break }
            guard sendRaw(Array(chunk[0..<count])) else { return false }
        }
        return true
    }

    /// Sends bytes as they are, TLS or not (a hostile client's bytes before or instead of a handshake).
    @discardableResult
    func sendRaw(_ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes.withUnsafeBytes {
                send(descriptor, $0.baseAddress! + offset, $0.count - offset, Int32(MSG_NOSIGNAL))
            }
            if sent <= 0 { return false }
            offset += sent
        }
        return true
    }

    /// Reads into `buffer` what the peer sent (decrypted under TLS): the count, 0 when the peer closed,
    /// negative (errno set) when the read failed or timed out.
    private func receive(into buffer: inout [UInt8]) -> Int {
        guard let session else {
            return buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
        }
        var ciphertext = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            var count = 0, progress = TLSSession.Progress.wantsMore, failed = false
            buffer.withUnsafeMutableBytes { buffer in
                do {
                    (count, progress) = try session.read(into: buffer)
                } catch {
                    failed = true
                }
            }
            if failed { return 0 }  // an alert: the peer ended the session
            if count > 0 { return count }
            if progress == .closed { return 0 }
            let received = ciphertext.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            if received <= 0 { return received }
            ciphertext.withUnsafeBytes { session.feed(UnsafeRawBufferPointer(rebasing: $0[0..<received])) }
        }
    }

    deinit { close(descriptor) }

    static func address(_ host: String, port: Int) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr(host)
        return address
    }

    /// Sends all of `bytes` (in one TLS record's worth of writes under TLS); false once the peer has
    /// closed (or the send timed out).
    @discardableResult
    func write(_ bytes: [UInt8]) -> Bool {
        guard let session else { return sendRaw(bytes) }
        var failed = false
        bytes.withUnsafeBytes { bytes in
            do { try session.write(bytes) } catch { failed = true }
        }
        guard !failed else { return false }
        return flushCiphertext()
    }

    /// The next frame; nil when the peer closed or the receive timeout passed.
    func readFrame() -> RpcV1.Frame? {
        while true {
            if let envelope = try? decoder.next() {
                guard let frame = try? RpcV1.Frame(serializedBytes: envelope) else { return nil }
                if frame.callID == 0 && frame.kind == .status { sawConnectionStatus = true }
                return frame
            }
            guard !closed else { return nil }
            var buffer = [UInt8](repeating: 0, count: 1 << 16)
            let count = receive(into: &buffer)
            if count <= 0 {
                if count == 0 || errno != EAGAIN { closed = true }
                if count < 0 && errno == EAGAIN { return nil }
                continue
            }
            decoder.append(Array(buffer[0..<count]))
        }
    }

    /// Whether the peer closed the connection (seen by a read).
    var peerClosed: Bool { closed }

    /// Reads HTTP responses until `count` came whole, the peer closed or the receive timeout passed: how many
    /// came, and how many of them were 200. Each response is parsed (status line, head, then a body by
    /// Content-Length or chunked) so a body that mentions "HTTP/1.1 " — a 400 explaining that "an HTTP/1.1
    /// request needs exactly one Host field" — is not counted as a second answer (it was: the malformed-requests
    /// attack reported every such refusal as lost).
    func readHTTPStatuses(until count: Int) -> (answers: Int, ok: Int) {
        var answers = 0, ok = 0
        var bytes: [UInt8] = []
        var offset = 0
        while true {
            while answers < count, let (status, length) = Self.httpResponse(in: bytes, from: offset) {
                answers += 1
                if status == 200 { ok += 1 }
                offset += length
            }
            if answers >= count || closed { break }
            var buffer = [UInt8](repeating: 0, count: 1 << 16)
            let received = receive(into: &buffer)
            if received <= 0 {
                if received == 0 || errno != EAGAIN { closed = true }
                break
            }
            bytes += buffer[0..<received]
        }
        return (answers, ok)
    }

    /// The status and length of the whole response starting at `offset`, nil until it has all come. A response
    /// with neither Content-Length nor chunked encoding counts as having no body.
    static func httpResponse(in bytes: [UInt8], from offset: Int) -> (status: Int, length: Int)? {
        let end = Array("\r\n\r\n".utf8)
        guard bytes.count - offset >= 12,
            let headEnd = (offset...(bytes.count - end.count)).first(where: {
                bytes[$0..<$0 + end.count].elementsEqual(end)
            })
        else { return nil }
        let head = String(decoding: bytes[offset..<headEnd], as: UTF8.self)
        let lines = head.split(separator: "\r\n", omittingEmptySubsequences: false)
        guard let statusLine = lines.first, statusLine.hasPrefix("HTTP/1."),
            let status = Int(statusLine.dropFirst(9).prefix(3))
        else { return (0, bytes.count - offset) }
        var contentLength = 0, chunked = false
        for line in lines.dropFirst() {
            let parts = line.split(separator: ":", maxSplits: 1)
            guard parts.count == 2 else { continue }
            let name = parts[0].lowercased(), value = parts[1].trimmingCharacters(in: .whitespaces)
            if name == "content-length" { contentLength = Int(value) ?? 0 }
            if name == "transfer-encoding" && value.lowercased().contains("chunked") { chunked = true }
        }
        var bodyEnd = headEnd + end.count
        if chunked {
            // Chunks: size in hex, CRLF, data, CRLF; a zero size and a blank line end it.
            while true {
                guard
                    let lineEnd = (bodyEnd..<max(bodyEnd, bytes.count - 1)).first(where: {
                        bytes[$0] == 13 && bytes[$0 + 1] == 10
                    })
                else { return nil }
                let sizeText =
                    String(decoding: bytes[bodyEnd..<lineEnd], as: UTF8.self).split(separator: ";").first ?? ""
                guard let size = Int(sizeText.trimmingCharacters(in: .whitespaces), radix: 16) else {
                    return (status, bytes.count - offset)
                }
                bodyEnd = lineEnd + 2 + size + 2
                guard bodyEnd <= bytes.count else { return nil }
                if size == 0 { break }
            }
        } else {
            bodyEnd += contentLength
            guard bodyEnd <= bytes.count else { return nil }
        }
        return (status, bodyEnd - offset)
    }

    /// Reads what came (until the timeout or the close); the code of the call-id-0 STATUS, if one came.
    func drainForConnectionStatus() -> UInt32? {
        while let frame = readFrame() {
            if frame.callID == 0 && frame.kind == .status { return frame.statusCode }
        }
        return nil
    }
}
