import Foundation
import ZooCore

/// Issue 28's HTTP face against real peers: `GET /api/animals` (the zoo app's REST route, ~2.4 MB of JSON)
/// and a Connect JSON unary `SearchAnimals` from a real zoo replica (the `zoo` built beside this one), beside
/// the zoo app's own framework — FastAPI under uvicorn, serving the same bytes from memory — and nginx
/// serving them as static files, the floor. Load from `wrk` (keep-alive, no gzip: it sends no
/// Accept-Encoding), one thread pinned to core 0, the servers pinned to core 1 (on a machine with two or
/// more cores), each server with one process: one event loop against one uvicorn worker and one nginx worker.
///
/// What each sends: the zoo answers `GET /api/animals` and `SearchAnimals` from the answers its one answer cache kept
/// for the same request on the same data generation (`AnswerCache`, `ZooHTTP.answerCache`: on the loop, after the
/// guard, no task, no search, no transcoding), the kept bytes written from where they lie (a vectored write, no copy);
/// the first request of each 50 ms recheck goes to a worker, which answers the route from the cache after the check
/// (the catalogue is built once per data version) and runs the search again. FastAPI and nginx send bytes made once, before the run.
struct HTTPBenchmark {
    let secondsPerRun: Double
    let connectionCounts: [Int]

    /// The peers' tools: Debian's `wrk` and `nginx`, and a venv with FastAPI and uvicorn that
    /// `Tests/Benchmarks/peers/install-http-peers` makes (it installs the Debian packages too).
    static let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    static let venvPython = packageRoot.appendingPathComponent("compose/.cache/http-peers/bin/python").path
    static let installer = "Tests/Benchmarks/peers/install-http-peers"

    struct Result {
        var requestsPerSecond: Double
        var p99Milliseconds: Double
        var errors: Int
    }

    func run() async throws {
        let missing = [("/usr/bin/wrk", "wrk"), ("/usr/sbin/nginx", "nginx"), (Self.venvPython, "FastAPI's venv")]
            .filter { !FileManager.default.isExecutableFile(atPath: $0.0) }.map(\.1)
        guard missing.isEmpty else {
            print(
                "HTTP benchmark: skipped, missing \(missing.joined(separator: ", ")); run \(Self.installer) (as root) first"
            )
            return
        }
        guard let binary = zooExecutableBesideBenchmark(suite: "HTTP") else { return }
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("http-bench-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: scratch) }
        let twoCores = ProcessInfo.processInfo.activeProcessorCount >= 2
        let serverCPU = twoCores ? ["/usr/bin/taskset", "-c", "1"] : []

        // The zoo, loaded with the real data (else its sample data), on a core of its own.
        let data = scratch.appendingPathComponent("zoo")
        try FileManager.default.createDirectory(at: data, withIntermediateDirectories: true)
        let source =
            FileManager.default.fileExists(atPath: ZooBenchmark.realData.path)
            ? ZooBenchmark.realData : ZooDataSet.bundledSampleDirectory
        try ZooLibrary(path: data.appendingPathComponent("zoo.sqlite").path)
            .importFiles(ZooSourceFile.directory(source), source: source.path, trigger: .client)
        let zooPort = try AbuseBenchmark.freePort()
        // Pinned to one core, one event loop (as nginx's one worker and uvicorn's one process): a second loop thread
        // would only take turns with the first on that core.
        let loops = twoCores ? ["--loops", "1"] : []
        let zoo = try Self.start(
            "zoo",
            serverCPU + [binary.path, "--port", "\(zooPort)", "--data-dir", data.path, "--log-level", "warning"]
                + loops, log: scratch)
        defer { Self.stop(zoo) }
        guard await Self.waitAnswering(port: zooPort) else {
            print("HTTP benchmark: the zoo did not answer on port \(zooPort); its log is in \(scratch.path)")
            return
        }
        let search = #"{"text":"zel"}"#
        let animals = try await Self.fetch(["http://127.0.0.1:\(zooPort)/api/animals"])
        let searchAnswer = try await Self.fetch([
            "-X", "POST", "-H", "Content-Type: application/json", "--data", search,
            "http://127.0.0.1:\(zooPort)/menagerie.zoo.v1.Zoo/SearchAnimals",
        ])
        try Data(animals).write(to: scratch.appendingPathComponent("animals.json"))
        try Data(searchAnswer).write(to: scratch.appendingPathComponent("search.json"))

        // FastAPI under uvicorn (uvloop and httptools when installed), the same bytes from memory.
        let fastAPIPort = try AbuseBenchmark.freePort()
        try Self.fastAPIApp.write(to: scratch.appendingPathComponent("peer_app.py"), atomically: true, encoding: .utf8)
        let fastAPI = try Self.start(
            "fastapi",
            serverCPU + [
                Self.venvPython, "-m", "uvicorn", "peer_app:app", "--app-dir", scratch.path, "--host", "127.0.0.1",
                "--port", "\(fastAPIPort)", "--workers", "1", "--no-access-log", "--log-level", "warning",
            ],
            log: scratch, environment: ["PEER_DIR": scratch.path])
        defer { Self.stop(fastAPI) }
        // nginx, one worker, the same bytes as static files (a POST answered with the file, as a GET).
        let nginxPort = try AbuseBenchmark.freePort()
        let configuration = scratch.appendingPathComponent("nginx.conf")
        try Self.nginxConfiguration(port: nginxPort, root: scratch.path).write(
            to: configuration, atomically: true, encoding: .utf8)
        let nginx = try Self.start(
            "nginx", serverCPU + ["/usr/sbin/nginx", "-p", scratch.path, "-c", configuration.path], log: scratch)
        defer { Self.stop(nginx) }

        for (name, port) in [("FastAPI", fastAPIPort), ("nginx", nginxPort)] {
            guard await Self.waitAnswering(port: port) else {
                print("HTTP benchmark: \(name) did not answer on port \(port); logs in \(scratch.path)")
                return
            }
        }
        let checks = [
            (await Self.answer(["http://127.0.0.1:\(fastAPIPort)/api/animals"]), animals, "FastAPI /api/animals"),
            (await Self.answer(["http://127.0.0.1:\(nginxPort)/api/animals"]), animals, "nginx /api/animals"),
            (
                await Self.answer([
                    "-X", "POST", "--data", search, "http://127.0.0.1:\(nginxPort)/menagerie.zoo.v1.Zoo/SearchAnimals",
                ]), searchAnswer, "nginx search"
            ),
        ]
        for (got, expected, what) in checks where got != expected {
            print(
                "HTTP benchmark: \(what) does not send the zoo's bytes (\(got?.count ?? -1) of \(expected.count)); not run"
            )
            return
        }
        let post = scratch.appendingPathComponent("post.lua")
        try """
        wrk.method = "POST"
        wrk.body = '\(search)'
        wrk.headers["Content-Type"] = "application/json"
        """.write(to: post, atomically: true, encoding: .utf8)

        print(
            "HTTP benchmark: \(animals.count / 1024) KiB of /api/animals, \(searchAnswer.count) B of SearchAnimals from \(source.lastPathComponent), "
                + "\(secondsPerRun) s per run, wrk -t1 keep-alive\(twoCores ? " on core 0, servers on core 1" : " (one core: nothing pinned)")"
        )
        var rows: [[String]] = []
        var verdicts: [String] = []
        let routes = [
            ("GET /api/animals", "/api/animals", nil as URL?),
            ("Connect SearchAnimals", "/menagerie.zoo.v1.Zoo/SearchAnimals", post),
        ]
        for (routeName, path, script) in routes {
            for connections in connectionCounts {
                var results: [String: Result] = [:]
                for (name, port) in [("zoo", zooPort), ("FastAPI", fastAPIPort), ("nginx", nginxPort)] {
                    results[name] = try await Self.wrk(
                        url: "http://127.0.0.1:\(port)\(path)", connections: connections, seconds: secondsPerRun,
                        script: script, pin: twoCores)
                }
                guard let ours = results["zoo"], let fast = results["FastAPI"], let floor = results["nginx"] else {
                    continue
                }
                rows.append([
                    routeName, "\(connections)",
                    String(format: "%.0f", ours.requestsPerSecond), String(format: "%.2f", ours.p99Milliseconds),
                    String(format: "%.0f", fast.requestsPerSecond), String(format: "%.2f", fast.p99Milliseconds),
                    String(format: "%.0f", floor.requestsPerSecond), String(format: "%.2f", floor.p99Milliseconds),
                    String(format: "%.1f", ours.requestsPerSecond / max(fast.requestsPerSecond, 1)),
                    String(format: "%.2f", ours.requestsPerSecond / max(floor.requestsPerSecond, 1)),
                    "\(ours.errors) / \(fast.errors) / \(floor.errors)",
                ])
                let againstFastAPI = ours.requestsPerSecond / max(fast.requestsPerSecond, 1)
                let againstNginx = ours.requestsPerSecond / max(floor.requestsPerSecond, 1)
                verdicts.append(
                    String(
                        format: "goal %@ × %d: ≥ 10× FastAPI (%.1f×) %@, ≥ 0.5 of nginx (%.2f) %@", routeName,
                        connections,
                        againstFastAPI, againstFastAPI >= 10 ? "met" : "NOT met", againstNginx,
                        againstNginx >= 0.5 ? "met" : "NOT met"))
            }
        }
        printTable(
            [
                "route", "connections", "zoo req/s", "zoo p99 ms", "FastAPI req/s", "FastAPI p99 ms", "nginx req/s",
                "nginx p99 ms",
                "zoo / FastAPI", "zoo / nginx", "errors zoo / FastAPI / nginx",
            ], rows)
        for verdict in verdicts { print(verdict) }
    }

    // MARK: The peers

    static let fastAPIApp = """
        import os
        from fastapi import FastAPI, Request
        from fastapi.responses import Response

        directory = os.environ["PEER_DIR"]
        animals = open(os.path.join(directory, "animals.json"), "rb").read()
        search = open(os.path.join(directory, "search.json"), "rb").read()
        app = FastAPI()

        @app.get("/api/animals")
        def all_animals():
            return Response(animals, media_type="application/json")

        @app.post("/menagerie.zoo.v1.Zoo/SearchAnimals")
        async def search_animals(request: Request):
            await request.body()
            return Response(search, media_type="application/json")
        """

    static func nginxConfiguration(port: Int, root: String) -> String {
        """
        daemon off;
        master_process off;
        worker_processes 1;
        error_log \(root)/nginx-error.log warn;
        pid \(root)/nginx.pid;
        events { worker_connections 1024; }
        http {
            access_log off;
            sendfile on;
            tcp_nopush on;
            keepalive_requests 1000000;
            client_body_temp_path \(root)/nginx-body;
            default_type application/json;
            server {
                listen 127.0.0.1:\(port);
                root \(root);
                location = /api/animals { try_files /animals.json =404; }
                # A static file answers GET only; a POST gets the same file through the 405 page.
                location = /menagerie.zoo.v1.Zoo/SearchAnimals { error_page 405 =200 /search.json; try_files /search.json =404; }
                location = /search.json { internal; }
            }
        }
        """
    }

    // MARK: Processes and wrk

    static func start(_ name: String, _ command: [String], log directory: URL, environment: [String: String] = [:])
        throws -> Process
    {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: command[0])
        process.arguments = Array(command.dropFirst())
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        let log = directory.appendingPathComponent("\(name).log")
        _ = FileManager.default.createFile(atPath: log.path, contents: nil)
        let handle = try FileHandle(forWritingTo: log)
        process.standardOutput = handle
        process.standardError = handle
        process.standardInput = FileHandle.nullDevice
        try process.run()
        return process
    }

    /// SIGTERM, then SIGKILL after two seconds (nginx without its master process does not always stop on TERM).
    static func stop(_ process: Process) {
        guard process.isRunning else { return }
        process.terminate()
        for _ in 0..<20 where process.isRunning { usleep(100_000) }
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
    }

    static func waitAnswering(port: Int) async -> Bool {
        for _ in 0..<300 {
            if await answer(["-o", "/dev/null", "http://127.0.0.1:\(port)/"]) != nil { return true }
            try? await Task.sleep(for: .milliseconds(100))
        }
        return false
    }

    /// The body curl got (any status), or nil when nothing answered.
    static func answer(_ arguments: [String]) async -> [UInt8]? {
        let run = await AbuseBenchmark.onThread {
            try? Self.output("/usr/bin/curl", ["-s", "--max-time", "10"] + arguments)
        }
        guard let run, run.status == 0 else { return nil }
        return run.output
    }

    static func fetch(_ arguments: [String]) async throws -> [UInt8] {
        guard let body = await answer(["--fail"] + arguments), !body.isEmpty else {
            throw CocoaError(
                .fileReadUnknown,
                userInfo: [NSLocalizedDescriptionKey: "curl \(arguments.joined(separator: " ")) failed"])
        }
        return body
    }

    static func output(_ executable: String, _ arguments: [String]) throws -> (status: Int32, output: [UInt8]) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = FileHandle.nullDevice
        try process.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, Array(data))
    }

    /// One wrk run: requests per second, p99 and the errors it counted (non-2xx, socket errors).
    static func wrk(url: String, connections: Int, seconds: Double, script: URL?, pin: Bool) async throws -> Result {
        let arguments =
            (pin ? ["-c", "0", "/usr/bin/wrk"] : []) + [
                "-t1", "-c\(connections)", "-d\(max(1, Int(seconds.rounded())))s", "--latency",
            ]
            + (script.map { ["-s", $0.path] } ?? []) + [url]
        let (status, output) =
            await AbuseBenchmark.onThread { try? Self.output(pin ? "/usr/bin/taskset" : "/usr/bin/wrk", arguments) }
            ?? (1, [])
        let text = String(decoding: output, as: UTF8.self)
        guard status == 0 else {
            throw CocoaError(.fileReadUnknown, userInfo: [NSLocalizedDescriptionKey: "wrk failed: \(text)"])
        }
        return Result(
            requestsPerSecond: Self.number(after: "Requests/sec:", in: text) ?? 0,
            p99Milliseconds: Self.milliseconds(after: "99%", in: text) ?? .infinity,
            errors: Int(Self.number(after: "Non-2xx or 3xx responses:", in: text) ?? 0)
                + Self.socketErrors(in: text))
    }

    static func number(after label: String, in text: String) -> Double? {
        guard
            let line = text.split(separator: "\n").first(where: {
                $0.trimmingCharacters(in: .whitespaces).hasPrefix(label)
            })
        else { return nil }
        return line.split(separator: " ").dropFirst(label.split(separator: " ").count).first.flatMap { Double($0) }
    }

    /// wrk's latency "99%    1.23ms" (or us, s).
    static func milliseconds(after label: String, in text: String) -> Double? {
        guard
            let line = text.split(separator: "\n").first(where: {
                $0.trimmingCharacters(in: .whitespaces).hasPrefix(label)
            }),
            let value = line.split(separator: " ").dropFirst().first
        else { return nil }
        for (unit, scale) in [("us", 0.001), ("ms", 1.0), ("s", 1000.0)] where value.hasSuffix(unit) {
            return Double(value.dropLast(unit.count)).map { $0 * scale }
        }
        return nil
    }

    /// "Socket errors: connect 0, read 0, write 0, timeout 0": their sum.
    static func socketErrors(in text: String) -> Int {
        guard let line = text.split(separator: "\n").first(where: { $0.contains("Socket errors:") }) else { return 0 }
        return line.split(whereSeparator: { !$0.isNumber }).compactMap { Int($0) }.reduce(0, +)
    }
}
