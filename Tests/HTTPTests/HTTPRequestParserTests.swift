import Testing

@testable import HTTP

/// The parser is strict: what a lenient parser would guess at is refused with the status to answer,
/// since a proxy in front might have guessed otherwise (request smuggling).
@Suite struct HTTPRequestParserTests {
    private func parse(_ text: String, limits: HTTPRequestParser.Limits = .init()) throws(HTTPParseError)
        -> [HTTPRequest]
    {
        var parser = HTTPRequestParser(limits: limits)
        parser.append(Array(text.utf8))
        var requests: [HTTPRequest] = []
        while let request = try parser.next() { requests.append(request) }
        return requests
    }

    private func status(of text: String, limits: HTTPRequestParser.Limits = .init()) -> Int? {
        do {
            _ = try parse(text, limits: limits)
            return nil
        } catch {
            return error.status
        }
    }

    @Test func aRequestWithABody() throws {
        let requests = try parse(
            "POST /a.B/C?x=1 HTTP/1.1\r\nHost: h\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}")
        #expect(requests.count == 1)
        let request = try #require(requests.first)
        #expect(request.method == "POST")
        #expect(request.path == "/a.B/C")
        #expect(request.query == "x=1")
        #expect(request.headers["content-type"] == "application/json")
        #expect(request.body == Array("{}".utf8))
        #expect(request.keepsAlive)
    }

    @Test func pipelinedRequestsComeOutInOrder() throws {
        let text =
            "GET /1 HTTP/1.1\r\nHost: h\r\n\r\nPOST /2 HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabcGET /3 HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n"
        let requests = try parse(text)
        #expect(requests.map(\.target) == ["/1", "/2", "/3"])
        #expect(requests[1].body == Array("abc".utf8))
        #expect(!requests[2].keepsAlive)
    }

    @Test func aRequestArrivingByteByByte() throws {
        let text =
            "POST /x HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;ext=1\r\nde\r\n0\r\nTrailer: t\r\n\r\n"
        var parser = HTTPRequestParser()
        var requests: [HTTPRequest] = []
        for byte in text.utf8 {
            parser.append([byte])
            if let request = try parser.next() { requests.append(request) }
        }
        #expect(requests.count == 1)
        #expect(requests.first?.body == Array("abcde".utf8))
        #expect(!parser.hasPartialRequest)
    }

    @Test func anIncompleteRequestWaits() throws {
        var parser = HTTPRequestParser()
        parser.append(Array("POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nab".utf8))
        #expect(try parser.next() == nil)
        #expect(parser.hasPartialRequest)
        parser.append(Array("cde".utf8))
        #expect(try parser.next()?.body == Array("abcde".utf8))
    }

    @Test func http10ClosesUnlessAskedToKeepAlive() throws {
        #expect(try parse("GET / HTTP/1.0\r\n\r\n").first?.keepsAlive == false)
        #expect(try parse("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n").first?.keepsAlive == true)
    }

    @Test(arguments: [
        ("bare LF line ends", "GET / HTTP/1.1\nHost: h\n\n"),
        ("a CR without LF inside a line", "GET / HTTP/1.1\r\nHost: h\rX: y\r\n\r\n"),
        ("whitespace before the colon", "GET / HTTP/1.1\r\nHost : h\r\n\r\n"),
        ("a folded header line", "GET / HTTP/1.1\r\nHost: h\r\nX: a\r\n b\r\n\r\n"),
        ("a header line without colon", "GET / HTTP/1.1\r\nHost: h\r\nnonsense\r\n\r\n"),
        ("no Host in HTTP/1.1", "GET / HTTP/1.1\r\n\r\n"),
        ("two Host fields", "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"),
        ("two spaces in the request line", "GET  / HTTP/1.1\r\nHost: h\r\n\r\n"),
        ("a method with a separator", "GE(T / HTTP/1.1\r\nHost: h\r\n\r\n"),
        ("an absolute-form target", "GET http://h/ HTTP/1.1\r\nHost: h\r\n\r\n"),
        ("a malformed version", "GET / HTTX/1.1\r\nHost: h\r\n\r\n"),
        ("a control character in a value", "GET / HTTP/1.1\r\nHost: h\r\nX: a\u{01}b\r\n\r\n"),
        ("a negative Content-Length", "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: -1\r\n\r\n"),
        ("a Content-Length with a sign", "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: +1\r\n\r\nx"),
        (
            "conflicting Content-Lengths",
            "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nxy"
        ),
        (
            "Content-Length and Transfer-Encoding",
            "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
        ),
        ("a malformed chunk size", "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"),
        ("a chunk without its CRLF", "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nab\r\n"),
        (
            "an oversized chunk-size field",
            "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n1000000000\r\n"
        ),
    ])
    func malformedRequestsAre400(_ reason: String, _ text: String) {
        #expect(status(of: text) == 400, "\(reason)")
    }

    @Test func limitsHaveTheirOwnStatuses() {
        let limits = HTTPRequestParser.Limits(maxHeadBytes: 200, maxHeaderFields: 3, maxBodyBytes: 10)
        let longHeader = "GET / HTTP/1.1\r\nHost: h\r\nX: \(String(repeating: "a", count: 300))\r\n\r\n"
        #expect(status(of: longHeader, limits: limits) == 431)
        // Even before the head ends: the client cannot make us buffer an endless head.
        #expect(status(of: "GET / HTTP/1.1\r\nX: \(String(repeating: "a", count: 300))", limits: limits) == 431)
        #expect(status(of: "GET / HTTP/1.1\r\nHost: h\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n", limits: limits) == 431)
        #expect(status(of: "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 11\r\n\r\n", limits: limits) == 413)
        #expect(
            status(
                of: "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n8\r\n12345678\r\n8\r\n",
                limits: limits) == 413)
        #expect(status(of: "GET / HTTP/2.0\r\nHost: h\r\n\r\n") == 505)
        #expect(status(of: "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip\r\n\r\n") == 501)
    }

    @Test func gzipRoundTripsAndRefusesBombsAndGarbage() throws {
        let text = Array(String(repeating: "lev ", count: 10_000).utf8)
        let packed = Gzip.compress(text)
        #expect(packed.count < text.count / 10)
        #expect(try Gzip.decompress(packed, limit: 1 << 20) == text)
        #expect(throws: Gzip.Failure.self) { try Gzip.decompress(packed, limit: 1000) }
        #expect(throws: Gzip.Failure.self) { try Gzip.decompress(Array(packed.dropLast(10)), limit: 1 << 20) }
        #expect(throws: Gzip.Failure.self) { try Gzip.decompress(Array("not gzip".utf8), limit: 1 << 20) }
    }

    @Test func responsesSerialize() {
        let response = HTTPResponse(status: 404, headers: ["Content-Type": "application/json"], body: Array("{}".utf8))
        #expect(
            String(decoding: response.serialized(closing: false), as: UTF8.self)
                == "HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}")
        #expect(HTTPResponse.chunk(Array("abc".utf8)) == Array("3\r\nabc\r\n".utf8))
    }

    /// A streamed body comes out in parts as it arrives, bounded by its reader rather than by
    /// `maxBodyBytes`; the request after it waits until it ended.
    @Test(arguments: [false, true])
    func aStreamedBodyComesOutInPartsAndTheNextRequestAfterIt(_ chunked: Bool) throws {
        var parser = HTTPRequestParser(limits: .init(maxBodyBytes: 4))
        let framing =
            chunked
            ? "Transfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n4;x=y\r\ndefg\r\n0\r\nT: v\r\n\r\n"
            : "Content-Length: 7\r\n\r\nabcdefg"
        let text = "POST /s HTTP/1.1\r\nHost: h\r\n" + framing + "GET /next HTTP/1.1\r\nHost: h\r\n\r\n"
        let bytes = Array(text.utf8)
        let split = bytes.firstIndex(of: UInt8(ascii: "b"))!
        parser.append(Array(bytes[..<split]))
        let streamed = try #require(try parser.next { $0.path == "/s" })
        #expect(streamed.body.isEmpty)
        #expect(parser.isStreamingBody)
        var body: [UInt8] = []
        var ended = false
        func drain() throws {
            while let part = try parser.nextBodyPart(maxBytes: 2) {
                switch part {
                case .bytes(let piece):
                    #expect(piece.count <= 2)
                    body += piece
                case .end:
                    ended = true
                    return
                }
            }
        }
        try drain()
        #expect(!ended)
        #expect(try parser.next { _ in true } == nil)
        parser.append(Array(bytes[split...]))
        try drain()
        #expect(ended)
        #expect(body == Array("abcdefg".utf8))
        #expect(try parser.next()?.target == "/next")
    }

    @Test func aStreamedBodyWithABadChunkIsRefused() throws {
        var parser = HTTPRequestParser()
        parser.append(Array("POST /s HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n".utf8))
        _ = try parser.next { _ in true }
        #expect(throws: HTTPParseError.self) { _ = try parser.nextBodyPart(maxBytes: 100) }
    }

    @Test func theBodyBeingJoinedIsKnownBeforeItArrives() throws {
        var parser = HTTPRequestParser()
        parser.append(Array("POST /u HTTP/1.1\r\nHost: h\r\nContent-Length: 100000\r\n\r\nab".utf8))
        #expect(try parser.next() == nil)
        #expect(parser.bodyBytesExpected == 100000)
        parser.append(Array("POST /u HTTP/1.1\r\n".utf8))
        var chunked = HTTPRequestParser()
        chunked.append(Array("POST /u HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n10000\r\nab".utf8))
        #expect(try chunked.next() == nil)
        #expect(chunked.bodyBytesExpected == 0x10000)
    }
}
