import Foundation
import TestSupport
import Testing
import ZooCore

#if canImport(FoundationXML)
    import FoundationXML
#endif

/// The zoo service started by compose and driven through `gateway zoo`, as a user would.
@Suite(.serialized) struct ZooStackTests {
    static let sampleDirectory = Stack.root.appendingPathComponent("Services/Zoo/Core/SampleData")
    static let realDirectory = Stack.root.deletingLastPathComponent().appendingPathComponent("shared/datasets/zoo")
    static let realDataEnabled =
        FileManager.default.fileExists(atPath: realDirectory.path)
        || ProcessInfo.processInfo.environment["CI"] == "true"
    static let realDataSkipMessage: Comment = "skipped: ../shared/datasets/zoo is missing (set CI=true to require it)"

    @Test func sampleDataReplicasCrashRecoveryAndStatusCodes() async throws {
        try await Stack.with(services: ["zoo"]) { stack in try await Self.sampleData(stack) }
    }

    static func sampleData(_ stack: Stack) async throws {
        let up = try await stack.compose("up")
        try #require(up.status == 0, "compose up failed: \(up.output)")

        // Out of the box the service answers from the bundled sample data.
        let zelva = try jsonObject(try await stack.gateway(["zoo", "search", "zelva", "--json"]))
        #expect((zelva["animals"] as? [[String: Any]])?.first?["name"] as? String == "Želva obrovská")
        let status = try jsonObject(try await stack.gateway(["zoo", "status", "--json"]))
        #expect((status["lastImport"] as? [String: Any])?["trigger"] as? String == "IMPORT_TRIGGER_SAMPLE_DATA")

        // Two replicas share one database: an import through one is seen by the other.
        try #require(try await stack.compose("scale", "zoo=2").status == 0)
        let base = try #require(stack.basePorts["zoo"])
        let replicas = ["zoo=127.0.0.1:\(base)", "zoo=127.0.0.1:\(base + 1)"]
        let scratch = stack.directory.appendingPathComponent("files")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        let small = scratch.appendingPathComponent("small.csv")
        try Self.sampleLexicon(first: 4).write(to: small, atomically: true, encoding: .utf8)
        let imported = try await stack.gateway([
            "zoo", "import", "--lexicon-csv", small.path, "--endpoint", replicas[0],
        ])
        try #require(imported.status == 0, "\(imported.output)")
        #expect(imported.output.contains("100%") && imported.output.contains("4 imported"))
        #expect(try await Self.total(stack, ["--all", "--endpoint", replicas[1]]) == 4)

        // An acknowledged import survives kill -9 of every replica: compose restarts them, the data is there.
        let full = Self.sampleDirectory.appendingPathComponent("lexikon-zvirat.csv").path
        let acknowledged = try await stack.gateway([
            "zoo", "import", "--lexicon-csv", full, "--endpoint", replicas[1], "--json",
        ])
        try #require(acknowledged.status == 0, "\(acknowledged.output)")
        let importID = try jsonObject(acknowledged)["id"] as? String  // int64: a string in protobuf's JSON mapping
        let victims = try stack.servicePids()
        for name in ["zoo.0", "zoo.1"] { kill(try #require(victims[name]), SIGKILL) }
        try await Self.waitForRestart(stack, after: victims)
        for replica in replicas {
            #expect(try await Self.total(stack, ["--all", "--endpoint", replica]) == 13)
            let metadata = try jsonObject(try await stack.gateway(["zoo", "status", "--json", "--endpoint", replica]))
            #expect((metadata["lastSuccessfulImport"] as? [String: Any])?["id"] as? String == importID)
        }

        // Bad input gets the right status code (the gateway exits with it).
        let point = "50.1163,14.4000"
        let cases: [([String], Int32)] = [
            (["show", "0"], 3), (["show", "99999"], 5), (["show", "12"], 5), (["search", "--limit=-1"], 3),
            (["search", "--limit", "100000"], 3), (["search", "--offset=-3"], 3), (["search", "--food", ""], 3),
            (["route", "--from", "nan,14.4", "--to-animal", "1"], 3),
            (["route", "--from", "50.1", "--to-animal", "1"], 3),
            (["route", "--from", point, "--to-animal", "1", "--to-house", "Africký dům"], 64),
            (["route", "--from", "50.0875,14.4213", "--to-animal", "1"], 11),
            (["route", "--from", point, "--to-animal", "13"], 9),
            (["route", "--from", point, "--to-house", "Nowhere"], 5),
            (["route", "--from", point, "--to-animal", "4242"], 5),
            (["nearby", "--from", point, "--radius=-5"], 3), (["nearby", "--from", point, "--radius", "1e9"], 3),
            (["tour", "0", "--from", point], 3), (["tour", "1", "--from", "91,14.4"], 3),
        ]
        for (arguments, code) in cases {
            let result = try await stack.gateway(["zoo"] + arguments)
            #expect(result.status == code, "gateway zoo \(arguments.joined(separator: " ")): \(result.output)")
        }
        // A broken file fails the import with INVALID_ARGUMENT, keeps the data and is recorded.
        let broken = scratch.appendingPathComponent("map-metadata.json")
        try "{\"nodes\": [".write(to: broken, atomically: true, encoding: .utf8)
        let failed = try await stack.gateway(["zoo", "import", "--map", broken.path])
        #expect(failed.status == 3 && failed.output.contains("INVALID_ARGUMENT"), "\(failed.output)")
        let afterFailure = try jsonObject(try await stack.gateway(["zoo", "status", "--json"]))
        #expect(
            ((afterFailure["lastFailedImport"] as? [String: Any])?["error"] as? String)?.contains(broken.path) == true)
        #expect((afterFailure["counts"] as? [String: Any])?["animals"] as? Int == 13)
        let route = try jsonObject(
            try await stack.gateway(["zoo", "route", "--from", point, "--to-animal", "1", "--json"]))
        #expect(((route["route"] as? [String: Any])?["distanceM"] as? Double ?? 0) > 0)

        // Stats of each replica: the calls above by method, and its event loop's turns.
        // One object per replica: its address, then its GetStatsResponse's fields (uint64 counts as strings).
        let statsOutput = try await stack.gateway(["stats", "zoo", "--json"])
        let stats = try #require(
            try JSONSerialization.jsonObject(with: Data(statsOutput.output.utf8)) as? [[String: Any]],
            "\(statsOutput.output)")
        #expect(!stats.isEmpty && stats.allSatisfy { $0["address"] is String }, "\(stats)")
        let methods = stats.flatMap { $0["methods"] as? [[String: Any]] ?? [] }
        #expect(
            methods.contains {
                $0["path"] as? String == "/menagerie.zoo.v1.Zoo/SearchAnimals"
                    && Int($0["calls"] as? String ?? "") ?? 0 >= 1
            })
        let loops = stats.compactMap { $0["loop"] as? [String: Any] }
        #expect(
            !loops.isEmpty
                && loops.allSatisfy {
                    Int($0["turns"] as? String ?? "") ?? 0 > 0 && ($0["longestTurnMs"] as? Double ?? 0) > 0
                }, "\(loops)")
    }

    @Test(.enabled(if: realDataEnabled, realDataSkipMessage))
    func realDataThroughTheGateway() async throws {
        try await Stack.with(services: ["zoo"]) { stack in try await Self.realData(stack) }
    }

    static func realData(_ stack: Stack) async throws {
        try #require(try await stack.compose("up").status == 0)
        let imported = try await stack.gateway(["zoo", "import", "--dir", Self.realDirectory.path, "--json"])
        try #require(imported.status == 0, "\(imported.output)")
        #expect(try jsonObject(imported)["rowsSkipped"] as? Int == 1)

        // Every served animal — each animals.json entry under its own id, each lexicon row matching none under
        // 100000 + its id (LexiconUnion) — is found by its name without diacritics.
        let csv = try String(
            contentsOf: Self.realDirectory.appendingPathComponent("lexikon-zvirat.csv"), encoding: .utf8)
        #expect(try LexiconCSV.parse(csv).animals.count == 327)
        let (animals, _) = LexiconUnion.merge(
            lexicon: try LexiconCSV.parse(csv).animals,
            website: try AnimalsJSON.parse(Data(contentsOf: Self.realDirectory.appendingPathComponent("animals.json")))
                .animals)
        #expect(animals.count == 671)
        let misses = await Self.parallel(animals) { animal -> String? in
            let plain = animal.name.folding(options: .diacriticInsensitive, locale: nil)
            guard let result = try? await stack.gateway(["zoo", "search", plain, "--all", "--limit", "500", "--json"]),
                let found = try? jsonObject(result)["animals"] as? [[String: Any]],
                found.contains(where: { $0["id"] as? String == String(animal.id) })
            else { return "\(animal.id) \(animal.name) (searched \(plain))" }
            return nil
        }
        #expect(misses.compactMap { $0 }.isEmpty, "not found: \(misses.compactMap { $0 })")

        // Filter counts equal counts computed from the source file.
        let filters = try jsonObject(try await stack.gateway(["zoo", "filters", "--all", "--json"]))
        func counts(_ key: String) -> [String: Int] {
            Dictionary(
                uniqueKeysWithValues: ((filters[key] as? [[String: Any]]) ?? []).map {
                    ($0["value"] as? String ?? "", $0["count"] as? Int ?? 0)
                })
        }
        // The served animals are the merge of the lexicon into animals.json: the counts are the merged animals' values.
        func folded(_ counts: [String: Int]) -> [String: Int] {
            Dictionary(counts.map { (TextKey.fold($0.key), $0.value) }, uniquingKeysWith: +)
        }
        let values: [(String, (Animal) -> [String])] = [
            ("classes", { $0.taxonClass.map { [$0.czech] } ?? [] }), ("foods", \.foods), ("biotopes", \.biotopes),
            ("continents", \.continents),
        ]
        for (served, valuesOf) in values {
            var expected: [String: Int] = [:]
            for animal in animals { for value in Set(valuesOf(animal)) { expected[value, default: 0] += 1 } }
            #expect(folded(counts(served)) == folded(expected), "\(served)")
        }

        // The union by species, its sources, and routability (issues 21, 39).
        let status = try await stack.gateway(["zoo", "status"])
        #expect(
            status.output.contains(
                "animal sources: 261 in both the lexicon CSV and animals.json, 66 only in the lexicon CSV, 344 only in animals.json"
            ),
            "\(status.output)")
        let metadata = try jsonObject(try await stack.gateway(["zoo", "status", "--json"]))
        let routability = try #require(metadata["routability"] as? [String: Any])
        let served = try #require(routability["animals"] as? Int),
            routable = try #require(routability["routableAnimals"] as? Int)
        #expect(served == 671)
        #expect(Double(routable) >= 0.8 * Double(served), "\(routable) of \(served) routable")
        let unroutable = (routability["unroutableAnimals"] as? [[String: Any]]) ?? []
        #expect(
            unroutable.count == served - routable
                && unroutable.allSatisfy { !(($0["reason"] as? String) ?? "").isEmpty })
        #expect(status.output.contains("no location in either source"))
        // Every house with a place on the map is routable by name; the others are listed with their reason.
        let unroutableHouses = Set(
            ((routability["unroutableHouses"] as? [[String: Any]]) ?? []).compactMap { $0["name"] as? String })
        for house in counts("zooHouses").keys where !unroutableHouses.contains(house) {
            let route = try await stack.gateway([
                "zoo", "route", "--from", "50.1163,14.4000", "--to-house", house, "--json",
            ])
            #expect(route.status == 0, "route --to-house \(house): \(route.output)")
        }
        #expect(routability["routableHouses"] as? Int == (routability["houses"] as? Int ?? 0) - unroutableHouses.count)
        // An animal without a pen of its own is reached at its zoo part, and the answer says so.
        let wetlands = try await stack.gateway([
            "zoo", "route", "--from", "50.1163,14.4000", "--to-house", "Ptačí mokřady",
        ])
        #expect(wetlands.status == 0 && wetlands.output.contains("to zoo part Ptačí mokřady"), "\(wetlands.output)")
        // The bulk call: every animal with every attribute; the footpath graph with connectors.
        let pages = try #require(
            try JSONSerialization.jsonObject(
                with: Data(try await stack.gateway(["zoo", "catalogue", "--json"]).output.utf8)) as? [[String: Any]])
        #expect(pages.flatMap { ($0["animals"] as? [[String: Any]]) ?? [] }.count == 671)
        let graph = try jsonObject(try await stack.gateway(["zoo", "graph", "--json"]))
        #expect((graph["nodes"] as? [[String: Any]])?.contains { $0["isConnector"] as? Bool == true } == true)
        // An unknown filter value is INVALID_ARGUMENT naming the known ones; an empty page says "no animals".
        let unknown = try await stack.gateway(["zoo", "search", "--class", "Draci"])
        #expect(unknown.status == 3 && unknown.output.contains("Savci"), "\(unknown.output)")
        let past = try await stack.gateway(["zoo", "search", "--offset", "5000"])
        #expect(past.output.contains("no animals at offset 5000") && !past.output.contains("no 671"), "\(past.output)")

        // Routes between the GPS points of the GPX tracks: never longer than plain Dijkstra over the same graph,
        // never shorter than the straight line between their ends.
        let router = Router(
            graph: FootpathGraph(
                network: try FootpathNetwork.parse(
                    Data(contentsOf: Self.realDirectory.appendingPathComponent("map-metadata.json")))),
            bounds: try MapBounds.parse(Data(contentsOf: Self.realDirectory.appendingPathComponent("map-bounds.json"))))
        let points = try Self.gpxPoints()
        #expect(points.count == 95)
        let pairs = (0..<points.count).map { ($0, ($0 * 37 + 11) % points.count) }.filter { $0.0 != $0.1 }
        let outcomes = await Self.parallel(pairs) { (i, j) -> (connected: Bool, problem: String?) in
            let (a, b) = (points[i], points[j])
            guard
                let result = try? await stack.gateway([
                    "zoo", "route", "--from", "\(a.lat),\(a.lon)", "--to", "\(b.lat),\(b.lon)", "--json",
                ]),
                let start = try? router.snap(a), let end = try? router.snap(b)
            else { return (false, "\(i)→\(j): the call or the snap failed") }
            let dijkstra = router.graph.distance(using: router.graph.distances(from: start), from: start, to: end)
            if result.status == 5 {
                return (false, dijkstra.isInfinite ? nil : "\(i)→\(j): NOT_FOUND but Dijkstra found \(dijkstra) m")
            }
            guard result.status == 0, let route = try? jsonObject(result)["route"] as? [String: Any],
                let distance = route["distanceM"] as? Double,
                let points = route["coordinates"] as? [[String: Double]],
                let first = points.first.map({ [$0["lat"] ?? 0, $0["lon"] ?? 0] }),
                let last = points.last.map({ [$0["lat"] ?? 0, $0["lon"] ?? 0] })
            else { return (false, "\(i)→\(j): \(result.output)") }
            let straight = Geo.haversine(GeoPoint(lat: first[0], lon: first[1]), GeoPoint(lat: last[0], lon: last[1]))
            if distance > dijkstra + 1e-6 {
                return (true, "\(i)→\(j): \(distance) m is longer than Dijkstra's \(dijkstra) m")
            }
            if distance < straight - 1e-6 {
                return (true, "\(i)→\(j): \(distance) m is shorter than the straight line \(straight) m")
            }
            return (true, nil)
        }
        #expect(outcomes.compactMap(\.problem).isEmpty, "\(outcomes.compactMap(\.problem))")
        #expect(outcomes.filter(\.connected).count > 50, "too few connected pairs to mean much")

        // GeoJSON: every footpath, and the map locations the animals are linked to.
        let features = try #require(
            try jsonObject(try await stack.gateway(["zoo", "geojson"]))["features"] as? [[String: Any]])
        let properties = features.compactMap { $0["properties"] as? [String: Any] }
        #expect(properties.filter { $0["kind"] as? String == "footpath" }.count == router.graph.roads.count)
        let locations = properties.filter { $0["kind"] as? String == "animal_location" }
        #expect(locations.count > 50 && locations.count <= 90)
        #expect(locations.allSatisfy { !(($0["animal_ids"] as? [Int]) ?? []).isEmpty })
    }

    // MARK: Helpers

    /// `search --limit 0 --json`'s total.
    static func total(_ stack: Stack, _ arguments: [String]) async throws -> Int? {
        try jsonObject(try await stack.gateway(["zoo", "search", "--limit", "0", "--json"] + arguments))["total"]
            as? Int
    }

    /// Waits until compose replaced every killed replica and each answers SERVING.
    static func waitForRestart(_ stack: Stack, after victims: [String: Int32]) async throws {
        for _ in 0..<Int(150 * TestTime.scale) {  // 30 s, scaled
            try await Task.sleep(for: .milliseconds(200))
            let pids = try stack.servicePids()
            let replaced = victims.allSatisfy { name, pid in pids[name].map { $0 != pid } ?? false }
            if replaced, try await stack.gateway(["status", "--json"]).status == 0 { return }
        }
        Issue.record("compose did not restart the killed replicas")
    }

    /// The sample lexicon CSV cut down to its header and first `count` animals.
    static func sampleLexicon(first count: Int) throws -> String {
        let text = try String(contentsOf: sampleDirectory.appendingPathComponent("lexikon-zvirat.csv"), encoding: .utf8)
        return CSVParser.parse(text).prefix(count + 1).map { record in
            record.fields.map { "\"" + $0.replacingOccurrences(of: "\"", with: "\"\"") + "\"" }.joined(separator: ";")
        }.joined(separator: "\n") + "\n"
    }

    /// Every `trkpt`/`wpt` of the GPX files, in file-name order.
    static func gpxPoints() throws -> [GeoPoint] {
        let directory = realDirectory.appendingPathComponent("gpx")
        var points: [GeoPoint] = []
        for name in try FileManager.default.contentsOfDirectory(atPath: directory.path).sorted()
        where name.hasSuffix(".gpx") {
            let collector = GPXPointCollector()
            let parser = XMLParser(data: try Data(contentsOf: directory.appendingPathComponent(name)))
            parser.delegate = collector
            try #require(parser.parse(), "\(name) is not XML")
            points += collector.points
        }
        return points
    }

    /// Runs `body` over `items` in two lanes at once (each call runs a child process); results in item order.
    static func parallel<Item: Sendable, Result: Sendable>(
        _ items: [Item], _ body: @escaping @Sendable (Item) async -> Result
    ) async -> [Result] {
        await withTaskGroup(of: [(Int, Result)].self) { group in
            for lane in 0..<2 {
                group.addTask {
                    var done: [(Int, Result)] = []
                    for index in stride(from: lane, to: items.count, by: 2) {
                        done.append((index, await body(items[index])))
                    }
                    return done
                }
            }
            var results = [Result?](repeating: nil, count: items.count)
            for await lane in group {
                for (index, result) in lane { results[index] = result }
            }
            return results.map { $0! }
        }
    }
}

/// Collects the positions of GPX points.
private final class GPXPointCollector: NSObject, XMLParserDelegate {
    var points: [GeoPoint] = []

    func parser(
        _ parser: XMLParser, didStartElement element: String, namespaceURI: String?, qualifiedName: String?,
        attributes: [String: String] = [:]
    ) {
        guard ["trkpt", "wpt", "rtept"].contains(element), let lat = attributes["lat"].flatMap(Double.init),
            let lon = attributes["lon"].flatMap(Double.init)
        else { return }
        points.append(GeoPoint(lat: lat, lon: lon))
    }
}

/// The JSON object in a command's output (after any log lines).
func jsonObject(_ result: (status: Int32, output: String)) throws -> [String: Any] {
    let start = try #require(result.output.firstIndex(of: "{"), "no JSON in: \(result.output)")
    return try #require(try JSONSerialization.jsonObject(with: Data(result.output[start...].utf8)) as? [String: Any])
}
