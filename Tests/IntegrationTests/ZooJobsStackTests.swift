import Foundation
import Testing

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
            let started = try jsonObject(try await stack.gateway(["zoo", "import", "--lexicon-csv", small.path, "--detach", "--json"]))
            let id = try #require(started["id"] as? String)
            #expect(started["kind"] as? String == "zoo.import")
            let watched = try await stack.gateway(["zoo", "jobs", "watch", id])
            #expect(watched.status == 0, "\(watched.output)")
            let lines = watched.output.split(separator: "\n").map(String.init)
            #expect(lines.contains("100% done"), "\(watched.output)")
            #expect(!watched.output.contains("\r") && !watched.output.contains("\u{1B}["))
            #expect(lines.last == "job \(id) (zoo.import) succeeded")
            #expect(try await stack.gateway(["zoo", "search", "--all", "--json"]).output.contains("\"total\" : 5"))

            // A failing import: the job fails with INVALID_ARGUMENT, and so does the gateway.
            let broken = scratch.appendingPathComponent("broken.json")
            try "[oops".write(to: broken, atomically: true, encoding: .utf8)
            let failed = try await stack.gateway(["zoo", "import", "--animals-json", broken.path])
            #expect(failed.status == 3 && failed.output.contains("INVALID_ARGUMENT"), "\(failed.output)")

            // List: newest first, the failed one with its status; show; an unknown id is NOT_FOUND (exit 5).
            let listed = try jsonObject(try await stack.gateway(["zoo", "jobs", "list", "--json"]))
            let jobs = try #require(listed["jobs"] as? [[String: Any]])
            #expect(jobs.map { $0["state"] as? String } == ["failed", "succeeded"])
            #expect((jobs.first?["error"] as? [String: String])?["code"] == "INVALID_ARGUMENT")
            let table = try await stack.gateway(["zoo", "jobs", "list", "--job-state", "succeeded"])
            #expect(table.status == 0 && table.output.contains(id) && !table.output.contains("failed"), "\(table.output)")
            let shown = try await stack.gateway(["zoo", "jobs", "show", id])
            #expect(shown.output.contains("job \(id) (zoo.import) succeeded"), "\(shown.output)")
            #expect(try await stack.gateway(["zoo", "jobs", "show", "no-such-job"]).status == 5)
            #expect(try await stack.gateway(["zoo", "jobs", "cancel", id]).output.contains("succeeded"))
        }
    }
}
