import Foundation
import TestSupport
import Testing

/// The second implementation of the protocol: clients/python, written from docs/protocol.md, against a
/// real zoo replica. Skips when python3 with python3-protobuf is missing, except under CI=true.
@Suite(.serialized) struct PythonClientTests {
    static let clientDirectory = Stack.root.appendingPathComponent("clients/python")
    static let required = ProcessInfo.processInfo.environment["CI"] == "true"

    /// A python3 that imports google.protobuf: Debian's /usr/bin/python3 first (a python3 earlier on
    /// the PATH, e.g. pyenv's, may not see Debian's python3-protobuf), then whatever `python3` is.
    static let python: String? = {
        for candidate in ["/usr/bin/python3", "/usr/local/bin/python3"]
        where FileManager.default.isExecutableFile(atPath: candidate) {
            if let status = try? runBlocking(candidate, ["-c", "import google.protobuf"]).status, status == 0 {
                return candidate
            }
        }
        if let status = try? runBlocking("/usr/bin/env", ["python3", "-c", "import google.protobuf"]).status,
            status == 0
        {
            return "/usr/bin/env"
        }
        return nil
    }()
    static let skipMessage: Comment =
        "skipped: no python3 with python3-protobuf (apt-get install python3-protobuf; set CI=true to require it)"

    static let hasProtoc = (try? runBlocking("/usr/bin/env", ["protoc", "--version"]).status) == 0

    @Test(
        .enabled(if: hasProtoc || required, "skipped: protoc is missing (protobuf-compiler; set CI=true to require it)")
    )
    func generatedModulesAreCurrent() async throws {
        let check = try await Stack.run(
            Self.clientDirectory.appendingPathComponent("generate.sh").path, ["--check"],
            environment: ProcessInfo.processInfo.environment)
        #expect(check.status == 0, "clients/python/generated is stale: \(check.output)")
    }

    @Test(.enabled(if: python != nil || required, skipMessage))
    func interopAgainstAZooReplica() async throws {
        let python = try #require(Self.python, "python3 with python3-protobuf is required under CI=true")
        let port = try RawSocket.freePortBlock(count: 1)
        let data = try Stack.scratchDirectory("menagerie-python")
        defer { try? FileManager.default.removeItem(at: data) }
        let zoo = try await Stack.serveAlone("zoo", port: port, data: data)
        defer { zoo.stop() }

        let script = Self.clientDirectory.appendingPathComponent("interop.py").path
        let lexicon = ZooStackTests.sampleDirectory.appendingPathComponent("lexikon-zvirat.csv").path
        var arguments = [script, "127.0.0.1:\(port)", lexicon]
        if python == "/usr/bin/env" { arguments.insert("python3", at: 0) }
        var environment = ProcessInfo.processInfo.environment
        environment["PYTHONDONTWRITEBYTECODE"] = "1"
        let run = try await Stack.run(python, arguments, environment: environment)
        try #require(run.status == 0, "interop.py failed: \(run.output)")
        let report: [String: Any] = try Stack.report(run.output)

        // Health, reflection.
        let health = try #require(report["health"] as? [String: Any])
        #expect(health["status"] as? String == "SERVING_STATUS_SERVING")
        #expect(health["server_name"] as? String == "zoo")
        #expect((health["pid"] as? Int).map(Int32.init) == zoo.processIdentifier)
        #expect(
            report["services"] as? [String] == [
                "menagerie.jobs.v1.Jobs", "menagerie.rpc.v1.Health", "menagerie.rpc.v1.Reflection",
                "menagerie.rpc.v1.Stats",
                "menagerie.zoo.v1.Zoo",
            ])
        #expect(
            report["streaming_methods"] as? [String] == [
                "/menagerie.jobs.v1.Jobs/WatchJob", "/menagerie.zoo.v1.Zoo/ExportCatalogue",
            ])

        // A search, a not-found, an unknown method, a deadline already over.
        let search = try #require(report["search"] as? [String: Any])
        #expect(search["first"] as? String == "Želva obrovská")
        #expect((search["total"] as? Int ?? 0) >= 1)
        let notFound = try #require(report["not_found"] as? [String: Any])
        #expect(notFound["code"] as? Int == 5)
        #expect((notFound["message"] as? String)?.contains("987654") == true)
        #expect(report["unknown_method"] as? Int == 12)
        #expect(report["zero_deadline"] as? Int == 4)

        // 200 pipelined calls on one socket, each answer matched to its own call; 80 more from 4 threads.
        #expect(report["burst"] as? [String: Int] == ["animal": 100, "missing": 50, "health": 50, "wrong": 0])
        let threads = try #require(report["threads"] as? [String: Any])
        #expect((threads["errors"] as? [Any])?.isEmpty == true, "\(threads)")

        // A server stream: WatchJob follows an import to its end; an unknown job's stream is NOT_FOUND.
        let watch = try #require(report["watch"] as? [String: Any])
        #expect(watch["kind"] as? String == "zoo.import")
        #expect(watch["last"] as? String == "JOB_STATE_SUCCEEDED")
        #expect(watch["result_type"] as? String == "menagerie.zoo.v1.ImportRecord")
        #expect((watch["updates"] as? Int ?? 0) >= 1)
        #expect((report["after_import"] as? Int ?? 0) >= 1)
        #expect(report["watch_unknown"] as? Int == 5)
        #expect(report["final_health"] as? String == "SERVING_STATUS_SERVING")

        // The job the Python client started is the one the gateway sees.
        let shown = try await Stack.run(
            "\(Stack.binDirectory)/gateway",
            ["zoo", "jobs", "show", try #require(watch["job"] as? String), "--endpoint", "zoo=127.0.0.1:\(port)"],
            environment: [:])
        #expect(shown.status == 0 && shown.output.contains("succeeded"), "\(shown.output)")
    }

    private static func runBlocking(_ executable: String, _ arguments: [String]) throws -> (
        status: Int32, output: String
    ) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        return (process.terminationStatus, "")
    }
}
