import Base
import Foundation
import HTTP
import RPC
import RPCTesting
import Schema
import TestSupport
import Testing

@testable import Connect
@testable import Framing
@testable import ServerCore
@testable import ServerSeam
@testable import TCP
@testable import TLSStreams
@testable import Transport

/// Plain HTTP routes as bindings that run through the server's call pipeline (`HTTPRouteJob`, `RPCServer.serve`):
/// guarded as the method they bind, cut off at a deadline, counted in the stats under their names, failing by their
/// errors' categories in the routes' REST style; HEAD answered with GET's head.
@Suite struct HTTPBindingTests {
    struct Failure: CategorizedError {
        let category: ErrorCategory
        let message: String
    }

    /// Admits `/guarded.v1.Secret/Read` only with `authorization: letmein`; every other method freely.
    struct Password: CallGuard {
        func admit(_ head: CallHead, to method: ProtoMethodInfo) throws(RPCError) -> Caller? {
            guard head.method == "/guarded.v1.Secret/Read" else { return nil }
            guard head.metadata["authorization"] == "letmein" else { throw RPCError(.unauthenticated, "no password") }
            return Caller(name: "reader", isAdmin: false)
        }
    }

    static func serve(_ body: (_ port: Int, _ rpc: RPCServer) async throws -> Void) async throws {
        var builder = HTTPRoutes.Builder()
        builder.bind(HTTPBinding("/items/{id}")) { request in
            switch request.path.dropFirst("/items/".count) {
            case "missing": throw Failure(category: .notFound, message: "no such item")
            case "bad": throw Failure(category: .invalidArgument, message: "a \"bad\" id")
            case "busy": throw Failure(category: .unavailable, message: "storage is busy")
            case "broken": throw Failure(category: .internal, message: "SQL detail nobody may read")
            default: return .text(200, "item")
            }
        }
        builder.bind(HTTPBinding("/secret", binds: "/guarded.v1.Secret/Read")) { _ in .text(200, "secret") }
        builder.get("/slow") { _ in
            try await Task.sleep(for: .seconds(3600))
            return .text(200, "late")
        }
        let server = TCPServer(port: 0)
        server.serveHTTP(HTTPRoutes(builder))
        let rpc = RPCServer(name: "bindings", services: [EchoService()], guard: Password())
        try rpc.serve(over: server)
        do {
            try await body(server.port, rpc)
        } catch {
            await server.shutdown(grace: .zero)
            throw error
        }
        await server.shutdown(grace: .zero)
    }

    static func detail(_ body: [UInt8]) -> String? {
        (try? JSONSerialization.jsonObject(with: Data(body)) as? [String: String])?["detail"]
    }

    @Test func failuresAnswerByTheirCategoryInTheRESTStyle() async throws {
        try await Self.serve { port, _ in
            let answers = try await HTTPRoutesTests.exchange(
                port,
                [
                    "GET /items/missing HTTP/1.1\r\nHost: x", "GET /items/bad HTTP/1.1\r\nHost: x",
                    "GET /items/busy HTTP/1.1\r\nHost: x",
                    "GET /items/broken HTTP/1.1\r\nHost: x", "GET /items/1 HTTP/1.1\r\nHost: x",
                ])
            #expect(answers.map(\.status) == [404, 422, 503, 500, 200])
            #expect(
                answers.map { Self.detail($0.body) } == [
                    "no such item", "a \"bad\" id", "storage is busy", "internal error while serving GET /items/{id}",
                    nil,
                ])
            #expect(answers[0].headers["content-type"] == "application/json")
        }
    }

    @Test func routesAreCountedInTheStatsUnderTheirBindings() async throws {
        try await Self.serve { port, rpc in
            _ = try await HTTPRoutesTests.exchange(
                port,
                [
                    "GET /items/1 HTTP/1.1\r\nHost: x", "GET /items/missing HTTP/1.1\r\nHost: x",
                    "GET /secret HTTP/1.1\r\nHost: x",
                ])
            let figures = Dictionary(uniqueKeysWithValues: rpc.stats.snapshot().map { ($0.path, $0) })
            let items = try #require(figures["GET /items/{id}"], "\(figures.keys.sorted())")
            #expect(items.calls == 2 && items.errors == 1)
            #expect(items.byStatus[Int(StatusCode.notFound.rawValue)] == 1)
            let secret = try #require(figures["GET /secret"])
            #expect(secret.calls == 1 && secret.byStatus[Int(StatusCode.unauthenticated.rawValue)] == 1)
        }
    }

    @Test func aBoundRouteIsGuardedAsItsMethod() async throws {
        try await Self.serve { port, _ in
            let answers = try await HTTPRoutesTests.exchange(
                port,
                [
                    "GET /secret HTTP/1.1\r\nHost: x", "GET /secret HTTP/1.1\r\nHost: x\r\nAuthorization: letmein",
                ])
            #expect(answers.map(\.status) == [401, 200])
            #expect(Self.detail(answers[0].body) == "no password")
        }
    }

    @Test func aRoutePastItsDeadlineAnswers504() async throws {
        try await Self.serve { port, rpc in
            let answers = try await HTTPRoutesTests.exchange(
                port,
                [
                    "GET /slow HTTP/1.1\r\nHost: x\r\nConnect-Timeout-Ms: 20",
                    "GET /items/1 HTTP/1.1\r\nHost: x\r\nConnect-Timeout-Ms: soon",
                ])
            #expect(answers.map(\.status) == [504, 422])
            #expect(
                rpc.stats.snapshot().first { $0.path == "GET /slow" }?.byStatus[
                    Int(StatusCode.deadlineExceeded.rawValue)] == 1)
        }
    }

    @Test func headAnswersWithGETsHeadAndNoBody() async throws {
        try await Self.serve { port, _ in
            let socket = try RawSocket(port: port)
            socket.write(
                Array(
                    "HEAD /items/1 HTTP/1.1\r\nHost: x\r\n\r\nGET /items/1 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
                        .utf8))
            let text = String(decoding: await socket.readUntilClosed().bytes, as: UTF8.self)
            let answers = text.components(separatedBy: "HTTP/1.1 ").dropFirst()
            #expect(answers.count == 2, "\(text)")
            let head = try #require(answers.first)
            #expect(head.hasPrefix("200 "))
            #expect(head.contains("Content-Length: 5\r\n"), "GET's length: \(head)")
            #expect(head.hasSuffix("\r\n\r\n"), "no body: \(head)")
            #expect(answers.last?.hasSuffix("\r\n\r\nitem\n") == true)
        }
    }

    /// HEAD of a path no route serves is a missing page, as GET's is (it was 405, as if HEAD were not served at all),
    /// and its answer has no body: the connection serves the next request.
    @Test func headOfAMissingPageIs404WithoutABody() async throws {
        try await Self.serve { port, _ in
            let socket = try RawSocket(port: port)
            socket.write(
                Array(
                    "HEAD /nowhere HTTP/1.1\r\nHost: x\r\n\r\nGET /items/1 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
                        .utf8))
            let text = String(decoding: await socket.readUntilClosed().bytes, as: UTF8.self)
            let answers = text.components(separatedBy: "HTTP/1.1 ").dropFirst()
            #expect(answers.count == 2, "\(text)")
            #expect(answers.first?.hasPrefix("404 ") == true && answers.first?.hasSuffix("\r\n\r\n") == true, "\(text)")
            #expect(answers.last?.hasPrefix("200 ") == true)
        }
    }
}
