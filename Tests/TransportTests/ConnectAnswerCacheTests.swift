import Foundation
import HTTP
import RPC
import RPCTesting
import RPCWire
import Schema
import Synchronization
import Testing

@testable import Connect
@testable import Framing
@testable import ServerCore
@testable import ServerSeam
@testable import TCP
@testable import TLSStreams
@testable import Transport

/// Answers kept by the Connect face (`AnswerCachePolicy`): the same request on the same data version is answered
/// from the bytes sent before, without its handler; a new version, another request or another way of asking runs
/// the handler; the guard still decides; nothing is kept while the version is unknown.
@Suite struct ConnectAnswerCacheTests {
    /// A read whose answer tells how many times its handler ran (`index`).
    static let read = ProtoMethod<RpcV1.EchoRequest, RpcV1.EchoResponse>(
        path: "/test.Reads/Read", serverStreaming: false, idempotent: true, sideEffectFree: true, access: .public)

    final class Reads: RPCService {
        let runs = Mutex<UInt32>(0)

        func register(in router: inout RPCRouter) {
            router.unary(ConnectAnswerCacheTests.read) { [self] request, _ in
                let run = runs.withLock { runs in
                    runs += 1
                    return runs
                }
                return RpcV1.EchoResponse(payload: request.payload, index: run)
            }
        }
    }

    /// Refuses calls without `authorization: letmein`.
    struct Password: CallGuard {
        func admit(_ head: CallHead, to _: ProtoMethodInfo) throws(RPCError) -> Caller? {
            guard head.metadata["authorization"] == "letmein" else { throw RPCError(.unauthenticated, "no password") }
            return nil
        }
    }

    /// The data version the policy reports (nil: unknown).
    final class Version: Sendable {
        let value = Mutex<Int64?>(1)
    }

    static func serve(
        guard callGuard: (any CallGuard)? = nil,
        _ body: (_ port: Int, _ version: Version, _ server: RPCServer) async throws -> Void
    ) async throws {
        let version = Version()
        let server = TCPServer(port: 0)
        server.cacheAnswers(AnswerCachePolicy(methods: [read.path]) { version.value.withLock { $0 } })
        let rpc = RPCServer(name: "reads", services: [Reads()], guard: callGuard)
        try rpc.serve(over: server)
        do {
            try await body(server.port, version, rpc)
        } catch {
            await server.shutdown(grace: .zero)
            throw error
        }
        await server.shutdown(grace: .zero)
    }

    /// POSTs `json` to the read on a connection of its own; the answer's status and JSON text.
    static func post(_ port: Int, _ json: String, headers: String = "") async throws -> (status: Int, body: String) {
        let answer = try #require(
            try await HTTPRoutesTests.exchange(
                port,
                [
                    "POST \(read.path) HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\(headers)Content-Length: \(json.utf8.count)\r\n\r\n\(json)"
                ]
            ).first)
        return (answer.status, String(decoding: answer.body, as: UTF8.self))
    }

    @Test func theSameRequestOnTheSameDataIsAnsweredWithoutItsHandler() async throws {
        try await Self.serve { port, version, server in
            let first = try await Self.post(port, #"{"payload":"AQI="}"#)
            let second = try await Self.post(port, #"{"payload":"AQI="}"#)
            #expect(first.status == 200)
            #expect(first.body.contains(#""index":1"#))
            #expect(second.body == first.body, "kept and sent again: the handler ran once")
            let other = try await Self.post(port, #"{"payload":"AQM="}"#)
            #expect(other.body.contains(#""index":2"#), "another request runs its handler")
            version.value.withLock { $0 = 2 }
            let afterChange = try await Self.post(port, #"{"payload":"AQI="}"#)
            #expect(afterChange.body.contains(#""index":3"#), "a new data version runs the handler again")
            let figures = try #require(server.stats.snapshot().first { $0.path == Self.read.path })
            #expect(figures.calls == 4, "answers from the cache count as calls")
        }
    }

    /// A kept answer is sent on the loop at once, a fresh one later from a worker: pipelined on one connection, they
    /// still come back in the order they were asked.
    @Test func pipelinedKeptAndFreshAnswersComeBackInOrder() async throws {
        try await Self.serve { port, _, _ in
            _ = try await Self.post(port, #"{"payload":"AQI="}"#)
            let request = { (json: String) in
                "POST \(Self.read.path) HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: \(json.utf8.count)\r\n\r\n\(json)"
            }
            let answers = try await HTTPRoutesTests.exchange(
                port,
                [
                    request(#"{"payload":"AQM="}"#), request(#"{"payload":"AQI="}"#), request(#"{"payload":"AQQ="}"#),
                    request(#"{"payload":"AQI="}"#),
                ])
            let bodies = answers.map { String(decoding: $0.body, as: UTF8.self) }
            #expect(answers.map(\.status) == [200, 200, 200, 200])
            #expect(bodies[0].contains("AQM=") && bodies[0].contains(#""index":2"#), "\(bodies)")
            #expect(bodies[1].contains("AQI=") && bodies[1].contains(#""index":1"#), "kept")
            #expect(bodies[2].contains("AQQ=") && bodies[2].contains(#""index":3"#))
            #expect(bodies[3] == bodies[1])
        }
    }

    @Test func nothingIsKeptWhileTheVersionIsUnknown() async throws {
        try await Self.serve { port, version, _ in
            version.value.withLock { $0 = nil }
            let first = try await Self.post(port, #"{"payload":"AQI="}"#)
            let second = try await Self.post(port, #"{"payload":"AQI="}"#)
            #expect(first.body.contains(#""index":1"#))
            #expect(second.body.contains(#""index":2"#))
            version.value.withLock { $0 = 7 }
            _ = try await Self.post(port, #"{"payload":"AQI="}"#)
            let kept = try await Self.post(port, #"{"payload":"AQI="}"#)
            #expect(kept.body.contains(#""index":3"#))
        }
    }

    @Test func aKeptAnswerStillPassesTheGuard() async throws {
        try await Self.serve(guard: Password()) { port, _, _ in
            let admitted = try await Self.post(port, #"{"payload":"AQI="}"#, headers: "Authorization: letmein\r\n")
            #expect(admitted.status == 200)
            let refused = try await Self.post(port, #"{"payload":"AQI="}"#)
            #expect(refused.status == 401, "the kept answer is not given to a caller the guard refuses")
            #expect(!refused.body.contains("index"))
            let again = try await Self.post(port, #"{"payload":"AQI="}"#, headers: "Authorization: letmein\r\n")
            #expect(again.body == admitted.body)
        }
    }

    @Test func aKeptGETAnswerKeepsItsTagAnd304() async throws {
        try await Self.serve { port, _, _ in
            let query = "\(Self.read.path)?connect=v1&encoding=json&message=%7B%22payload%22%3A%22AQI%3D%22%7D"
            let first = try #require(
                try await HTTPRoutesTests.exchange(port, ["GET \(query) HTTP/1.1\r\nHost: x"]).first)
            let tag = try #require(first.headers["etag"])
            let answers = try await HTTPRoutesTests.exchange(
                port,
                [
                    "GET \(query) HTTP/1.1\r\nHost: x", "GET \(query) HTTP/1.1\r\nHost: x\r\nIf-None-Match: \(tag)",
                ])
            #expect(answers.map(\.status) == [200, 304])
            #expect(answers[0].body == first.body)
            #expect(answers[0].headers["etag"] == tag)
            #expect(answers[1].body.isEmpty)
        }
    }
}

/// The same cache keeps a REST route's answers (`HTTPBinding`s the policy names): the same GET on the same data is sent
/// again from the loop, after the guard, honouring its tag; a new version runs the route again.
@Suite struct RouteAnswerCacheTests {
    static func get(_ port: Int, _ headers: String = "") async throws -> (
        status: Int, headers: [String: String], body: String
    ) {
        let answer = try #require(
            try await HTTPRoutesTests.exchange(port, ["GET /count HTTP/1.1\r\nHost: x\(headers)"]).first)
        return (answer.status, answer.headers, String(decoding: answer.body, as: UTF8.self))
    }

    @Test func aRouteIsKeptByTheSameCacheAndStillPassesTheGuard() async throws {
        let runs = Mutex(0)
        var builder = HTTPRoutes.Builder()
        builder.get("/count") { _ in
            let run = runs.withLock { runs in
                runs += 1
                return runs
            }
            return HTTPResponse(status: 200, headers: ["ETag": "\"\(run)\""], body: Array("run \(run)".utf8))
        }
        let version = ConnectAnswerCacheTests.Version()
        let server = TCPServer(port: 0)
        server.serveHTTP(HTTPRoutes(builder))
        server.cacheAnswers(AnswerCachePolicy(methods: ["GET /count"]) { version.value.withLock { $0 } })
        let rpc = RPCServer(name: "reads", services: [], guard: ConnectAnswerCacheTests.Password())
        try rpc.serve(over: server)
        let password = "\r\nAuthorization: letmein"
        let first = try await Self.get(server.port, password)
        let second = try await Self.get(server.port, password)
        let refused = try await Self.get(server.port)
        let revalidated = try await Self.get(server.port, password + "\r\nIf-None-Match: \"1\"")
        version.value.withLock { $0 = 2 }
        let afterChange = try await Self.get(server.port, password)
        await server.shutdown(grace: .zero)
        #expect(first.status == 200 && first.body == "run 1")
        #expect(second.status == 200 && second.body == "run 1", "kept: the route ran once")
        #expect(
            refused.status == 401 && !refused.body.contains("run"),
            "the kept answer is not given to a caller the guard refuses")
        #expect(revalidated.status == 304 && revalidated.body.isEmpty)
        #expect(afterChange.body == "run 2", "a new data version runs the route again")
        let figures = try #require(rpc.stats.snapshot().first { $0.path == "GET /count" })
        #expect(figures.calls == 5 && figures.kept == 2)
    }
}

/// The cache itself: a new version empties it, an answer made from an older version is not kept.
@Suite struct AnswerCacheVersionTests {
    @Test func anAnswerMadeBeforeTheVersionMovedIsNotKept() {
        let version = Mutex<Int64?>(1)
        let cache = AnswerCache(policy: AnswerCachePolicy(methods: ["/m"]) { version.withLock { $0 } })
        let key = AnswerCache.Key(method: "/m", json: true, gzip: false, get: false, request: [1])
        let (none, seen) = cache.lookup(key)
        #expect(none == nil)
        #expect(seen == 1)
        version.withLock { $0 = 2 }
        cache.keep(.text(200, "old"), for: key, madeAt: 1)
        #expect(cache.lookup(key).answer == nil)
        cache.keep(.text(200, "new"), for: key, madeAt: 2)
        #expect(cache.lookup(key).answer?.body == Array("new\n".utf8))
        cache.keep(
            .text(500, "failed"), for: AnswerCache.Key(method: "/m", json: true, gzip: false, get: false, request: [2]),
            madeAt: 2)
        #expect(
            cache.lookup(AnswerCache.Key(method: "/m", json: true, gzip: false, get: false, request: [2])).answer == nil
        )
    }
}
