import Foundation
import TestSupport
import Testing

/// The zoo app's REST API on a real zoo replica loaded with the real animals.json and map-metadata.json
/// (through `gateway zoo import`), read with Python's http.client and checked field by field against
/// those files: every animal and map location, every footpath node and road; the 404 and 422 shapes,
/// ETag/304, gzip, the OpenAPI document and /docs, the web page at /.
@Suite(.serialized) struct ZooRestAPITests {
    static let python = FileManager.default.isExecutableFile(atPath: "/usr/bin/python3") ? "/usr/bin/python3" : nil
    static let required = ProcessInfo.processInfo.environment["CI"] == "true"
    static let dataDirectory = Stack.root.deletingLastPathComponent().appendingPathComponent("shared/datasets/zoo")
    static let enabled = (FileManager.default.fileExists(atPath: dataDirectory.path) && python != nil) || required

    static let script = #"""
        import gzip, http.client, json, sys
        port, animals_path, map_path = int(sys.argv[1]), sys.argv[2], sys.argv[3]
        report = {}
        def get(path, headers={}):
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            c.request("GET", path, headers=headers)
            r = c.getresponse()
            data = r.read()
            c.close()
            return r.status, {k.lower(): v for k, v in r.getheaders()}, data
        def norm(v):
            # A missing text is null or "" in animals.json; values are compared with runs of white space collapsed.
            if v is None or v == "" or v == []: return None
            if isinstance(v, str): return " ".join(v.split())
            return v
        expected = {a["_id"]: a for a in json.load(open(animals_path, encoding="utf-8"))}
        s, h, b = get("/api/animals")
        body = json.loads(b)
        report["animals"] = [s, h.get("content-type"), ",".join(sorted(body.keys())), ",".join(sorted(body["metadata"].keys())), len(body["data"]), len(expected)]
        mismatches = []
        for a in body["data"]:
            e = expected.get(a["_id"])
            if e is None: mismatches.append(["unknown id", a["_id"]]); continue
            if sorted(a.keys()) != sorted(e.keys()): mismatches.append(["keys", a["_id"], sorted(set(a) ^ set(e))]); continue
            for k in e:
                if k == "map_locations": continue
                if norm(a[k]) != norm(e[k]): mismatches.append([a["_id"], k, a[k], e[k]])
            got = {m["_id"]: m for m in a["map_locations"]}
            if sorted(got) != sorted(m["_id"] for m in e["map_locations"]): mismatches.append([a["_id"], "map_locations", sorted(got)]); continue
            for m in e["map_locations"]:
                g = got[m["_id"]]
                for k in ("name", "is_animal_pen", "is_building", "singular_names"):
                    # 255 locations of animals.json have no singular_names: the zoo app's server answers null there, never [].
                    want, have = m.get(k), g[k]
                    if (want is None) != (have is None): mismatches.append([a["_id"], "map_locations." + k, g[k], m.get(k)]); continue
                    if isinstance(want, list): want, have = [norm(x) for x in want], [norm(x) for x in have]
                    if norm(have) != norm(want): mismatches.append([a["_id"], "map_locations." + k, g[k], m.get(k)])
                if g["geometry"]["_type"] != m["geometry"]["_type"]: mismatches.append([a["_id"], "geometry._type", g["geometry"]["_type"]])
                gc, mc = g["geometry"]["coordinates"], m["geometry"]["coordinates"]
                if len(gc) != len(mc) or len(gc[0]) != len(mc[0]) or any(abs(x - y) > 1e-9 for p, q in zip(gc[0], mc[0]) for x, y in zip(p, q)):
                    mismatches.append([a["_id"], "geometry.coordinates"])
        report["animal_mismatches"] = mismatches[:10] + [len(mismatches)]
        # ETag and 304; gzip when asked, the same bytes inflated.
        etag = h.get("etag")
        s2, h2, b2 = get("/api/animals", {"If-None-Match": etag or "-"})
        s3, h3, b3 = get("/api/animals", {"Accept-Encoding": "gzip"})
        report["caching"] = [etag is not None, s2, len(b2), s3, h3.get("content-encoding"), gzip.decompress(b3) == b if s3 == 200 else False, h3.get("etag") == etag]
        s, h, b = get("/api/animals?include_currently_unavailable=true")
        report["all"] = [s, len(json.loads(b)["data"])]
        s, _, b = get("/api/animals?include_currently_unavailable=maybe")
        report["bad_flag"] = [s, "detail" in json.loads(b)]
        # One animal as the app's server answered it, and as its own test reads it: a list of one, data[0]["_id"].
        s, h, b = get("/api/animals/3")
        data = json.loads(b)["data"]
        report["one"] = [s, ",".join(sorted(json.loads(b).keys())), len(data), data[0]["_id"], data[0]["name"] == expected[3]["name"]]
        # The flag is read as on the list (every animal of animals.json is kept, so it changes no answer here).
        s2, _, b2 = get("/api/animals/3?include_currently_unavailable=true")
        s3, _, b3 = get("/api/animals/3?include_currently_unavailable=maybe")
        report["one_flag"] = [s2, [a["_id"] for a in json.loads(b2)["data"]] == [3], s3, "detail" in json.loads(b3)]
        # HEAD wherever GET works: GET's headers, Content-Length included, and no body.
        def head(path):
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            c.request("HEAD", path)
            r = c.getresponse()
            data = r.read()
            c.close()
            return r.status, {k.lower(): v for k, v in r.getheaders()}, data
        heads = []
        for path in ("/api/animals", "/api/animals/3", "/api/map/metadata", "/api/openapi.json", "/"):
            s, h, b = head(path)
            gs, gh, gb = get(path)
            heads.append([path, s, int(h.get("content-length", -1)) == len(gb), h.get("etag") == gh.get("etag"), len(b)])
        report["head"] = heads
        s, h, b = get("/api/animals/987654321")
        report["missing"] = [s, h.get("content-type"), json.loads(b)]
        s, _, b = get("/api/animals/abc")
        report["not_a_number"] = s
        lists = {}
        for name in ("classes", "biotops", "foods", "zooHouses"):
            s, h, b = get("/api/" + name)
            d = json.loads(b)
            lists[name] = [s, sorted(d.keys()), len(d["data"]), all(isinstance(x, str) for x in d["data"])]
        report["lists"] = lists
        s, h, b = get("/api/classes")
        report["classes_match"] = sorted(x.lower() for x in json.loads(b)["data"]) == sorted({norm(a["class_"]).lower() for a in expected.values() if a["class_"]})
        # The footpath graph against map-metadata.json.
        m = json.load(open(map_path, encoding="utf-8"))
        s, h, b = get("/api/map/metadata")
        g = json.loads(b)
        want_nodes = {n["_id"]: n for n in m["nodes"]}
        node_mismatches = [n["_id"] for n in g["nodes"] if n["_id"] not in want_nodes or abs(n["lon"] - want_nodes[n["_id"]]["lon"]) > 1e-9
                           or abs(n["lat"] - want_nodes[n["_id"]]["lat"]) > 1e-9 or sorted(n["road_ids"]) != sorted(want_nodes[n["_id"]]["road_ids"])
                           or n["is_connector"] != want_nodes[n["_id"]]["is_connector"]]
        # The routing graph drops a node repeated right after itself (road 54043282 of the file has such).
        def walk(ids): return [x for i, x in enumerate(ids) if i == 0 or ids[i - 1] != x]
        want_roads = {r["_id"]: walk([c["_id"] for c in r["geometry"]["coordinates"]]) for r in m["roads"]}
        road_mismatches = [r["_id"] for r in g["roads"] if r.get("type") != "Feature" or "properties" not in r or r["geometry"]["type"] != "LineString" or [c["_id"] for c in r["geometry"]["coordinates"]] != want_roads.get(r["_id"])
                           or any(sorted(c.keys()) != ["_id", "is_connector", "lat", "lon", "road_ids"] for c in r["geometry"]["coordinates"])]
        report["map"] = [s, sorted(g.keys()), len(g["nodes"]), len(m["nodes"]), len(g["roads"]), len(m["roads"]), node_mismatches[:5], road_mismatches[:5]]
        s, h, b = get("/api/map/data")
        report["tiles"] = [s, json.loads(b).get("detail") is not None]
        s, h, b = get("/api/openapi.json")
        doc = json.loads(b)
        report["openapi"] = [s, doc["openapi"], sorted(doc["paths"].keys())]
        s, h, b = get("/docs")
        report["docs"] = [s, h.get("content-type"), all(p in b.decode() for p in doc["paths"]), b"<script" in b, b"http" in b.split(b"<body>")[0]]
        s, h, b = get("/")
        report["page"] = [s, h.get("content-type"), b"<html" in b]
        s, h, b = get("/no/such/page")
        report["nothing"] = s
        print(json.dumps(report))
        """#

    @Test(.enabled(if: enabled, "skipped: ../shared/datasets/zoo or python3 is missing (set CI=true to require them)"))
    func theZooAppsRoutesAnswerInItsShapes() async throws {
        let python = try #require(Self.python)
        let port = try RawSocket.freePortBlock(count: 1)
        let data = try Stack.scratchDirectory("menagerie-rest")
        defer { try? FileManager.default.removeItem(at: data) }
        let zoo = try await Stack.serveAlone("zoo", port: port, data: data, ["--no-sample-data"])
        defer { zoo.stop() }
        let animals = Self.dataDirectory.appendingPathComponent("animals.json").path
        let map = Self.dataDirectory.appendingPathComponent("map-metadata.json").path
        // animals.json alone: the lexicon CSV's values would win over the file the answers are checked against.
        let imported = try await Stack.run(
            "\(Stack.binDirectory)/gateway",
            [
                "zoo", "import", "--animals-json", animals, "--map", map, "--endpoint", "zoo=127.0.0.1:\(port)",
                "--json",
            ],
            environment: ProcessInfo.processInfo.environment)
        try #require(imported.status == 0, "\(imported.output)")

        let run = try await Stack.run(
            python, ["-c", Self.script, "\(port)", animals, map], environment: ProcessInfo.processInfo.environment)
        try #require(run.status == 0, "the HTTP client failed: \(run.output)")
        let report: [String: Any] = try Stack.report(run.output)

        #expect(
            report["animals"] as? [AnyHashable] == [
                200, "application/json", "data,metadata", "last_update_end,last_update_start,next_update", 605, 605,
            ])
        #expect(report["animal_mismatches"] as? [AnyHashable] == [0], "\(report["animal_mismatches"] ?? "")")
        // JSON's true arrives as 1: a tag, 304 without a body, gzip that inflates to the same bytes under the same tag.
        #expect(report["caching"] as? [AnyHashable] == [1, 304, 0, 200, "gzip", 1, 1])
        #expect(report["all"] as? [AnyHashable] == [200, 605])
        #expect(report["bad_flag"] as? [AnyHashable] == [422, 1])
        #expect(report["one"] as? [AnyHashable] == [200, "data,metadata", 1, 3, 1])
        #expect(report["one_flag"] as? [AnyHashable] == [200, 1, 422, 1])
        for head in try #require(report["head"] as? [[Any]]) {
            #expect(head[1] as? Int == 200, "\(head)")
            #expect(head[2] as? Bool == true, "HEAD's Content-Length is GET's body's: \(head)")
            #expect(head[3] as? Bool == true, "\(head)")
            #expect(head[4] as? Int == 0, "HEAD has no body: \(head)")
        }
        let missing = try #require(report["missing"] as? [Any])
        #expect(missing[0] as? Int == 404)
        #expect(missing[1] as? String == "application/json")
        #expect(missing[2] as? [String: String] == ["detail": "Item not found"])
        #expect(report["not_a_number"] as? Int == 422)
        let lists = try #require(report["lists"] as? [String: [Any]])
        for name in ["classes", "biotops", "foods", "zooHouses"] {
            let list = try #require(lists[name], "\(name)")
            #expect(list[0] as? Int == 200, "\(name)")
            #expect(list[1] as? [String] == ["data", "metadata"], "\(name)")
            #expect((list[2] as? Int ?? 0) > 0, "\(name)")
            #expect(list[3] as? Bool == true, "\(name)")
        }
        #expect(report["classes_match"] as? Bool == true)
        let map0 = try #require(report["map"] as? [Any])
        #expect(map0[0] as? Int == 200)
        #expect(map0[1] as? [String] == ["metadata", "nodes", "roads"])
        #expect(map0[2] as? Int == map0[3] as? Int)
        #expect(map0[4] as? Int == map0[5] as? Int)
        #expect((map0[6] as? [Any])?.isEmpty == true, "nodes that differ: \(map0[6])")
        #expect((map0[7] as? [Any])?.isEmpty == true, "roads that differ: \(map0[7])")
        #expect(report["tiles"] as? [AnyHashable] == [404, 1])
        let openapi = try #require(report["openapi"] as? [Any])
        #expect(openapi[0] as? Int == 200)
        #expect((openapi[1] as? String)?.hasPrefix("3.") == true)
        #expect(
            openapi[2] as? [String] == [
                "/api/animals", "/api/animals/{id}", "/api/biotops", "/api/classes", "/api/foods", "/api/map/data",
                "/api/map/metadata",
                "/api/openapi.json", "/api/zooHouses", "/docs",
            ])
        // A page of its own: every route on it, no script, nothing fetched from elsewhere.
        #expect(report["docs"] as? [AnyHashable] == [200, "text/html; charset=utf-8", 1, 0, 0])
        #expect(report["page"] as? [AnyHashable] == [200, "text/html; charset=utf-8", 1])
        #expect(report["nothing"] as? Int == 404)

        // The routes are calls: counted in `gateway stats` under their bindings, the failures by their status.
        let statsRun = try await Stack.run(
            "\(Stack.binDirectory)/gateway", ["stats", "zoo", "--endpoint", "zoo=127.0.0.1:\(port)", "--json"],
            environment: ProcessInfo.processInfo.environment)
        try #require(statsRun.status == 0, "\(statsRun.output)")
        let stats = try #require(
            try JSONSerialization.jsonObject(with: Data(statsRun.output.utf8)) as? [[String: Any]], "\(statsRun.output)"
        )
        let methods = stats.flatMap { $0["methods"] as? [[String: Any]] ?? [] }
        func calls(_ path: String) -> Int? {
            methods.first { $0["path"] as? String == path }.flatMap { Int($0["calls"] as? String ?? "") }
        }
        func errors(_ path: String) -> Int? {
            methods.first { $0["path"] as? String == path }.flatMap { Int($0["errors"] as? String ?? "0") }
        }
        #expect((calls("GET /api/animals") ?? 0) >= 6, "\(methods)")
        // /3 (twice, and HEAD), 987654321, abc, =true, =maybe.
        #expect((calls("GET /api/animals/{id}") ?? 0) >= 7, "\(methods)")
        #expect(errors("GET /api/animals/{id}") == 3, "404, 422, 422: \(methods)")
        #expect(calls("GET /api/map/data") == 1 && errors("GET /api/map/data") == 1, "\(methods)")
        for path in ["GET /api/classes", "GET /api/map/metadata", "GET /api/openapi.json", "GET /docs", "GET /{file}"] {
            #expect((calls(path) ?? 0) >= 1, "\(path): \(methods)")
        }
    }
}
