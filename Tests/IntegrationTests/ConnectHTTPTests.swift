import Foundation
import TestSupport
import Testing

/// The Connect protocol on a real zoo replica's one port, driven by a plain HTTP client (Python's
/// http.client and raw sockets, no Connect library): unary JSON and proto, errors with Connect's
/// codes and statuses, GET with ETag and 304, gzip both ways, CORS, metadata, timeouts, pipelining,
/// malformed requests answered 400 with nothing dispatched; the binary protocol keeps working beside it.
@Suite(.serialized) struct ConnectHTTPTests {
    static let python = FileManager.default.isExecutableFile(atPath: "/usr/bin/python3") ? "/usr/bin/python3" : nil
    static let required = ProcessInfo.processInfo.environment["CI"] == "true"

    static let script = #"""
        import gzip, http.client, json, socket, sys, base64, urllib.parse
        port = int(sys.argv[1])
        report = {}
        def call(method, path, body=None, headers={}):
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            c.request(method, path, body=body, headers=headers)
            r = c.getresponse()
            data = r.read()
            c.close()
            return r.status, {k.lower(): v for k, v in r.getheaders()}, data
        J = {"Content-Type": "application/json"}
        Z = "/menagerie.zoo.v1.Zoo/"
        s, h, b = call("POST", Z + "SearchAnimals", json.dumps({"query": "lev"}), J)
        report["search"] = [s, h.get("content-type"), json.loads(b)["animals"][0]["name"]]
        s, h, b = call("POST", Z + "GetAnimal", json.dumps({"id": "987654"}), J)
        report["not_found"] = [s, json.loads(b)]
        s, h, b = call("POST", Z + "Nope", "{}", J)
        report["unknown"] = [s, json.loads(b)["code"]]
        s, h, b = call("POST", Z + "GetAnimal", '{"id":', J)
        report["bad_json"] = [s, json.loads(b)["code"]]
        s, h, b = call("POST", Z + "GetAnimal", "{}", {"Content-Type": "text/plain"})
        report["bad_type"] = s
        s, h, b = call("POST", Z + "SearchAnimals", "{}", dict(J, **{"Connect-Timeout-Ms": "abc"}))
        report["bad_timeout"] = [s, json.loads(b)["code"]]
        # application/proto: GetAnimalRequest{id: 1} is field 1 varint 1.
        s, h, b = call("POST", Z + "GetAnimal", b"\x08\x01", {"Content-Type": "application/proto"})
        report["proto"] = [s, h.get("content-type"), "Panthera leo" in b.decode("utf-8", "replace")]
        # gzip both ways.
        s, h, b = call("POST", Z + "ExportGeoJSON", gzip.compress(b"{}"), dict(J, **{"Content-Encoding": "gzip", "Accept-Encoding": "gzip"}))
        report["gzip"] = [s, h.get("content-encoding"), "FeatureCollection" in gzip.decompress(b).decode()]
        # GET with ETag and 304, and a method with side effects refused as GET.
        q = "?connect=v1&encoding=json&message=" + urllib.parse.quote(json.dumps({"id": "1"}))
        s, h, b = call("GET", Z + "GetAnimal" + q)
        etag = h.get("etag")
        s2, h2, b2 = call("GET", Z + "GetAnimal" + q, headers={"If-None-Match": etag or ""})
        msg = base64.urlsafe_b64encode(b"\x08\x01").decode().rstrip("=")
        s3, h3, b3 = call("GET", Z + "GetAnimal?connect=v1&encoding=proto&base64=1&message=" + msg)
        s4, _, _ = call("GET", Z + "ImportData?connect=v1&encoding=json&message=%7B%7D")
        report["get"] = [s, json.loads(b)["animal"]["id"], etag is not None, s2, len(b2), s3, s4]
        # CORS.
        s, h, b = call("OPTIONS", Z + "SearchAnimals", headers={"Origin": "https://app.example", "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "content-type"})
        s2, h2, _ = call("POST", Z + "SearchAnimals", "{}", dict(J, Origin="https://app.example"))
        report["cors"] = [s, h.get("access-control-allow-origin"), h.get("access-control-allow-methods"), s2, h2.get("access-control-allow-origin")]
        # Pipelined requests answered in order, then a malformed one: 400 and the end of the connection.
        def raw(data):
            sock = socket.create_connection(("127.0.0.1", port), timeout=10)
            sock.sendall(data)
            out = b""
            while True:
                d = sock.recv(65536)
                if not d: break
                out += d
            return out
        def req(i): return b'POST /menagerie.zoo.v1.Zoo/GetAnimal HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s' % (len(b'{"id":"%d"}' % i), b'{"id":"%d"}' % i)
        out = raw(req(2) + req(1) + b"GET / HTTP/1.1\nHost: x\n\n" + req(3))
        report["pipeline"] = [out.count(b"HTTP/1.1 200 OK"), out.find(b'"id":"2"') < out.find(b'"id":"1"'), out.count(b"HTTP/1.1 400 Bad Request"), b'"id":"3"' in out]
        bad = [b"GET / HTTP/1.1\r\n\r\n", b"POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
               b"POST /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n0\r\n\r\n", b"GET /x HTTP/1.1\r\nHost : x\r\n\r\n",
               b"POST /menagerie.zoo.v1.Zoo/ImportData HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"]
        report["malformed"] = [raw(x).split(b"\r\n")[0].decode() for x in bad]
        print(json.dumps(report))
        """#

    @Test(.enabled(if: python != nil || required, "skipped: no /usr/bin/python3"))
    func connectOnTheZoosPort() async throws {
        let python = try #require(Self.python)
        let port = try RawSocket.freePortBlock(count: 1)
        let data = try Stack.scratchDirectory("menagerie-connect")
        defer { try? FileManager.default.removeItem(at: data) }
        let zoo = try await Stack.serveAlone("zoo", port: port, data: data)
        defer { zoo.stop() }
        let run = try await Stack.run(
            python, ["-c", Self.script, "\(port)"], environment: ProcessInfo.processInfo.environment)
        try #require(run.status == 0, "the HTTP client failed: \(run.output)")
        let report: [String: Any] = try Stack.report(run.output)

        // JSON's true and false arrive as NSNumbers, which compare as 1 and 0.
        let search = try #require(report["search"] as? [Any])
        #expect(search[0] as? Int == 200)
        #expect(search[1] as? String == "application/json")
        let notFound = try #require(report["not_found"] as? [Any])
        #expect(notFound[0] as? Int == 404)
        #expect((notFound[1] as? [String: String])?["code"] == "not_found")
        #expect((notFound[1] as? [String: String])?["message"]?.contains("987654") == true)
        #expect(report["unknown"] as? [AnyHashable] == [404, "unimplemented"])
        #expect(report["bad_json"] as? [AnyHashable] == [400, "invalid_argument"])
        #expect(report["bad_type"] as? Int == 415)
        #expect(report["bad_timeout"] as? [AnyHashable] == [400, "invalid_argument"])
        #expect(report["proto"] as? [AnyHashable] == [200, "application/proto", 1])
        #expect(report["gzip"] as? [AnyHashable] == [200, "gzip", 1])
        // GET: 200 with an ETag, 304 without a body for that tag, proto in base64, 405 for a write.
        #expect(report["get"] as? [AnyHashable] == [200, "1", 1, 304, 0, 200, 405])
        #expect(
            report["cors"] as? [AnyHashable] == [
                204, "https://app.example", "POST, GET, OPTIONS", 200, "https://app.example",
            ])
        // Two answers in request order, the malformed third refused, the fourth never served.
        #expect(report["pipeline"] as? [AnyHashable] == [2, 1, 1, 0])
        #expect(
            report["malformed"] as? [String] == [
                "HTTP/1.1 400 Bad Request", "HTTP/1.1 400 Bad Request", "HTTP/1.1 400 Bad Request",
                "HTTP/1.1 400 Bad Request",
                "HTTP/1.1 400 Bad Request",
            ])
        // The binary protocol on the same port still serves.
        try await Stack.waitServing(port: port)
    }
}
