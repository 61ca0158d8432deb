import Foundation
import TestSupport
import Testing

/// Every service of the stack over plain HTTP with JSON (the Connect protocol), as a phone or a browser calls
/// it — Python's http.client, no Connect library: the built-in health check on each, a read of each domain,
/// a user's bearer token (health's sign-up, the stack's one identity) as an `Authorization` header, a server stream (health's Pull) and a client stream
/// (an OCR scan sent in two chunks) with Connect's envelopes.
@Suite(.serialized) struct ConnectEveryServiceTests {
    static let python = FileManager.default.isExecutableFile(atPath: "/usr/bin/python3") ? "/usr/bin/python3" : nil
    static let required = ProcessInfo.processInfo.environment["CI"] == "true"
    static let photo = Stack.root.deletingLastPathComponent().appendingPathComponent(
        "shared/datasets/ocr/phototest.tif")

    static let script = #"""
        import base64, http.client, json, struct, sys
        ports, token, photo = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3]
        def call(port, path, body, headers):
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
            c.request("POST", path, body=body, headers=headers)
            r = c.getresponse()
            data = r.read()
            c.close()
            return r.status, data
        J = {"Content-Type": "application/json"}
        S = {"Content-Type": "application/connect+json"}
        A = {"Authorization": "Bearer " + token}
        def envelope(message, flags=0):
            body = json.dumps(message).encode()
            return struct.pack(">BI", flags, len(body)) + body
        def envelopes(data):
            out, i = [], 0
            while i + 5 <= len(data):
                flags, n = struct.unpack(">BI", data[i:i + 5])
                out.append([flags, json.loads(data[i + 5:i + 5 + n])])
                i += 5 + n
            return out
        report = {}
        for name, port in ports.items():
            s, b = call(port, "/menagerie.rpc.v1.Health/Check", "{}", J)
            report["check_" + name] = [s, json.loads(b).get("status")]
        s, b = call(ports["zoo"], "/menagerie.zoo.v1.Zoo/SearchAnimals", json.dumps({"text": "lev"}), J)
        report["zoo_search"] = [s, len(json.loads(b).get("animals", []))]
        s, b = call(ports["ocr"], "/menagerie.ocr.v1.OCR/ListTemplates", "{}", dict(J, **A))
        report["ocr_templates"] = s
        s, b = call(ports["classification"], "/menagerie.classification.v1.Classification/ListModels", "{}", J)
        report["classification_models"] = s
        s, b = call(ports["health"], "/menagerie.health.v1.Health/GetAccount", "{}", J)
        report["health_without_token"] = [s, json.loads(b).get("code")]
        s, b = call(ports["health"], "/menagerie.health.v1.Health/GetAccount", "{}", dict(J, **A))
        report["health_account"] = [s, json.loads(b).get("name")]
        sample = {"uuid": "6f1f3c1e-2b7a-4c55-9d0e-3a1b2c4d5e6f", "type": "stepCount", "value": 1200, "unit": "count", "source": "web", "startMs": "1767261600000", "endMs": "1767265200000"}
        s, b = call(ports["health"], "/menagerie.health.v1.Health/AddSamples", json.dumps({"samples": [sample]}), dict(J, **A))
        report["health_add"] = [s, b.decode()[:300]]
        s, b = call(ports["health"], "/menagerie.health.v1.Health/Pull", envelope({}), dict(S, **A))
        frames = envelopes(b)
        report["health_pull"] = [s, [f[0] for f in frames], sum(len(f[1].get("samples", [])) for f in frames if f[0] == 0), frames[-1][1] if frames else None]
        image = open(photo, "rb").read()
        half = len(image) // 2
        body = envelope({"options": {"languages": ["eng"]}}) + envelope({"chunk": base64.b64encode(image[:half]).decode()}) \
            + envelope({"chunk": base64.b64encode(image[half:]).decode()})
        s, b = call(ports["ocr"], "/menagerie.ocr.v1.OCR/Scan", body, dict(S, **A))
        frames = envelopes(b)
        report["ocr_scan"] = [s, [f[0] for f in frames], "point" in (frames[0][1].get("text", "") if frames else ""), frames[-1][1] if frames else None]
        print(json.dumps(report))
        """#

    @Test(
        .enabled(
            if: (python != nil && FileManager.default.fileExists(atPath: photo.path)) || required,
            "skipped: needs /usr/bin/python3 and ../shared/datasets/ocr/phototest.tif"))
    func everyServiceAnswersConnectJSONWithEachCallKind() async throws {
        let python = try #require(Self.python)
        try await Stack.with { stack in
            let up = try await stack.compose("up")
            try #require(up.status == 0, "compose up failed: \(up.output)")
            let created = try await stack.gateway(["health", "user", "create", "jana", "--json"])
            try #require(created.status == 0, "\(created.output)")
            let open = try #require(created.output.firstIndex(of: "{")),
                close = try #require(created.output.lastIndex(of: "}"))
            let json = String(created.output[open...close])
            let user = try #require(try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any])
            let token = try #require(user["token"] as? String)
            let ports = try JSONSerialization.data(withJSONObject: stack.basePorts)
            let run = try await Stack.run(
                python, ["-c", Self.script, String(decoding: ports, as: UTF8.self), token, Self.photo.path],
                environment: ProcessInfo.processInfo.environment)
            try #require(run.status == 0, "\(run.output)")
            let report: [String: Any] = try Stack.report(run.output)

            for service in Stack.services {
                let check = report["check_\(service)"] as? [Any]
                #expect(
                    check?.first as? Int == 200 && check?.last as? String == "SERVING_STATUS_SERVING",
                    "\(service): \(String(describing: check))")
            }
            let search = report["zoo_search"] as? [Int]
            #expect(search?.first == 200 && (search?.last ?? 0) > 0, "\(String(describing: search))")
            #expect(report["ocr_templates"] as? Int == 200)
            #expect(report["classification_models"] as? Int == 200)
            // Without a token: 401 with Connect's code; with it, the account.
            let anonymous = report["health_without_token"] as? [Any]
            #expect(
                anonymous?.first as? Int == 401 && anonymous?.last as? String == "unauthenticated",
                "\(String(describing: anonymous))")
            let account = report["health_account"] as? [Any]
            #expect(
                account?.first as? Int == 200 && account?.last as? String == "jana", "\(String(describing: account))")
            let added = report["health_add"] as? [Any]
            #expect(added?.first as? Int == 200, "\(String(describing: added))")
            // A server stream: message envelopes (flag 0), then the end of the stream (flag 2) with no error.
            let pull = try #require(report["health_pull"] as? [Any])
            #expect(pull[0] as? Int == 200, "\(pull)")
            #expect(
                (pull[1] as? [Int])?.last == 2 && (pull[1] as? [Int])?.dropLast().allSatisfy { $0 == 0 } == true,
                "\(pull)")
            #expect(pull[2] as? Int == 1, "the sample added over HTTP comes back in the pull: \(pull)")
            #expect((pull[3] as? [String: Any])?["error"] == nil, "\(pull)")
            // A client stream: two chunks of a TIFF in; one answer and the end of the stream out.
            let scan = try #require(report["ocr_scan"] as? [Any])
            #expect(scan[0] as? Int == 200 && scan[1] as? [Int] == [0, 2] && scan[2] as? Bool == true, "\(scan)")
        }
    }
}
