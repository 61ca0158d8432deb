import Foundation
import HTTP
import RPC
import RPCTesting
import RPCWire
import TestSupport
import Testing

@testable import Connect
@testable import Framing
@testable import ServerCore
@testable import ServerSeam
@testable import TCP
@testable import TLSStreams
@testable import Transport

/// Plain HTTP routes beside Connect on one port (`TCPServer.serveHTTP`): GET handlers by path and
/// prefix, static files at `/` with their types, ETag/304 and gzip; what no route matches falls to
/// Connect, or 404.
@Suite struct HTTPRoutesTests {
    static let big = Array(String(repeating: "menagerie ", count: 300).utf8)

    static func serve(_ body: (Int) async throws -> Void) async throws {
        let web = FileManager.default.temporaryDirectory.appendingPathComponent("routes-\(UUID().uuidString)")
        try FileManager.default.createDirectory(
            at: web.appendingPathComponent("css"), withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: web) }
        try Data("<!doctype html><title>hi</title>".utf8).write(to: web.appendingPathComponent("index.html"))
        try Data("body { color: red }".utf8).write(to: web.appendingPathComponent("css/site.css"))
        try Data("secret".utf8).write(to: web.appendingPathComponent(".hidden"))
        var builder = HTTPRoutes.Builder()
        let cached = CachedBody(big, contentType: "text/plain")
        builder.get("/big") { cached.response(to: $0) }
        builder.get(prefix: "/items/") { request in .text(200, "item \(request.path.dropFirst("/items/".count))") }
        builder.serveFiles(try StaticFiles(directory: web))
        let server = TCPServer(port: 0)
        server.serveHTTP(HTTPRoutes(builder))
        try RPCServer(name: "routes", services: [EchoService()]).serve(over: server)
        do {
            try await body(server.port)
        } catch {
            await server.shutdown(grace: .zero)
            throw error
        }
        await server.shutdown(grace: .zero)
    }

    /// Sends `requests` on one connection, the last with `Connection: close`, and reads every answer.
    static func exchange(_ port: Int, _ requests: [String]) async throws -> [(
        status: Int, headers: [String: String], body: [UInt8]
    )] {
        let socket = try RawSocket(port: port)
        var bytes: [UInt8] = []
        for (index, request) in requests.enumerated() {
            // A request is its head, or its head, an empty line and its body.
            let parts = request.components(separatedBy: "\r\n\r\n")
            let close = index == requests.count - 1 ? "Connection: close\r\n" : ""
            bytes += Array((parts[0] + "\r\n" + close + "\r\n" + parts.dropFirst().joined(separator: "\r\n\r\n")).utf8)
        }
        socket.write(bytes)
        var rest = await socket.readUntilClosed().bytes[...]
        var answers: [(Int, [String: String], [UInt8])] = []
        while let end = rest.firstRange(of: Array("\r\n\r\n".utf8)) {
            let head = String(decoding: rest[..<end.lowerBound], as: UTF8.self).components(separatedBy: "\r\n")
            var headers: [String: String] = [:]
            for line in head.dropFirst() {
                let parts = line.split(separator: ":", maxSplits: 1)
                headers[parts[0].lowercased()] = parts[1].trimmingCharacters(in: .whitespaces)
            }
            let length = Int(headers["content-length"] ?? "0") ?? 0
            let body = Array(rest[end.upperBound..<end.upperBound + length])
            answers.append((Int(head[0].split(separator: " ")[1])!, headers, body))
            rest = rest[(end.upperBound + length)...]
        }
        return answers
    }

    @Test func routesAnswerByPathAndPrefixOnOneKeptAliveConnection() async throws {
        try await Self.serve { port in
            let answers = try await Self.exchange(
                port, ["GET /items/42 HTTP/1.1\r\nHost: x", "GET /big HTTP/1.1\r\nHost: x"])
            #expect(answers.count == 2)
            #expect(answers[0].status == 200)
            #expect(String(decoding: answers[0].body, as: UTF8.self) == "item 42\n")
            #expect(answers[1].body == Self.big)
            #expect(answers[1].headers["content-type"] == "text/plain")
        }
    }

    @Test func cachedBodiesRevalidateWithTheirTagAndGzipWhenAccepted() async throws {
        try await Self.serve { port in
            let first = try #require(try await Self.exchange(port, ["GET /big HTTP/1.1\r\nHost: x"]).first)
            let tag = try #require(first.headers["etag"])
            #expect(first.headers["content-encoding"] == nil)
            let answers = try await Self.exchange(
                port,
                [
                    "GET /big HTTP/1.1\r\nHost: x\r\nIf-None-Match: \(tag)",
                    "GET /big HTTP/1.1\r\nHost: x\r\nIf-None-Match: \"other\"\r\nAccept-Encoding: br, gzip",
                    "GET /big HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip;q=0",
                ])
            #expect(answers.map(\.status) == [304, 200, 200])
            #expect(answers[0].body.isEmpty)
            #expect(answers[1].headers["content-encoding"] == "gzip")
            #expect(try Gzip.decompress(answers[1].body, limit: 1 << 20) == Self.big)
            #expect(answers[2].headers["content-encoding"] == nil)
        }
    }

    @Test func staticFilesAreServedAtTheRootWithTheirTypes() async throws {
        try await Self.serve { port in
            let answers = try await Self.exchange(
                port,
                [
                    "GET / HTTP/1.1\r\nHost: x", "GET /index.html HTTP/1.1\r\nHost: x",
                    "GET /css/site.css HTTP/1.1\r\nHost: x",
                    "GET /.hidden HTTP/1.1\r\nHost: x", "GET /../../etc/passwd HTTP/1.1\r\nHost: x",
                    "GET /missing.js HTTP/1.1\r\nHost: x",
                ])
            try #require(answers.map(\.status) == [200, 200, 200, 404, 404, 404])
            #expect(answers[0].headers["content-type"] == "text/html; charset=utf-8")
            #expect(answers[0].body == answers[1].body)
            #expect(answers[0].headers["etag"] != nil)
            #expect(answers[2].headers["content-type"] == "text/css; charset=utf-8")
        }
    }

    @Test func whatNoRouteMatchesIsConnectsOr404() async throws {
        try await Self.serve { port in
            let echo = RpcV1.Echo.echo.path
            let answers = try await Self.exchange(
                port,
                [
                    "POST \(echo) HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}",
                    "POST /big HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 0",
                    "GET /nothing/here HTTP/1.1\r\nHost: x",
                ])
            try #require(answers.map(\.status) == [200, 404, 404])
            #expect(answers[0].headers["content-type"] == "application/json")
        }
    }
}
