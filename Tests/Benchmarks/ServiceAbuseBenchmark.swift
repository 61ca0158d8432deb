import Base
import ClassificationAPI
import Foundation
import HTTP
import HealthAPI
import OCRAPI
import RPC
import RPCWire
import Schema
import Synchronization
import Transport
import ZooAPI

/// Issue 24's attacks on what the zoo does not hold — OCR's batch uploads, classification's model
/// imports, health's long answers — each against a real replica of its own service (the executable
/// built beside this one, on a free loopback port, with a small `--memory-budget`). Per attack it
/// prints whether the replica lived, the health check's and a quick call's latency meanwhile, the
/// peak RSS (VmHWM) beside the replica's unloaded RSS plus its budget and the slack its lanes may
/// build outside it, and whether what was stored before the attack is all still there.
struct ServiceAbuseBenchmark {
    /// Multiplies the attacks' counts (1 = the issue's: six 400 MiB uploads, three 2 GiB bombs, 60 + 40 readers that never read).
    let scale: Double
    /// Seconds each attack holds its calls open (at least the budget's patience, so that waiting uploads meet their refusal).
    let holdSeconds: Double
    /// Runs only the attacks whose name contains one of these (`--abuse-only`); nil: all of them.
    var only: [String]? = nil

    static let budgetMiB = 64
    /// What a replica may hold beside its budget: pages and images its lane's threads are building at once, and the
    /// allocator's slack (UnreadStreamsTests allows the same).
    static let slackMiB = 112
    static let healthGoal = 0.100

    /// Calls as the replica's admin, waiting at most `seconds`.
    static func admin(_ seconds: Int64 = 120) -> CallOptions {
        CallOptions(timeout: .seconds(seconds), metadata: ["authorization": "Bearer \(AbuseBenchmark.adminToken)"])
    }

    func count(_ full: Int, minimum: Int = 1) -> Int { max(minimum, Int((Double(full) * scale).rounded())) }

    /// One attack on one service.
    struct Target: Sendable {
        let name: String
        /// The service's executable (beside the benchmark).
        let executable: String
        /// Stores what must survive the attack; returns the check run after it (nil: all there; else what is missing).
        let prepare: @Sendable (RPCClient) async throws -> @Sendable (RPCClient) async -> String?
        /// A quick call of the service, probed during the attack beside the health check.
        let quick: @Sendable (RPCClient) async throws -> Void
        /// The attack itself: the calls that got no answer or a wrong one, and a note.
        let run: @Sendable (_ port: Int) async -> (lost: Int, note: String)
    }

    func run() async throws {
        let targets = [
            ocrUploads(), classificationBombs(), healthUnreadStreams(),
            compressedBodies(executable: "zoo", method: ZooV1.Zoo.searchAnimals.path, bodies: count(20, minimum: 4)),
            compressedBodies(
                executable: "health", method: HealthV1.Health.addSamples.path, bodies: count(6, minimum: 2)),
            compressedBodies(
                executable: "zoo", method: ZooV1.Zoo.searchAnimals.path, bodies: count(4, minimum: 2), variant: .plain),
            compressedBodies(
                executable: "health", method: HealthV1.Health.push.path, bodies: count(6, minimum: 2),
                variant: .streamed),
            compressedBodies(
                executable: "health", method: HealthV1.Health.push.path, bodies: count(6, minimum: 2),
                variant: .streamed, token: true),
        ]
        .filter { target in only.map { names in names.contains { target.name.contains($0) } } ?? true }
        guard !targets.isEmpty else { return }
        print(
            "Service abuse benchmark: issue 24's attacks on OCR, classification and health, each replica with --memory-budget "
                + "\(Self.budgetMiB); RSS goal: its unloaded RSS + \(Self.budgetMiB) MiB budget + \(Self.slackMiB) MiB its lanes may build "
                + "beside it; scale \(scale), at least \(holdSeconds) s per attack")
        var rows: [[String]] = [], failures: [String] = []
        for target in targets {
            let row = try await attack(target)
            if let missed = row.missed { failures.append("\(target.name): \(missed) not met") }
            rows.append(row.cells)
        }
        printTable(
            [
                "attack", "alive", "health p50/max ms", "quick call p50/max ms", "peak RSS (goal)", "lost", "kept",
                "verdict", "notes",
            ], rows)
        print(
            failures.isEmpty
                ? "every goal met under every service attack"
                : "goals not met:\n  " + failures.joined(separator: "\n  "))
    }

    private func attack(_ target: Target) async throws -> (cells: [String], missed: String?) {
        let binary = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
            .deletingLastPathComponent()
            .appendingPathComponent(target.executable)
        guard FileManager.default.isExecutableFile(atPath: binary.path) else {
            return (
                [
                    target.name,
                    "no \(target.executable) at \(binary.path): swift build [-c release] --product \(target.executable)",
                ]
                    + Array(repeating: "", count: 7), nil
            )
        }
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent(
            "service-abuse-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: scratch) }
        let port = try AbuseBenchmark.freePort()
        let replica = Process()
        replica.executableURL = binary
        replica.arguments = [
            "--port", "\(port)", "--data-dir", scratch.appendingPathComponent("data").path, "--log-level", "warning",
            "--memory-budget", "\(Self.budgetMiB)", "--loops", "\(serverLoops)",
        ]
        var environment = ProcessInfo.processInfo.environment
        // The attacker calls as the stack's admin (the imports it sends are admin-only): a user with a token is let as far.
        environment["MENAGERIE_ADMIN_TOKEN"] = AbuseBenchmark.adminToken
        replica.environment = environment
        let log = scratch.appendingPathComponent("replica.log")
        _ = FileManager.default.createFile(atPath: log.path, contents: nil)
        let logHandle = try FileHandle(forWritingTo: log)
        replica.standardOutput = logHandle
        replica.standardError = logHandle
        replica.standardInput = FileHandle.nullDevice
        try replica.run()
        let pid = replica.processIdentifier
        defer {
            if replica.isRunning { kill(pid, SIGKILL) }
            replica.waitUntilExit()
        }
        let started = ContinuousClock.now
        while Probe.health(port: port) == nil {
            guard replica.isRunning, ContinuousClock.now - started < .seconds(300) else {
                let text = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
                return ([target.name, "did not start: " + text.suffix(300)] + Array(repeating: "", count: 7), "start")
            }
            try await Task.sleep(for: .milliseconds(200))
        }
        let client = RPCClient(
            transports: [try TCPClientTransport(endpoint: "127.0.0.1:\(port)")], retry: .init(maxAttempts: 1))
        defer { client.close() }
        let check: @Sendable (RPCClient) async -> String?
        do { check = try await target.prepare(client) } catch {
            return (
                [target.name, "could not store what the attack must leave: \(error)"] + Array(repeating: "", count: 7),
                "prepare"
            )
        }
        try await Task.sleep(for: .seconds(1))
        let base = Memory.read(pid).rss
        let goal = base + (Self.budgetMiB + Self.slackMiB) << 20
        Memory.resetPeak(pid)
        let probes = ServiceProbes(port: port, client: client, quick: target.quick)
        probes.start()
        let began = ContinuousClock.now
        let outcome = await target.run(port)
        let took = (ContinuousClock.now - began).seconds
        let (health, quick) = await probes.stop()
        let peak = Memory.read(pid).peak
        let alive = replica.isRunning && kill(pid, 0) == 0
        let missing = alive ? await check(client) : "the replica died"
        let lost = outcome.lost + health.failures + quick.failures
        let verdicts = [
            ("alive", alive), ("health", health.max <= Self.healthGoal && health.failures == 0),
            ("quick calls", quick.failures == 0),
            ("RSS", peak <= goal), ("nothing lost", lost == 0 && missing == nil),
        ]
        let missed = verdicts.filter { !$0.1 }.map(\.0)
        func latency(_ figures: Probes.Figures) -> String {
            String(format: "%.1f / %.1f", figures.p50 * 1000, figures.max * 1000)
                + (figures.failures > 0 ? " (\(figures.failures) failed)" : "")
        }
        return (
            [
                target.name, alive ? "yes (pid \(pid))" : "NO", latency(health),
                latency(quick) + (quick.slowest.map { String(format: " (at +%.1f s)", $0.at) } ?? "")
                    + (quick.firstFailure.map { "; first failure: \($0)" } ?? ""),
                "\(Memory.mib(peak)) (≤ \(Memory.mib(goal)))", "\(lost)", missing ?? "all",
                missed.isEmpty ? "all met" : "NOT met: " + missed.joined(separator: ", "),
                String(format: "%.1f s; ", took) + outcome.note,
            ], missed.isEmpty ? nil : missed.joined(separator: ", ")
        )
    }

    /// How long an attack holds its calls: the hold, and at least the budget's patience and a little, so that a call
    /// waiting for room meets its refusal within the attack.
    var attackSeconds: Double { max(holdSeconds, MemoryBudget.patience.seconds + 2) }

    // MARK: The attacks

    /// Attack 3: never-finished OCR batch uploads of 400 MiB each. Past the budget a chunk waits for room (its stream
    /// unread, so flow control stops the client), then the call is refused RESOURCE_EXHAUSTED; the replica's RSS
    /// stays within its budget meanwhile (before: six took it from 204 to 2,827 MiB).
    func ocrUploads() -> Target {
        let uploads = count(6, minimum: 2), bytesEach = count(400, minimum: 8) << 20, seconds = attackSeconds
        return Target(name: "upload memory (ocr batches)", executable: "ocr") { client in
            let ocr = OcrV1.OCR.Client(wrapping: client)
            let kept = try await ocr.createTemplate(
                .init(
                    name: "kept through the abuse benchmark",
                    values: [
                        .init(
                            name: "Teplota", region: .init(x: 0.1, y: 0.1, width: 0.3, height: 0.1), shape: "#.#°C",
                            label: "T")
                    ]),
                options: Self.admin())
            let values = kept.template?.values.count ?? 0
            return { client in
                guard
                    let answer = try? await OcrV1.OCR.Client(wrapping: client).getTemplate(
                        .init(template: "kept through the abuse benchmark"), options: Self.admin())
                else { return "the template made before is gone" }
                return answer.template?.values.count == values ? nil : "the template made before changed"
            }
        } quick: { client in
            _ = try await OcrV1.OCR.Client(wrapping: client).listTemplates(.init(), options: Self.admin(10))
        } run: { port in
            // A real 100×100 PNG's bytes start each file (its header passes the pixel check), then zeros, never finished.
            let png = [UInt8](
                Data(
                    base64Encoded:
                        "iVBORw0KGgoAAAANSUhEUgAAAGQAAABkCAAAAABVicqIAAAAIUlEQVR4nO3BgQAAAADDoPlTX+EAVQEAAAAAAAAAAACPASd0AAEsXIkWAAAAAElFTkSuQmCC"
                )!)
            let sent = ByteCount()
            let outcomes = await withTaskGroup(of: String.self) { group -> [String] in
                for index in 0..<uploads {
                    group.addTask {
                        guard let transport = try? TCPClientTransport(endpoint: "127.0.0.1:\(port)") else {
                            return "no connection"
                        }
                        let rpc = RPCClient(transports: [transport], retry: .init(maxAttempts: 1))
                        defer { rpc.close() }
                        do {
                            _ = try await OcrV1.OCR.Client(wrapping: rpc).startBatchScan(
                                options: Self.admin(Int64(seconds) + 30)
                            ) { writer in
                                try await writer.send(
                                    .init(options: .init(), fileName: "display-\(index).png", chunk: png))
                                let zeros = [UInt8](repeating: 0, count: 1 << 20)
                                var written = png.count
                                while written < bytesEach {
                                    try await writer.send(.init(chunk: zeros))
                                    written += zeros.count
                                    sent.bytes.add(zeros.count, ordering: .relaxed)
                                }
                                try await Task.sleep(for: .seconds(seconds))
                                throw CancellationError()
                            }
                            return "finished (never sent its end)"
                        } catch let error as RPCError where error.code == .resourceExhausted {
                            return "refused RESOURCE_EXHAUSTED"
                        } catch is CancellationError {
                            return "left open until the attack ended"
                        } catch {
                            return "\(error)"
                        }
                    }
                }
                var outcomes: [String] = []
                for await outcome in group { outcomes.append(outcome) }
                return outcomes
            }
            let expected: Set = ["refused RESOURCE_EXHAUSTED", "left open until the attack ended"]
            let tally = Dictionary(grouping: outcomes, by: { $0 }).map { "\($0.value.count) \($0.key)" }.sorted()
            return (
                outcomes.filter { !expected.contains($0) }.count,
                "\(uploads) batch uploads of \(bytesEach >> 20) MiB, \(sent.bytes.load(ordering: .relaxed) >> 20) MiB sent in all: "
                    + tally.joined(separator: ", ")
            )
        }
    }

    /// Attack 4: TorchScript zip bombs (archive/data.pkl inflating to 2 GiB from ~2 MB), imported at once. Each must be
    /// refused INVALID_ARGUMENT from its declared sizes before libtorch inflates anything (before: three reached 4 GiB).
    func classificationBombs() -> Target {
        let bombs = count(3), inflated = 2 << 30, hold = holdSeconds
        let made = Mutex<[UInt8]?>(nil)
        return Target(name: "zip bombs (classification imports)", executable: "classification") { client in
            // before the attack: writing 2 GiB of zeros takes seconds
            made.withLock { $0 = Self.zipBomb(inflating: inflated) }
            let catalogue = ClassificationV1.Classification.Client(wrapping: client)
            let entry =
                #"[{"label": "kept", "name": "Kept through the abuse benchmark", "local_name": "Zachováno", "attributes": {}}]"#
            _ = try await catalogue.importCatalogue(.init(json: Array(entry.utf8)), options: Self.admin())
            return { client in
                let found = try? await ClassificationV1.Classification.Client(wrapping: client).searchCatalogue(
                    .init(query: "abuse benchmark"), options: Self.admin())
                return found?.entries.contains { $0.label == "kept" } == true ? nil : "the catalogue entry is gone"
            }
        } quick: { client in
            _ = try await ClassificationV1.Classification.Client(wrapping: client).listModels(
                .init(), options: Self.admin(10))
        } run: { port in
            guard let bomb = made.withLock({ $0 }) else { return (1, "could not write the bomb (python3's zipfile)") }
            // Rounds of `bombs` imports at once, for the hold, so that the probes measure the replica meanwhile.
            let began = ContinuousClock.now
            var outcomes: [String] = []
            repeat {
                outcomes += await withTaskGroup(of: String.self) { group -> [String] in
                    for index in 0..<bombs {
                        group.addTask {
                            guard let transport = try? TCPClientTransport(endpoint: "127.0.0.1:\(port)") else {
                                return "no connection"
                            }
                            let rpc = RPCClient(transports: [transport], retry: .init(maxAttempts: 1))
                            defer { rpc.close() }
                            do {
                                _ = try await ClassificationV1.Classification.Client(wrapping: rpc).importModel(
                                    options: Self.admin()
                                ) { writer in
                                    var offset = 0
                                    while offset < bomb.count {
                                        let end = min(bomb.count, offset + (1 << 20))
                                        try await writer.send(
                                            offset == 0
                                                ? .init(
                                                    name: "bomb-\(index)", format: .torchscript,
                                                    data: Array(bomb[offset..<end]), kind: .classifier,
                                                    labels: ["a", "b"], inputWidth: 8, inputHeight: 8)
                                                : .init(data: Array(bomb[offset..<end])))
                                        offset = end
                                    }
                                }
                                return "imported"
                            } catch let error as RPCError
                                where error.code == .invalidArgument && error.message.contains("zip bomb")
                            {
                                return "refused INVALID_ARGUMENT (zip bomb)"
                            } catch let error as RPCError
                                where error.code == .resourceExhausted && error.message.contains("zip bomb")
                            {
                                return "refused RESOURCE_EXHAUSTED (zip bomb)"
                            } catch {
                                return "\(error)"
                            }
                        }
                    }
                    var outcomes: [String] = []
                    for await outcome in group { outcomes.append(outcome) }
                    return outcomes
                }
            } while (ContinuousClock.now - began).seconds < hold
            let expected: Set = ["refused INVALID_ARGUMENT (zip bomb)", "refused RESOURCE_EXHAUSTED (zip bomb)"]
            let tally = Dictionary(grouping: outcomes, by: { $0 }).map { "\($0.value.count) \($0.key)" }.sorted()
            return (
                outcomes.filter { !expected.contains($0) }.count,
                "\(outcomes.count / bombs) rounds of \(bombs) imports at once of a \(bomb.count >> 10) KiB file inflating to \(inflated >> 30) GiB: "
                    + tally.joined(separator: ", ")
            )
        }
    }

    /// A TorchScript-shaped zip whose `archive/data.pkl` inflates to `bytes` zeros (python3's zipfile, deflated), or nil.
    static func zipBomb(inflating bytes: Int) -> [UInt8]? {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("bomb-\(UUID().uuidString).pt").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        let python = Process()
        python.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        python.arguments = [
            "-c",
            """
            import sys, zipfile
            with zipfile.ZipFile(sys.argv[1], "w", zipfile.ZIP_DEFLATED, compresslevel=9) as z:
                with z.open("archive/data.pkl", "w", force_zip64=True) as f:
                    block = bytes(64 << 20)
                    for _ in range(int(sys.argv[2]) // len(block)): f.write(block)
                z.writestr("archive/version", b"3\\n")
            """, path, "\(bytes)",
        ]
        guard (try? python.run()) != nil else { return nil }
        python.waitUntilExit()
        guard python.terminationStatus == 0, let data = FileManager.default.contents(atPath: path) else { return nil }
        return [UInt8](data)
    }

    /// Attack 5: server streams nobody reads — connections that ask for three `Pull`s of 10,000 samples a page and
    /// an `ExportCSV` and never read an answer, beside sockets that ask and never read at all. Each blocked stream must
    /// hold at most its window and what the budget lends (before: 69 → 1,064 MiB, 719 MiB after every client went).
    func healthUnreadStreams() -> Target {
        let samples = count(30_000, minimum: 10_000), connections = count(60, minimum: 6),
            unread = count(40, minimum: 4)
        let seconds = holdSeconds
        let token = Mutex("")
        return Target(name: "server streams nobody reads (health)", executable: "health") { client in
            let health = HealthV1.Health.Client(wrapping: client)
            let created = try await health.createUser(
                .init(name: "reader\(UInt32.random(in: 0...UInt32.max))"), options: Self.admin())
            token.withLock { $0 = created.token }
            let options = CallOptions(metadata: ["authorization": "Bearer \(created.token)"])
            let start = Int64(Date().timeIntervalSince1970 * 1000) - Int64(samples) * 60_000
            for first in stride(from: 0, to: samples, by: 10_000) {
                let page = (first..<min(samples, first + 10_000)).map { index in
                    HealthV1.Sample(
                        uuid: UUID().uuidString, type: "heartRate", value: Double(60 + index % 40), unit: "count/min",
                        startMs: start + Int64(index) * 60_000, endMs: start + Int64(index) * 60_000,
                        source: "Apple Watch")
                }
                _ = try await health.addSamples(.init(samples: page), options: options)
            }
            return { client in
                var pulled = 0
                do {
                    for try await page in HealthV1.Health.Client(wrapping: client).pull(
                        .init(pageSize: 10_000), options: options)
                    {
                        pulled += page.samples.count
                    }
                } catch { return "a reading client's Pull failed: \(error)" }
                return pulled == samples ? nil : "\(pulled) of \(samples) samples pulled"
            }
        } quick: { client in
            let options = CallOptions(
                timeout: .seconds(10), metadata: ["authorization": "Bearer \(token.withLock { $0 })"])
            _ = try await HealthV1.Health.Client(wrapping: client).getAccount(.init(), options: options)
        } run: { port in
            await AbuseBenchmark.onThread {
                let authorization = RpcV1.MetadataEntry(key: "authorization", value: "Bearer \(token.withLock { $0 })")
                let pull = HealthV1.PullRequest(pageSize: 10_000).serializedBytes()
                let export = HealthV1.ExportCSVRequest(type: "heartRate").serializedBytes()
                var sockets: [AttackSocket] = []
                for index in 0..<(connections + unread) {
                    guard let socket = AttackSocket(port: port, timeout: 1, sendTimeout: 5) else { continue }
                    var calls = (1...3).flatMap {
                        Frames.request(
                            id: UInt64($0), method: HealthV1.Health.pull.path, payload: pull, metadata: [authorization])
                    }
                    calls +=
                        index < connections
                        ? Frames.request(
                            id: 4, method: HealthV1.Health.exportCSV.path, payload: export, metadata: [authorization])
                        : Frames.request(
                            id: 4, method: HealthV1.Health.pull.path, payload: pull, metadata: [authorization])
                    socket.write(calls)
                    sockets.append(socket)
                }
                Thread.sleep(forTimeInterval: seconds)
                let connected = sockets.count
                sockets.removeAll()  // closed: the replica must give back what they held
                Thread.sleep(forTimeInterval: 1)
                return (
                    connections + unread - connected,
                    "\(samples) samples; \(connected) connections × (3 Pull of 10,000 a page + ExportCSV or a 4th Pull), none read, "
                        + "closed after \(Int(seconds)) s"
                )
            }
        }
    }
}

extension ServiceAbuseBenchmark {
    /// How attack 6 sends its bodies.
    enum BodyVariant: String, Sendable {
        /// A unary Connect call whose body is gzip (`Content-Encoding: gzip`).
        case gzip
        /// The same JSON uncompressed: 60 MiB on the wire, for a method whose requests are small.
        case plain
        /// A client stream (`application/connect+json`) of one gzip-compressed envelope (`Connect-Content-Encoding`).
        case streamed
    }

    /// Attack 6 (issue 37): POSTs of 61 KB gzip bodies that inflate to 60 MiB of valid JSON (`{`, spaces, `}`), all at
    /// once, over Connect's HTTP face, without a token unless `token`. On a method anyone may call (the zoo's
    /// SearchAnimals) they are inflated on workers within the method's limit and the budget; on one that needs a token
    /// (health's AddSamples) they are refused 401 before anything is inflated. Either way health checks keep their
    /// 100 ms (before: one loop turn of the zoo took 23.3 s and a health check waited 27 s; health's 401s came after an
    /// 8.5 s stall). Its variants: the JSON sent plain (four such bodies stalled the loop ~2 s), and as a client
    /// stream's compressed envelope, with and without a token (inflated by the stream's handler as it takes it).
    func compressedBodies(
        executable: String, method: String, bodies: Int, variant: BodyVariant = .gzip, token: Bool = false
    ) -> Target {
        let seconds = holdSeconds
        let name =
            "\(variant == .gzip ? "compressed" : variant.rawValue) JSON bodies (\(executable) \(method.split(separator: "/").last ?? "")"
            + "\(token ? ", admin" : variant == .gzip ? "" : ", no token"))"
        return Target(name: name, executable: executable) { _ in
            { _ in nil }
        } quick: { client in
            _ = try await client.unary(
                RpcV1.Reflection.listServices, RpcV1.ListServicesRequest(), options: CallOptions(timeout: .seconds(10)))
        } run: { port in
            await AbuseBenchmark.onThread {
                let json = [UInt8(ascii: "{")] + [UInt8](repeating: 0x20, count: 60 << 20) + [UInt8(ascii: "}")]
                let body: [UInt8]
                var head = "POST \(method) HTTP/1.1\r\nHost: a\r\n"
                switch variant {
                case .gzip:
                    body = Gzip.compress(json, level: 9)
                    head += "Content-Type: application/json\r\nContent-Encoding: gzip\r\n"
                case .plain:
                    body = json
                    head += "Content-Type: application/json\r\n"
                case .streamed:
                    let envelope = Gzip.compress(json, level: 9)
                    let length = UInt32(envelope.count)
                    body =
                        [
                            0x01, UInt8(length >> 24), UInt8(length >> 16 & 0xFF), UInt8(length >> 8 & 0xFF),
                            UInt8(length & 0xFF),
                        ] + envelope
                    head += "Content-Type: application/connect+json\r\nConnect-Content-Encoding: gzip\r\n"
                }
                if token { head += "Authorization: Bearer \(AbuseBenchmark.adminToken)\r\n" }
                head += "Content-Length: \(body.count)\r\n\r\n"
                let began = Date()
                var sockets: [AttackSocket] = []
                for _ in 0..<bodies {
                    guard let socket = AttackSocket(port: port, timeout: max(seconds, 30)) else { continue }
                    _ = socket.write(Array(head.utf8) + body)
                    sockets.append(socket)
                }
                var answered = 0
                for socket in sockets where socket.readHTTPStatuses(until: 1).answers == 1 { answered += 1 }
                return (
                    bodies - answered,
                    "\(bodies) bodies of \(body.count) B\(variant == .plain ? "" : " inflating to \(json.count >> 20) MiB"), "
                        + (token ? "the admin's token; " : "no token; ")
                        + String(format: "all answered within %.1f s", Date().timeIntervalSince(began))
                )
            }
        }
    }
}

/// Bytes counted from several tasks.
final class ByteCount: Sendable {
    let bytes = Atomic<Int>(0)
}

/// The health check (a new connection each time, as a load balancer's) and one quick call of the service, every 50 ms.
final class ServiceProbes: @unchecked Sendable {
    let port: Int
    let client: RPCClient
    let quick: @Sendable (RPCClient) async throws -> Void
    private let stopped = Atomic<Bool>(false)
    private let health = Mutex(Probes.Figures())
    private let calls = Mutex(Probes.Figures())
    private var tasks: [Task<Void, Never>] = []
    private let started = ContinuousClock.now

    init(port: Int, client: RPCClient, quick: @escaping @Sendable (RPCClient) async throws -> Void) {
        self.port = port
        self.client = client
        self.quick = quick
    }

    func start() {
        tasks.append(
            Task { [self] in
                await AbuseBenchmark.onThread { [self] in
                    while !stopped.load(ordering: .relaxed) {
                        let began = ContinuousClock.now
                        let ok = Probe.health(port: port) == 0
                        let took = (ContinuousClock.now - began).seconds
                        health.withLock {
                            if ok { $0.add(took, at: (began - started).seconds) } else { $0.failures += 1 }
                        }
                        usleep(50_000)
                    }
                }
            })
        tasks.append(
            Task { [self] in
                while !stopped.load(ordering: .relaxed) {
                    let began = ContinuousClock.now
                    do {
                        try await quick(client)
                        let took = (ContinuousClock.now - began).seconds
                        calls.withLock { $0.add(took, at: (began - started).seconds) }
                    } catch {
                        calls.withLock {
                            $0.failures += 1
                            $0.firstFailure = $0.firstFailure ?? "\(error)"
                        }
                    }
                    try? await Task.sleep(for: .milliseconds(50))
                }
            })
    }

    func stop() async -> (health: Probes.Figures, quick: Probes.Figures) {
        stopped.store(true, ordering: .relaxed)
        for task in tasks { await task.value }
        return (health.withLock { $0 }, calls.withLock { $0 })
    }
}
