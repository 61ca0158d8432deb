import Foundation
import HTTP
import RPC
import RPCTestSupport
import RPCTesting
import RPCWire
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

/// Issue 22: Connect's streaming calls over HTTP/1.1 on the binary port, driven with raw sockets
/// as a plain HTTP client drives them — envelopes in chunked bodies both ways, the outcome in the
/// end-of-stream envelope, responses paced by the socket and requests by the handler's inbox (no
/// HTTP client grants credit), bidirectional calls refused with a word about the binary protocol.
@Suite(.serialized) struct ConnectStreamingTests {
    static let stream = "/menagerie.rpc.v1.Echo/Stream"
    static let collect = "/menagerie.rpc.v1.Echo/Collect"
    static let chat = "/menagerie.rpc.v1.Echo/Chat"

    /// A Connect envelope of `json`'s UTF-8.
    static func envelope(_ json: String, flags: UInt8 = 0) -> [UInt8] {
        ConnectProtocol.envelope(flags: flags, Array(json.utf8))
    }

    static func request(
        _ path: String, body: [UInt8], type: String = "application/connect+json", close: Bool = true,
        chunked: Bool = false
    ) -> [UInt8] {
        var head = "POST \(path) HTTP/1.1\r\nHost: test\r\nContent-Type: \(type)\r\n"
        if close { head += "Connection: close\r\n" }
        if chunked {
            head += "Transfer-Encoding: chunked\r\n\r\n"
            return Array(head.utf8) + HTTPResponseChunks.chunk(body) + Array("0\r\n\r\n".utf8)
        }
        head += "Content-Length: \(body.count)\r\n\r\n"
        return Array(head.utf8) + body
    }

    static func payload(_ text: String) -> String { Data(text.utf8).base64EncodedString() }

    @Test func aServerStreamAnswersEnvelopesInAChunkedBodyAndEndsWithEndOfStream() async throws {
        try await Harness.with(.tcp) { harness in
            let socket = try RawSocket(port: harness.tcp!.port)
            socket.write(
                Self.request(Self.stream, body: Self.envelope(#"{"payload":"\#(Self.payload("hi"))","count":3}"#)))
            let reply = try await StreamReply.read(from: socket)
            #expect(reply.status == 200)
            #expect(reply.headers["content-type"] == "application/connect+json")
            #expect(reply.headers["transfer-encoding"] == "chunked")
            let messages = reply.envelopes.filter { $0.flags == 0 }.map { try? JSONValue(parsing: $0.text) }
            #expect(messages.count == 3)
            #expect(reply.envelopes.map(\.flags) == [0, 0, 0, 2])
            #expect(reply.envelopes[2].text.contains(#""index":2"#), "\(reply.envelopes[2].text)")
            #expect(reply.envelopes[0].text.contains(Self.payload("hi")))
            #expect(reply.envelopes.last?.text == "{}")
        }
    }

    @Test func aServerStreamThatFailsSaysWhyInItsEndOfStream() async throws {
        try await Harness.with(.tcp) { harness in
            let socket = try RawSocket(port: harness.tcp!.port)
            socket.write(Self.request(Self.stream, body: Self.envelope(#"{"count":2,"failWithCode":5}"#)))
            let reply = try await StreamReply.read(from: socket)
            #expect(reply.status == 200)
            #expect(reply.envelopes.map(\.flags) == [0, 0, 2])
            let end = try JSONValue(parsing: reply.envelopes.last?.text ?? "")
            #expect(end["error"]?["code"] == .string("not_found"), "\(reply.envelopes.last?.text ?? "")")
            #expect(end["error"]?["message"] == .string("failed as asked"))
            #expect(end["metadata"] == .object([]))
        }
    }

    /// More than the binary protocol's 1 MiB of response credit: an HTTP client grants none, so the
    /// stream would stop there if credit paced it rather than the socket.
    @Test func aServerStreamLongerThanTheCreditWindowArrivesWhole() async throws {
        try await Harness.with(.tcp) { harness in
            let socket = try RawSocket(port: harness.tcp!.port)
            let kilobyte = Data(repeating: 0x61, count: 1024).base64EncodedString()
            socket.write(Self.request(Self.stream, body: Self.envelope(#"{"payload":"\#(kilobyte)","count":2000}"#)))
            let reply = try await StreamReply.read(from: socket)
            #expect(reply.envelopes.count == 2001)
            #expect(reply.envelopes.last?.text == "{}")
        }
    }

    /// A client that does not read: the handler stops producing once the socket's queue is above
    /// its bound, instead of queueing the whole stream in the server's memory.
    @Test func aServerStreamToAClientThatDoesNotReadWaitsForTheSocket() async throws {
        var limits = TCPServer.Limits()
        limits.writeHighWater = 64 << 10
        try await Harness.with(.tcp, limits: limits) { harness in
            let tcp = harness.tcp!
            let socket = try RawSocket(port: tcp.port)
            let kilobyte = Data(repeating: 0x62, count: 1024).base64EncodedString()
            // ~1.4 GB if it were all produced.
            socket.write(Self.request(Self.stream, body: Self.envelope(#"{"payload":"\#(kilobyte)","count":1000000}"#)))
            try await Task.sleep(for: TestTime.scaled(.milliseconds(800)))
            let queued = tcp.figures().unwrittenAnswerBytes
            #expect(queued <= 2 * limits.writeHighWater, "\(queued) bytes queued for a client that does not read")
            #expect(tcp.figures().callsInFlight == 1)
        }
    }

    @Test func aClientStreamsRequestEnvelopesInAChunkedBody() async throws {
        try await Harness.with(.tcp) { harness in
            let socket = try RawSocket(port: harness.tcp!.port)
            var head =
                "POST \(Self.collect) HTTP/1.1\r\nHost: t\r\nContent-Type: application/connect+json\r\nConnection: close\r\n"
            head += "Transfer-Encoding: chunked\r\n\r\n"
            socket.write(Array(head.utf8))
            for word in ["ab", "cd", "ef"] {
                // Each envelope split across two chunks, sent apart.
                let envelope = Self.envelope(#"{"payload":"\#(Self.payload(word))"}"#)
                socket.write(HTTPResponseChunks.chunk(Array(envelope.prefix(3))))
                try await Task.sleep(for: TestTime.scaled(.milliseconds(20)))
                socket.write(HTTPResponseChunks.chunk(Array(envelope.dropFirst(3))))
            }
            socket.write(Array("0\r\n\r\n".utf8))
            let reply = try await StreamReply.read(from: socket)
            #expect(reply.status == 200)
            #expect(reply.headers["content-type"] == "application/connect+json")
            #expect(reply.envelopes.map(\.flags) == [0, 2])
            let response = try JSONValue(parsing: reply.envelopes.first?.text ?? "")
            #expect(response["payload"] == .string(Self.payload("abcdef")))
            #expect(response["index"] == .number(JSONNumber(3)))
            #expect(reply.envelopes.last?.text == "{}")
        }
    }

    /// Requests beyond the inbox's 1 MiB window while the handler is slow: reading stops until it
    /// takes them (without pacing the inbox would refuse them, RESOURCE_EXHAUSTED), and all arrive.
    @Test func aClientStreamIsPacedByTheHandlersInbox() async throws {
        try await Harness.with(.tcp) { harness in
            let socket = try RawSocket(port: harness.tcp!.port)
            let chunk = Data(repeating: 0x63, count: 48 << 10).base64EncodedString()
            var body: [UInt8] = []
            for _ in 0..<64 { body += Self.envelope(#"{"payload":"\#(chunk)","delayMs":5}"#) }
            let request = Self.request(Self.collect, body: body)
            Task.detached { socket.write(request) }
            let reply = try await StreamReply.read(from: socket)
            #expect(reply.status == 200)
            #expect(reply.envelopes.map(\.flags) == [0, 2], "\(reply.envelopes.last?.text ?? "")")
            let response = try JSONValue(parsing: reply.envelopes.first?.text ?? "")
            #expect(response["index"] == .number(JSONNumber(64)))
            #expect(reply.envelopes.last?.text == "{}")
        }
    }

    @Test func aBidirectionalCallIsUnimplementedOverHTTP1AndNamesTheBinaryProtocol() async throws {
        try await Harness.with(.tcp) { harness in
            let socket = try RawSocket(port: harness.tcp!.port)
            socket.write(Self.request(Self.chat, body: Self.envelope(#"{"count":1}"#)))
            let reply = try await StreamReply.read(from: socket)
            #expect(reply.status == 200)
            #expect(reply.envelopes.map(\.flags) == [2])
            let end = try JSONValue(parsing: reply.envelopes.last?.text ?? "")
            #expect(end["error"]?["code"] == .string("unimplemented"))
            if case .string(let message)? = end["error"]?["message"] {
                #expect(message.contains("binary protocol"), "\(message)")
            } else {
                Issue.record("no message: \(reply.envelopes.last?.text ?? "")")
            }
        }
    }

    @Test func kindsAndEncodingsThatDoNotMatchAreRefused() async throws {
        try await Harness.with(.tcp) { harness in
            // A unary method with streaming's content type, and a stream with unary's: 415.
            let unary = try RawSocket(port: harness.tcp!.port)
            unary.write(Self.request("/menagerie.rpc.v1.Echo/Echo", body: Self.envelope("{}")))
            #expect(try await StreamReply.read(from: unary).status == 415)
            let plain = try RawSocket(port: harness.tcp!.port)
            plain.write(Self.request(Self.stream, body: Array("{}".utf8), type: "application/json"))
            #expect(try await StreamReply.read(from: plain).status == 415)
            // Two requests to a server stream, and an envelope cut short: invalid_argument.
            let two = try RawSocket(port: harness.tcp!.port)
            two.write(Self.request(Self.stream, body: Self.envelope("{}") + Self.envelope("{}")))
            let twoEnd = try await StreamReply.read(from: two).envelopes.last?.text ?? ""
            #expect(twoEnd.contains("invalid_argument"), "\(twoEnd)")
            let cut = try RawSocket(port: harness.tcp!.port)
            cut.write(Self.request(Self.collect, body: Array(Self.envelope(#"{"payload":"YWJj"}"#).dropLast(2))))
            let cutEnd = try await StreamReply.read(from: cut).envelopes.last?.text ?? ""
            #expect(cutEnd.contains("invalid_argument"), "\(cutEnd)")
        }
    }

    /// Bodies draw from the server's memory budget as our large frames do: a unary body or a
    /// request envelope larger than what is left is refused (503 / resource_exhausted) as soon as
    /// its length is known, before its bytes arrive; one that fits is served and gives it back.
    @Test func bodiesBeyondTheMemoryBudgetAreRefused() async throws {
        var limits = TCPServer.Limits()
        limits.memoryBudget = 256 << 10
        try await Harness.with(.tcp, limits: limits) { harness in
            let tcp = harness.tcp!
            let unary = try RawSocket(port: tcp.port)
            unary.write(
                Array(
                    "POST /menagerie.rpc.v1.Echo/Echo HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: \(1 << 20)\r\n\r\n{"
                        .utf8))
            let refused = try await StreamReply.read(from: unary)
            #expect(refused.status == 503)
            #expect(refused.headers["retry-after"] == "1")
            #expect(String(decoding: refused.body, as: UTF8.self).contains("resource_exhausted"))

            let streamed = try RawSocket(port: tcp.port)
            streamed.write(
                Array(
                    "POST \(Self.collect) HTTP/1.1\r\nHost: t\r\nContent-Type: application/connect+json\r\nTransfer-Encoding: chunked\r\n\r\n"
                        .utf8))
            streamed.write(HTTPResponseChunks.chunk([0, 0, 8, 0, 0]))  // an envelope of 512 KiB announced
            let end = try await StreamReply.read(from: streamed).envelopes.last?.text ?? ""
            #expect(end.contains("resource_exhausted"), "\(end)")

            // Within the budget: served, and the budget is whole again afterwards.
            let fits = try RawSocket(port: tcp.port)
            let payload = Data(repeating: 0x64, count: 96 << 10).base64EncodedString()
            let body = Array(#"{"payload":"\#(payload)"}"#.utf8)
            fits.write(
                Array(
                    "POST /menagerie.rpc.v1.Echo/Echo HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: \(body.count)\r\n\r\n"
                        .utf8))
            try await Task.sleep(for: TestTime.scaled(.milliseconds(50)))
            fits.write(body)
            #expect(try await StreamReply.read(from: fits).status == 200)
            try await waitUntil { tcp.loop.submit { tcp.budget.used } == 0 }
        }
    }

    /// `Connect-Accept-Encoding: gzip`: the stream's head says `Connect-Content-Encoding: gzip` and
    /// each large message comes compressed in an envelope flagged 0x01; small ones and the end stay plain.
    @Test func aServerStreamCompressesLargeMessagesForAClientThatAcceptsGzip() async throws {
        try await Harness.with(.tcp) { harness in
            let socket = try RawSocket(port: harness.tcp!.port)
            let text = Data(repeating: 0x61, count: 8 << 10).base64EncodedString()
            let body = Self.envelope(#"{"payload":"\#(text)","count":2}"#)
            let head =
                "POST \(Self.stream) HTTP/1.1\r\nHost: t\r\nContent-Type: application/connect+json\r\nConnect-Accept-Encoding: gzip\r\n"
                + "Connection: close\r\nContent-Length: \(body.count)\r\n\r\n"
            socket.write(Array(head.utf8) + body)
            let reply = try await StreamReply.read(from: socket)
            #expect(reply.headers["connect-content-encoding"] == "gzip")
            #expect(reply.envelopes.map(\.flags) == [1, 1, 2])
            for (index, envelope) in reply.rawEnvelopes.dropLast().enumerated() {
                let json = try Gzip.decompress(envelope.payload, limit: 1 << 20)
                #expect(
                    envelope.payload.count < json.count / 4, "\(envelope.payload.count) compressed of \(json.count)")
                let message = try JSONValue(parsing: String(decoding: json, as: UTF8.self))
                #expect(message["index"] == (index == 0 ? nil : .number(JSONNumber(index))))
                #expect(message["payload"] == .string(text))
            }
            #expect(reply.envelopes.last?.text == "{}")

            // Without the header, the same stream goes uncompressed.
            let plain = try RawSocket(port: harness.tcp!.port)
            plain.write(Self.request(Self.stream, body: body))
            let plainReply = try await StreamReply.read(from: plain)
            #expect(plainReply.headers["connect-content-encoding"] == nil)
            #expect(plainReply.envelopes.map(\.flags) == [0, 0, 2])
        }
    }

    /// A client stream answered before its body ended (the handler failed on the first message): the
    /// rest of a small body is read and dropped, and the connection serves the next request.
    @Test func aClientStreamAnsweredEarlyKeepsTheConnectionWhenLittleIsLeft() async throws {
        try await Harness.with(.tcp) { harness in
            let socket = try RawSocket(port: harness.tcp!.port)
            let failing = Self.envelope(#"{"failWithCode":9}"#)
            let rest = Self.envelope(#"{"payload":"\#(Self.payload(String(repeating: "x", count: 30000)))"}"#)
            let head =
                "POST \(Self.collect) HTTP/1.1\r\nHost: t\r\nContent-Type: application/connect+json\r\n"
                + "Content-Length: \(failing.count + rest.count)\r\n\r\n"
            socket.write(Array(head.utf8) + failing)
            let first = try await StreamReply.read(from: socket)
            let end = try JSONValue(parsing: first.envelopes.last?.text ?? "")
            #expect(end["error"]?["code"] == .string("failed_precondition"), "\(first.envelopes.last?.text ?? "")")
            #expect(first.headers["connection"] == nil, "the connection was to stay open")
            // The rest of the body comes after the answer, and then another call on the same connection.
            socket.write(rest)
            socket.write(
                Self.request(
                    "/menagerie.rpc.v1.Echo/Echo", body: Array(#"{"payload":"YQ=="}"#.utf8), type: "application/json"))
            let second = try await StreamReply.read(from: socket)
            #expect(second.status == 200)
            #expect(String(decoding: second.body, as: UTF8.self).contains("YQ=="))
        }
    }

    /// …but a body announcing more than the drain limit still to come is not read: the connection closes.
    @Test func aClientStreamAnsweredEarlyWithMuchLeftClosesTheConnection() async throws {
        try await Harness.with(.tcp) { harness in
            let socket = try RawSocket(port: harness.tcp!.port)
            let failing = Self.envelope(#"{"failWithCode":9}"#)
            let head =
                "POST \(Self.collect) HTTP/1.1\r\nHost: t\r\nContent-Type: application/connect+json\r\n"
                + "Content-Length: \(failing.count + (8 << 20))\r\n\r\n"
            socket.write(Array(head.utf8) + failing)
            let first = try await StreamReply.read(from: socket)
            #expect(first.envelopes.last?.text.contains("failed_precondition") == true)
            #expect(try await offPool { socket.readBlocking(count: 1) } == nil, "the server was to close")
        }
    }

    /// Keep-alive: streams and a unary call one after another on one connection, in order.
    @Test func streamsKeepTheConnectionAlive() async throws {
        try await Harness.with(.tcp) { harness in
            let socket = try RawSocket(port: harness.tcp!.port)
            socket.write(Self.request(Self.stream, body: Self.envelope(#"{"count":2}"#), close: false, chunked: true))
            socket.write(Self.request(Self.collect, body: Self.envelope(#"{"payload":"YQ=="}"#), close: false))
            let first = try await StreamReply.read(from: socket)
            let second = try await StreamReply.read(from: socket)
            #expect(first.envelopes.map(\.flags) == [0, 0, 2])
            #expect(second.envelopes.map(\.flags) == [0, 2])
            #expect(second.headers["connection"] == nil)
        }
    }
}

enum HTTPResponseChunks {
    static func chunk(_ bytes: [UInt8]) -> [UInt8] {
        Array((String(bytes.count, radix: 16) + "\r\n").utf8) + bytes + [13, 10]
    }
}

/// One HTTP response read off a raw socket: its head, and its body (chunked, by length, or to the
/// close) cut into Connect envelopes.
struct StreamReply {
    var status = 0
    var headers: [String: String] = [:]
    var body: [UInt8] = []
    var envelopes: [(flags: UInt8, text: String)] {
        var result: [(UInt8, String)] = []
        var index = 0
        while index + 5 <= body.count {
            let length = body[index + 1..<index + 5].reduce(0) { $0 << 8 | Int($1) }
            guard index + 5 + length <= body.count else { break }
            result.append((body[index], String(decoding: body[index + 5..<index + 5 + length], as: UTF8.self)))
            index += 5 + length
        }
        return result
    }

    /// The envelopes with their bytes as they came (compressed ones still compressed).
    var rawEnvelopes: [(flags: UInt8, payload: [UInt8])] {
        var result: [(UInt8, [UInt8])] = []
        var index = 0
        while index + 5 <= body.count {
            let length = body[index + 1..<index + 5].reduce(0) { $0 << 8 | Int($1) }
            guard index + 5 + length <= body.count else { break }
            result.append((body[index], Array(body[index + 5..<index + 5 + length])))
            index += 5 + length
        }
        return result
    }

    struct Cut: Error {}

    static func read(from socket: RawSocket) async throws -> StreamReply {
        try await offPool { try readBlocking(socket) }
    }

    private static func line(_ socket: RawSocket) throws -> String {
        var bytes: [UInt8] = []
        while true {
            guard let byte = socket.readBlocking(count: 1) else { throw Cut() }
            if byte[0] == 10, bytes.last == 13 { return String(decoding: bytes.dropLast(), as: UTF8.self) }
            bytes += byte
        }
    }

    private static func readBlocking(_ socket: RawSocket) throws -> StreamReply {
        var reply = StreamReply()
        let statusLine = try line(socket)
        reply.status = Int(statusLine.split(separator: " ")[1]) ?? 0
        while true {
            let field = try line(socket)
            if field.isEmpty { break }
            let parts = field.split(separator: ":", maxSplits: 1)
            reply.headers[parts[0].lowercased()] = parts.count > 1 ? parts[1].trimmingCharacters(in: .whitespaces) : ""
        }
        if reply.headers["transfer-encoding"] == "chunked" {
            while true {
                let size = Int(try line(socket), radix: 16) ?? 0
                if size == 0 {
                    _ = try line(socket)
                    break
                }
                guard let data = socket.readBlocking(count: size) else { throw Cut() }
                reply.body += data
                _ = try line(socket)
            }
        } else if let length = reply.headers["content-length"].flatMap(Int.init) {
            if length > 0 { reply.body = socket.readBlocking(count: length) ?? [] }
        }
        return reply
    }
}
