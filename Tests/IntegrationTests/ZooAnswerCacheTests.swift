import Foundation
import TestSupport
import Testing

/// The zoo's kept Connect answers (`AnswerCachePolicy`) never outlive the data they were made from: two replicas on
/// one database, a search answered again from replica A's cache, then the real catalogue imported through replica
/// B — A's next answer is the new data's, within the library's recheck interval, as an uncached answer would be.
@Suite(.serialized) struct ZooAnswerCacheTests {
    static let python = FileManager.default.isExecutableFile(atPath: "/usr/bin/python3") ? "/usr/bin/python3" : nil
    static let dataDirectory = Stack.root.deletingLastPathComponent().appendingPathComponent("shared/datasets/zoo")
    static let enabled =
        (FileManager.default.fileExists(atPath: dataDirectory.path) && python != nil)
        || ProcessInfo.processInfo.environment["CI"] == "true"

    /// Searches replica `argv[1]` for "a" `argv[2]` times; prints each answer's total and its body's hash.
    static let script = #"""
        import hashlib, http.client, json, sys
        port, times = int(sys.argv[1]), int(sys.argv[2])
        out = []
        for _ in range(times):
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            c.request("POST", "/menagerie.zoo.v1.Zoo/SearchAnimals", json.dumps({"query": "a", "pageSize": 5}), {"Content-Type": "application/json"})
            r = c.getresponse()
            b = r.read()
            out.append([r.status, json.loads(b).get("total", 0), hashlib.sha256(b).hexdigest()])
            c.close()
        print(json.dumps(out))
        """#

    static func search(_ python: String, port: Int, times: Int) async throws -> [[AnyHashable]] {
        let run = try await Stack.run(
            python, ["-c", script, "\(port)", "\(times)"], environment: ProcessInfo.processInfo.environment)
        try #require(run.status == 0, "\(run.output)")
        return try Stack.report(run.output)
    }

    @Test(.enabled(if: enabled, "skipped: ../shared/datasets/zoo or python3 is missing (set CI=true to require them)"))
    func anImportThroughAnotherReplicaIsSeenDespiteTheKeptAnswer() async throws {
        let python = try #require(Self.python)
        let ports = try RawSocket.freePortBlock(count: 2)
        let data = try Stack.scratchDirectory("menagerie-kept")
        defer { try? FileManager.default.removeItem(at: data) }
        // A starts alone (it loads the sample data), then B on the same database.
        let first = try await Stack.serveAlone("zoo", port: ports, data: data)
        defer { first.stop() }
        let second = try await Stack.serveAlone("zoo", port: ports + 1, data: data)
        defer { second.stop() }

        let before = try await Self.search(python, port: ports, times: 3)
        #expect(before.allSatisfy { $0[0] == AnyHashable(200) })
        #expect(Set(before.map { $0[2] }).count == 1, "the same answer each time: \(before)")

        let imported = try await Stack.run(
            "\(Stack.binDirectory)/gateway",
            [
                "zoo", "import", "--animals-json", Self.dataDirectory.appendingPathComponent("animals.json").path,
                "--endpoint", "zoo=127.0.0.1:\(ports + 1)", "--json",
            ],
            environment: ProcessInfo.processInfo.environment)
        try #require(imported.status == 0, "\(imported.output)")
        try await Task.sleep(for: TestTime.scaled(.milliseconds(200)))

        let after = try await Self.search(python, port: ports, times: 2)
        let fresh = try await Self.search(python, port: ports + 1, times: 1)
        #expect(after.allSatisfy { $0[0] == AnyHashable(200) })
        #expect(
            after[0][1] != before[0][1],
            "A answers from the imported catalogue, not its kept answer: \(before) then \(after)")
        #expect(after[0][2] == fresh[0][2], "A's answer is B's, byte for byte")
        #expect(after[1][2] == after[0][2])
    }
}
