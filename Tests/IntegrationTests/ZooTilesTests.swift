import Foundation
import TestSupport
import Testing

/// `gateway zoo import --tiles` and `GET /api/map/data` on two real zoo replicas sharing one data directory: 404
/// before any import; the file imported through one replica comes back byte for byte from both, as an
/// attachment with one ETag (304 on a match, never gzipped); a file that is not SQLite, or SQLite without a
/// `tiles` table, is refused with a clear INVALID_ARGUMENT and leaves the stored file as it was; a new file
/// replaces it; `zoo status` reports it. The MBTiles files are made with Python's sqlite3, read with http.client.
@Suite(.serialized) struct ZooTilesTests {
    static let python = FileManager.default.isExecutableFile(atPath: "/usr/bin/python3") ? "/usr/bin/python3" : nil

    /// `make DIR`: writes good.mbtiles, other.mbtiles (different tiles), plain.txt and no-tiles.sqlite.
    /// `get PORT FILE ETAG`: fetches /api/map/data and prints what matters as one JSON line.
    static let script = #"""
        import hashlib, http.client, json, os, sqlite3, sys
        if sys.argv[1] == "make":
            d = sys.argv[2]
            for name, tiles in (("good.mbtiles", 3), ("other.mbtiles", 5)):
                db = sqlite3.connect(os.path.join(d, name))
                db.execute("CREATE TABLE metadata (name TEXT, value TEXT)")
                db.execute("INSERT INTO metadata VALUES ('name', 'zoo_prague_map'), ('format', 'png')")
                db.execute("CREATE TABLE tiles (zoom_level INTEGER, tile_column INTEGER, tile_row INTEGER, tile_data BLOB)")
                db.executemany("INSERT INTO tiles VALUES (16, ?, ?, ?)", [(i, i, os.urandom(40000)) for i in range(tiles)])
                db.commit(); db.close()
            open(os.path.join(d, "plain.txt"), "w").write("these are not tiles\n" * 100)
            db = sqlite3.connect(os.path.join(d, "no-tiles.sqlite"))
            db.execute("CREATE TABLE metadata (name TEXT, value TEXT)"); db.commit(); db.close()
            sys.exit(0)
        port, path, etag = int(sys.argv[2]), sys.argv[3], sys.argv[4]
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        headers = {"Accept-Encoding": "gzip"}
        if etag != "-": headers["If-None-Match"] = etag
        c.request("GET", "/api/map/data", headers=headers)
        r = c.getresponse(); body = r.read(); h = {k.lower(): v for k, v in r.getheaders()}
        print(json.dumps({"status": r.status, "type": h.get("content-type"), "disposition": h.get("content-disposition"),
                          "etag": h.get("etag"), "encoding": h.get("content-encoding"), "length": len(body),
                          "equal": path != "-" and body == open(path, "rb").read(),
                          "detail": json.loads(body).get("detail") if h.get("content-type") == "application/json" else None}))
        """#

    struct Answer: Decodable {
        let status: Int
        let type: String?
        let disposition: String?
        let etag: String?
        let encoding: String?
        let length: Int
        let equal: Bool
        let detail: String?
    }

    static func get(_ port: Int, expecting file: String = "-", ifNoneMatch: String? = nil) async throws -> Answer {
        let python = try #require(python)
        let run = try await Stack.run(
            python, ["-c", script, "get", "\(port)", file, ifNoneMatch ?? "-"], environment: [:])
        try #require(run.status == 0, "the HTTP client failed: \(run.output)")
        return try JSONDecoder().decode(Answer.self, from: Data(run.output.utf8))
    }

    @Test(.enabled(if: python != nil, "skipped: python3 is missing"))
    func importedTilesAreServedByEveryReplicaAndABadFileChangesNothing() async throws {
        let python = try #require(Self.python)
        let ports = try RawSocket.freePortBlock(count: 2)
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent(
            "menagerie-tiles-\(UUID().uuidString)")
        let data = scratch.appendingPathComponent("data"), files = scratch.appendingPathComponent("files")
        try FileManager.default.createDirectory(at: data, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(at: files, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: scratch) }
        let made = try await Stack.run(python, ["-c", Self.script, "make", files.path], environment: [:])
        try #require(made.status == 0, "\(made.output)")
        let first = try await Stack.serveAlone("zoo", port: ports, data: data, ["--no-sample-data"])
        defer { first.stop() }
        let second = try await Stack.serveAlone("zoo", port: ports + 1, data: data, ["--no-sample-data"])
        defer { second.stop() }
        func gateway(_ arguments: [String]) async throws -> (status: Int32, output: String) {
            try await Stack.run(
                "\(Stack.binDirectory)/gateway", arguments + ["--endpoint", "zoo=127.0.0.1:\(ports)"],
                environment: ProcessInfo.processInfo.environment)
        }
        let good = files.appendingPathComponent("good.mbtiles").path,
            other = files.appendingPathComponent("other.mbtiles").path

        // Nothing imported: FastAPI's 404, as the app's server says it for anything it does not have.
        let before = try await Self.get(ports)
        #expect(
            before.status == 404 && before.type == "application/json" && before.detail == "Item not found", "\(before)")
        let emptyStatus = try await gateway(["zoo", "status"])
        #expect(emptyStatus.status == 0 && emptyStatus.output.contains("map tiles: none"), "\(emptyStatus.output)")

        // Imported through the first replica, served by both: the same bytes under the same tag.
        let imported = try await gateway(["zoo", "import", "--tiles", good])
        try #require(imported.status == 0, "\(imported.output)")
        #expect(imported.output.contains("stored the map tiles"), "\(imported.output)")
        let size = try #require(try FileManager.default.attributesOfItem(atPath: good)[.size] as? Int)
        var tag: String?
        for index in 0..<2 {
            let answer = try await Self.get(ports + index, expecting: good)
            #expect(answer.status == 200 && answer.equal && answer.length == size, "replica \(index): \(answer)")
            #expect(answer.type == "application/vnd.sqlite3" && answer.encoding == nil, "replica \(index): \(answer)")
            #expect(answer.disposition == "attachment; filename=\"zoo.mbtiles\"", "replica \(index): \(answer)")
            #expect(answer.etag != nil && (tag == nil || answer.etag == tag), "replica \(index): \(answer)")
            tag = answer.etag
        }
        let notModified = try await Self.get(ports + 1, ifNoneMatch: tag)
        #expect(notModified.status == 304 && notModified.length == 0 && notModified.etag == tag, "\(notModified)")

        // Bad files: refused with what is wrong, the stored file unchanged, nothing left behind.
        let refusals = [
            ("plain.txt", "does not start with the SQLite 3 header"),
            ("no-tiles.sqlite", "has no `tiles` table or view"),
        ]
        for (name, says) in refusals {
            let refused = try await gateway(["zoo", "import", "--tiles", files.appendingPathComponent(name).path])
            #expect(
                refused.status == 3 && refused.output.contains("not an MBTiles file") && refused.output.contains(says),
                "\(name): \(refused.output)")
        }
        let afterRefusals = try await Self.get(ports, expecting: good)
        #expect(afterRefusals.status == 200 && afterRefusals.equal && afterRefusals.etag == tag, "\(afterRefusals)")
        let left = try FileManager.default.contentsOfDirectory(atPath: data.path).filter { $0.contains(".upload-") }
        #expect(left.isEmpty, "temporary files left: \(left)")

        let status = try await gateway(["zoo", "status", "--json"])
        let metadata = try #require(
            try JSONSerialization.jsonObject(with: Data(status.output.utf8)) as? [String: Any], "\(status.output)")
        let tiles = try #require(metadata["tiles"] as? [String: Any], "\(status.output)")
        #expect("\(tiles["sizeBytes"] ?? "")" == "\(size)", "\(tiles)")
        let text = try await gateway(["zoo", "status"])
        #expect(text.output.contains("map tiles: \(size) bytes, imported "), "\(text.output)")

        // A new file replaces it on every replica, under a new tag.
        let replaced = try await gateway(["zoo", "import", "--tiles", other])
        try #require(replaced.status == 0, "\(replaced.output)")
        for index in 0..<2 {
            let answer = try await Self.get(ports + index, expecting: other, ifNoneMatch: tag)
            #expect(answer.status == 200 && answer.equal && answer.etag != tag, "replica \(index): \(answer)")
        }
    }
}
