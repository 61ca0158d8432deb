import Foundation
import TestSupport
import Testing
import ZooCore

/// Zoo imports as jobs, through `gateway zoo import` and `gateway zoo jobs …`, against compose's stack.
@Suite(.serialized) struct ZooJobsStackTests {
    @Test func importJobsThroughTheGateway() async throws {
        try await Stack.with(services: ["zoo"]) { stack in
            let up = try await stack.compose("up")
            try #require(up.status == 0, "compose up failed: \(up.output)")
            let scratch = stack.directory.appendingPathComponent("files")
            try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
            let small = scratch.appendingPathComponent("small.csv")
            try ZooStackTests.sampleLexicon(first: 5).write(to: small, atomically: true, encoding: .utf8)

            // Detached: the job's id at once; watch prints plain lines (the output is a pipe) and the end state.
            let started = try jsonObject(
                try await stack.gateway(["zoo", "import", "--lexicon-csv", small.path, "--detach", "--json"]))
            let id = try #require(started["id"] as? String)
            #expect(started["kind"] as? String == "zoo.import")
            let watched = try await stack.gateway(["zoo", "jobs", "watch", id])
            #expect(watched.status == 0, "\(watched.output)")
            let lines = watched.output.split(separator: "\n").map(String.init)
            #expect(lines.contains("100% done"), "\(watched.output)")
            #expect(!watched.output.contains("\r") && !watched.output.contains("\u{1B}["))
            #expect(lines.last == "job \(id) (zoo.import) succeeded")
            #expect(try await stack.gateway(["zoo", "search", "--all", "--json"]).output.contains("\"total\": 5"))

            // A failing import: the job fails with INVALID_ARGUMENT, and so does the gateway.
            let broken = scratch.appendingPathComponent("broken.json")
            try "[oops".write(to: broken, atomically: true, encoding: .utf8)
            let failed = try await stack.gateway(["zoo", "import", "--animals-json", broken.path])
            #expect(failed.status == 3 && failed.output.contains("INVALID_ARGUMENT"), "\(failed.output)")

            // List: newest first, the failed one with its status; show; an unknown id is NOT_FOUND (exit 5).
            let listed = try jsonObject(try await stack.gateway(["zoo", "jobs", "list", "--json"]))
            let jobs = try #require(listed["jobs"] as? [[String: Any]])
            #expect(jobs.map { $0["state"] as? String } == ["JOB_STATE_FAILED", "JOB_STATE_SUCCEEDED"])
            #expect((jobs.first?["error"] as? [String: Any])?["code"] as? Int == 3, "INVALID_ARGUMENT")
            let table = try await stack.gateway(["zoo", "jobs", "list", "--job-state", "succeeded"])
            #expect(
                table.status == 0 && table.output.contains(id) && !table.output.contains("failed"), "\(table.output)")
            let shown = try await stack.gateway(["zoo", "jobs", "show", id])
            #expect(shown.output.contains("job \(id) (zoo.import) succeeded"), "\(shown.output)")
            #expect(try await stack.gateway(["zoo", "jobs", "show", "no-such-job"]).status == 5)
            #expect(try await stack.gateway(["zoo", "jobs", "cancel", id]).output.contains("succeeded"))
        }
    }

    /// Issue 9, #14: kill -9 of the only replica while `gateway zoo import` follows the import. The gateway
    /// used to exit 14 "connection lost" although the import may well have committed; now it reconnects to the
    /// replica compose restarts and reports what became of the job — failed (UNAVAILABLE, its owner died) or
    /// succeeded, never lost.
    @Test func theGatewayAsksWhatBecameOfAnImportWhoseReplicaWasKilled() async throws {
        try await Stack.with(services: ["zoo"]) { stack in
            let up = try await stack.compose("up")
            try #require(up.status == 0, "compose up failed: \(up.output)")
            let scratch = stack.directory.appendingPathComponent("files")
            try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
            let big = scratch.appendingPathComponent("big.csv")
            try Self.largeLexicon(copies: 400).write(to: big, atomically: true, encoding: .utf8)

            let output = scratch.appendingPathComponent("gateway.out")
            _ = FileManager.default.createFile(atPath: output.path, contents: nil)
            let handle = try FileHandle(forWritingTo: output)
            let gateway = Process()
            gateway.executableURL = URL(fileURLWithPath: "\(Stack.binDirectory)/gateway")
            gateway.arguments = ["zoo", "import", "--lexicon-csv", big.path, "--state", stack.state.path]
            gateway.environment = stack.environment
            gateway.standardOutput = handle
            gateway.standardError = handle
            gateway.standardInput = FileHandle.nullDevice
            try gateway.run()
            defer {
                if gateway.isRunning { gateway.terminate() }
                try? handle.close()
            }

            // Once the import runs, kill its replica; compose restarts it.
            var jobID: String?
            for _ in 0..<Int(300 * TestTime.scale) where jobID == nil {
                try await Task.sleep(for: .milliseconds(50))
                let listed = try? jsonObject(
                    try await stack.gateway(["zoo", "jobs", "list", "--job-state", "running", "--json"]))
                let running = (listed?["jobs"] as? [[String: Any]])?.first { ($0["progress"] as? Double ?? 0) > 0 }
                jobID = running?["id"] as? String
            }
            let id = try #require(jobID, "the import never ran")
            let victims = try stack.servicePids()
            kill(try #require(victims["zoo.0"]), SIGKILL)

            let exited = try await offPool { () -> Bool in
                for _ in 0..<Int(1200 * TestTime.scale) where gateway.isRunning { usleep(100_000) }
                return !gateway.isRunning
            }
            try #require(exited, "the gateway did not finish within \(TestTime.scaled(.seconds(120))) of the kill")
            let text = (try? String(contentsOf: output, encoding: .utf8)) ?? ""
            #expect(!text.contains("connection lost") && !text.contains("connection to"), "\(text)")
            let shown = try jsonObject(try await stack.gateway(["zoo", "jobs", "show", id, "--json"]))
            let state = try #require(shown["state"] as? String)
            #expect(state == "JOB_STATE_FAILED" || state == "JOB_STATE_SUCCEEDED", "\(shown)")
            if state == "JOB_STATE_FAILED" {
                #expect(gateway.terminationStatus == 14, "\(text)")
                #expect(text.contains("UNAVAILABLE") && text.contains("job \(id) failed"), "\(text)")
            } else {
                #expect(gateway.terminationStatus == 0 && text.contains("19"), "\(text)")
            }
        }
    }

    /// The sample lexicon's animals `copies` times over, each copy with its own ids and names: an import that
    /// takes seconds.
    static func largeLexicon(copies: Int) throws -> String {
        let text = try String(
            contentsOf: ZooStackTests.sampleDirectory.appendingPathComponent("lexikon-zvirat.csv"), encoding: .utf8)
        let records = CSVParser.parse(text).map(\.fields)
        let quote = { (field: String) in "\"" + field.replacingOccurrences(of: "\"", with: "\"\"") + "\"" }
        var lines = [records[0].map(quote).joined(separator: ";")]
        var id = 0
        for copy in 0..<copies {
            for record in records.dropFirst() {
                id += 1
                var fields = record
                fields[0] = String(id)
                fields[1] += " \(copy)"
                lines.append(fields.map(quote).joined(separator: ";"))
            }
        }
        return lines.joined(separator: "\n") + "\n"
    }
}
