import Foundation
import HTTP
import RPC
import TestSupport
import Testing
import Transport
import ZooService

@testable import ZooCore

/// The zoo app's REST routes are answered by the server's one answer cache (`ZooHTTP.answerCache`), as its Connect
/// answers are: the same GET on the same data is sent again without building the answer — the server's stats count it
/// as kept — and an import that changes the data is answered from the next request on.
@Suite struct RestAnswerCacheTests {
    /// GETs `target` on a connection of its own: the answer's status, headers and body.
    static func get(_ port: Int, _ target: String, headers: String = "") async throws -> (
        status: Int, headers: [String: String], body: String
    ) {
        let socket = try RawSocket(port: port)
        // The route's handler awaits storage on the cooperative pool, which the suite's slowest tests (a dqlite
        // cluster starting) can hold for more than the socket's 10 s: waiting longer only slows a loaded run.
        socket.setReceiveTimeout(.seconds(60))
        _ = socket.write(Array("GET \(target) HTTP/1.1\r\nHost: x\r\n\(headers)Connection: close\r\n\r\n".utf8))
        let bytes = await socket.readUntilClosed().bytes
        let text = String(decoding: bytes, as: UTF8.self)
        let parts = text.components(separatedBy: "\r\n\r\n")
        let head = parts[0].components(separatedBy: "\r\n")
        var fields: [String: String] = [:]
        for line in head.dropFirst() {
            let pair = line.split(separator: ":", maxSplits: 1)
            if pair.count == 2 { fields[pair[0].lowercased()] = pair[1].trimmingCharacters(in: .whitespaces) }
        }
        let status = Int(head[0].split(separator: " ").dropFirst().first ?? "") ?? 0
        return (status, fields, parts.dropFirst().joined(separator: "\r\n\r\n"))
    }

    @Test func aRouteIsAnsweredFromTheCacheUntilAnImportChangesTheData() async throws {
        let scratch = try ScratchDirectory()
        let library = try ZooLibrary(scratchAt: scratch.databasePath)
        try library.loadSampleDataIfEmpty(from: SampleFiles.directory)
        let server = TCPServer(port: 0)
        server.serveHTTP(try ZooHTTP.routes(library: library, webDirectory: nil))
        server.cacheAnswers(ZooHTTP.answerCache(library: library))
        let rpc = RPCServer(name: "zoo", services: [])
        try rpc.serve(over: server)
        defer { Task { await server.shutdown(grace: .zero) } }
        let figures = { rpc.stats.snapshot().first { $0.path == "GET /api/animals" } }

        let first = try await Self.get(server.port, "/api/animals")
        let second = try await Self.get(server.port, "/api/animals")
        #expect(
            first.status == 200 && second.status == 200, "\(first.status) \(first.body.prefix(300)) / \(second.status)")
        #expect(second.body == first.body && second.headers["etag"] == first.headers["etag"])
        #expect(figures()?.calls == 2)
        #expect(figures()?.kept == 1, "the second answer is the first's bytes, not built again")
        let revalidated = try await Self.get(
            server.port, "/api/animals", headers: "If-None-Match: \(first.headers["etag"] ?? "")\r\n")
        #expect(revalidated.status == 304 && revalidated.body.isEmpty, "a kept answer still honours the client's tag")
        #expect(figures()?.kept == 2)

        _ = try library.importFiles([try SampleFiles.lexiconCSV(first: 3)], source: "unit test", trigger: .client)
        let afterImport = try await Self.get(server.port, "/api/animals?include_currently_unavailable=true")
        let again = try await Self.get(server.port, "/api/animals")
        #expect(afterImport.status == 200 && again.status == 200)
        #expect(
            again.body != first.body && again.headers["etag"] != first.headers["etag"],
            "the import's data, not the kept answer")
        let document = try JSONSerialization.jsonObject(with: Data(afterImport.body.utf8)) as? [String: Any]
        #expect((document?["data"] as? [Any])?.count == 3, "the three animals imported")
        #expect(figures()?.kept == 2, "nothing kept before the import was sent after it")
        _ = try await Self.get(server.port, "/api/animals")
        #expect(figures()?.calls == 6 && figures()?.kept == 3, "the new answer is kept in its turn")
    }
}
