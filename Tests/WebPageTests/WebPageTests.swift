import Foundation
import TestSupport
import Testing

/// The visitor's page (Services/Zoo/Service/Web) in a real headless Chromium against a real zoo replica with its
/// sample data: drive_page.py ticks filters (the seed's "mammals of the seas or fresh waters"), searches, opens a
/// detail, clicks the map, walks and moves the start with the keyboard, and reports what the page showed; this
/// test checks it against the service's own answers. The screenshot it takes is kept under .build/test-artefacts.
@Suite(.serialized) struct WebPageTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    static let binDirectory =
        ProcessInfo.processInfo.environment["MENAGERIE_BIN_DIR"] ?? root.appendingPathComponent(".build/debug").path
    static let required = ProcessInfo.processInfo.environment["CI"] == "true"

    /// Debian's `chromium` (compose/compose installs it), or MENAGERIE_CHROMIUM.
    static let chromium: String? = {
        let environment = ProcessInfo.processInfo.environment
        let candidates =
            [environment["MENAGERIE_CHROMIUM"]].compactMap { $0 }
            + (environment["PATH"] ?? "/usr/bin").split(separator: ":").flatMap {
                ["\($0)/chromium", "\($0)/chromium-browser"]
            }
        return candidates.first { FileManager.default.isExecutableFile(atPath: $0) }
    }()

    /// Where the browser opens the page, and the process serving it, if one had to be started: the zoo serves
    /// its own page at `/` (the files of Services/Zoo/Service/Web, a resource of ZooService), so none is.
    static func servePage(zooPort: Int, logs: URL) throws -> (url: String, server: Process?) {
        ("http://127.0.0.1:\(zooPort)/", nil)
    }

    @Test(
        .enabled(
            if: chromium != nil || required,
            "chromium is not installed (apt-get install chromium, or compose/compose deps)"))
    func aVisitorSearchesOpensAnAnimalAndWalksToIt() async throws {
        let chromium = try #require(Self.chromium, "chromium is required when CI=true")
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent(
            "menagerie-webpage-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: scratch) }

        let zooPort = try RawSocket.freePortBlock(count: 1)
        let zoo = try Self.start(
            "\(Self.binDirectory)/zoo",
            ["--port", String(zooPort), "--data-dir", scratch.appendingPathComponent("zoo").path],
            log: scratch.appendingPathComponent("zoo.log"))
        defer { Self.stop(zoo) }
        try await Self.waitUntilAnswering(port: zooPort, log: scratch.appendingPathComponent("zoo.log"))

        let (url, server) = try Self.servePage(zooPort: zooPort, logs: scratch)
        defer { server.map(Self.stop) }
        if let server {
            try await Self.waitUntilListening(port: Int(URLComponents(string: url)!.port!), process: server)
        }

        let artefacts = Self.root.appendingPathComponent(".build/test-artefacts")
        try FileManager.default.createDirectory(at: artefacts, withIntermediateDirectories: true)
        let screenshot = artefacts.appendingPathComponent("zoo-page.png")
        try? FileManager.default.removeItem(at: screenshot)

        let driver = Self.root.appendingPathComponent("Tests/WebPageTests/drive_page.py").path
        let (status, output) = try await offPool {
            try Self.run("/usr/bin/python3", [driver, chromium, url, "http://127.0.0.1:\(zooPort)", screenshot.path])
        }
        let report = try #require(
            try? JSONSerialization.jsonObject(with: Data(output.utf8)) as? [String: Any],
            "driver output is not JSON: \(output)")
        #expect(status == 0 && report["error"] == nil, "the page could not be driven: \(report["error"] ?? output)")
        guard status == 0 else { return }
        print("zoo page screenshot: \(screenshot.path)")

        // The icons: an SVG and /favicon.ico (asked for by browsers even unlinked), both served with their types.
        let icons = try #require(report["icons"] as? [String: Any])
        let linked = try #require(icons["linked"] as? [String: [String: Any]])
        #expect(
            Set(linked.keys.compactMap { URL(string: $0)?.lastPathComponent }) == ["favicon.svg", "favicon.ico"],
            "\(linked)")
        for (href, answer) in linked {
            #expect(answer["status"] as? Int == 200 && (answer["bytes"] as? Int ?? 0) > 0, "\(href): \(answer)")
        }
        #expect(linked.first { $0.key.hasSuffix(".svg") }?.value["type"] as? String == "image/svg+xml")
        let favicon = try #require(icons["favicon.ico"] as? [String: Any])
        #expect(favicon["status"] as? Int == 200 && favicon["type"] as? String == "image/x-icon", "\(favicon)")

        // On load: every sample animal kept now, the footpaths drawn, the class checkboxes filled from ListFilterValues.
        let initial = try #require(report["initial"] as? [String: Any])
        #expect(initial["status"] as? String == "12 animals found.")
        #expect(initial["results"] as? Int == 12)
        #expect(initial["footpaths"] as? Int == 6)
        #expect(initial["classes"] as? [String] == ["Hmyz", "Plazi", "Ptáci", "Savci"])
        // The map names its places, pavilions (the zoo-house values) apart from pens, none over another.
        let labels = try #require(initial["labels"] as? [String])
        #expect(labels.contains("house:Pavilon šelem a plazů") && labels.contains("house:Africký dům"), "\(labels)")
        #expect(labels.contains("pen:lvi") && labels.contains("pen:lachtani"), "\(labels)")
        #expect(labels.count == 14, "the sample's 14 places all fit: \(labels)")
        #expect(initial["labels_overlapping"] as? Int == 0)

        // A photo in every row (the sample has one for each animal), loaded lazily, with the source's alt text.
        let rowNames = try #require(initial["names"] as? [String])
        let rowPhotos = try #require(initial["photos"] as? [Any])
        #expect(rowPhotos.count == rowNames.count)
        for (name, photo) in zip(rowNames, rowPhotos) {
            let photo = photo as? [String: Any]
            #expect(photo?["loading"] as? String == "lazy", "\(name): \(photo ?? [:])")
            #expect(photo?["alt"] as? String == "\(name), foto: Menagerie", "\(name): \(photo ?? [:])")
            #expect((photo?["src"] as? String)?.hasPrefix("https://example.org/menagerie/sample/") == true, "\(name)")
        }

        // The class ticked: only mammals.
        let filtered = try #require(report["filtered"] as? [String: Any])
        let abouts = try #require(filtered["about"] as? [String])
        #expect(filtered["status"] as? String == "7 animals found.")
        #expect(abouts.count == 7 && abouts.allSatisfy { $0.contains("Savci") }, "\(abouts)")

        // The seed's user test "mammals living in seas or fresh waters": OR within the biotopes, AND with the class,
        // the page showing what the service answers for the same request (and the ticks kept when the filter
        // values reload with the animals not kept now).
        for (step, expected) in [
            ("seas", ["Lachtan jihoafrický"]), ("seas_all", ["Hroch obojživelný", "Lachtan jihoafrický"]),
        ] {
            let shown = try #require(report[step] as? [String: Any], "\(step)")
            let answer = try #require(shown["expected"] as? [String: Any], "\(step)")
            #expect(
                shown["ticked"] as? [String] == ["classes=Savci", "biotopes=moře", "biotopes=sladké vody"], "\(step)")
            #expect(answer["names"] as? [String] == expected, "\(step): the service answers \(answer)")
            #expect(shown["names"] as? [String] == answer["names"] as? [String], "\(step)")
            let total = answer["total"] as? Int ?? -1
            #expect(shown["status"] as? String == "\(total) \(total == 1 ? "animal" : "animals") found.", "\(step)")
        }
        #expect((report["seas"] as? [String: Any])?["count"] as? String == "(3 chosen)")

        // Text and filter together.
        let search = try #require(report["search"] as? [String: Any])
        #expect(search["status"] as? String == "1 animal found.")
        #expect(search["names"] as? [String] == ["Lev indický"])

        // The detail, with its photo link, its map locations ringed, and the focus moved to its heading.
        let detail = try #require(report["detail"] as? [String: Any])
        #expect(detail["id"] as? String == "1")
        #expect(detail["name"] as? String == "Lev indický")
        #expect(detail["names"] as? String == "Panthera leo persica · Lion")
        #expect(detail["place"] as? String == "On the map at: lvi, Pavilon šelem a plazů.")
        #expect(detail["photo"] as? String == "https://example.org/menagerie/sample/1.jpg")
        #expect(detail["highlights"] as? Int == 2)
        // Its photo atop the detail.
        let figure = try #require(detail["figure"] as? [String: Any], "no photo in the detail")
        #expect(figure["src"] as? String == "https://example.org/menagerie/sample/1.jpg")
        #expect(figure["alt"] as? String == "Lev indický, foto: Menagerie")
        #expect(figure["loading"] as? String == "lazy")
        #expect(detail["figure_first"] as? String == "detail-figure")
        #expect(detail["focused"] as? String == "detail-name")
        #expect((detail["facts"] as? [String])?.starts(with: ["Class", "Order", "Continents"]) == true)

        // The start clicked on the map, and the walk drawn with the length and time the service answers for it.
        let start = try #require(report["start"] as? [String: Any])
        #expect((start["text"] as? String)?.hasPrefix("Start (on the map): 50.11") == true, "\(start)")
        let route = try #require(report["route"] as? [String: Any])
        let expected = try #require((route["expected"] as? [String: Any])?["route"] as? [String: Any])
        let distance = try #require(expected["distanceM"] as? Double)
        let duration = try #require(expected["durationS"] as? Double)
        let points = try #require(expected["coordinates"] as? [Any]).count
        let path = try #require(route["path"] as? String)
        #expect(route["error"] as? String == "")
        #expect(
            path.hasPrefix("M") && path.filter { $0 == "L" }.count == points - 1, "path \(path) for \(points) points")
        #expect((route["path_length"] as? Double ?? 0) > 10)
        #expect(route["length"] as? String == Self.formatLength(distance))
        #expect(route["time"] as? String == "· \(max(1, Int((duration / 60).rounded()))) min walk")
        let destination = try #require((route["expected"] as? [String: Any])?["destination"] as? [String: Any])
        #expect(route["destination"] as? String == "to \(destination["name"] as? String ?? "?")")

        // Its house instead.
        let house = try #require(report["house"] as? [String: Any])
        #expect(house["destination"] as? String == "to Pavilon šelem a plazů")
        #expect(house["error"] as? String == "")
        #expect((house["length"] as? String)?.hasSuffix(" m") == true)

        // The keyboard moves the start; the walk follows it.
        let keyboard = try #require(report["keyboard"] as? [String: Any])
        #expect((keyboard["start"] as? String)?.hasPrefix("Start (chosen with the keyboard)") == true)
        #expect(keyboard["path"] as? String != path)
        #expect((keyboard["length"] as? String)?.hasSuffix(" m") == true)

        // A start off the map: the service's OUT_OF_RANGE in words, and no walk left drawn.
        let offMap = try #require(report["off_map"] as? [String: Any])
        let refusal = offMap["error"] as? String ?? ""
        #expect(
            refusal.hasPrefix("point (") && refusal.hasSuffix("is outside the zoo map: set a start inside the zoo."),
            "\(refusal)")
        #expect(offMap["length"] as? String == "")
        #expect(offMap["path"] as? String == "")

        let attributes = try FileManager.default.attributesOfItem(atPath: screenshot.path)
        #expect((attributes[.size] as? Int ?? 0) > 10_000, "the screenshot is empty")
    }

    /// The page's own rounding of a walk's length.
    static func formatLength(_ metres: Double) -> String {
        metres < 1000 ? "\(Int(metres.rounded())) m" : String(format: "%.1f km", metres / 1000)
    }

    // MARK: Processes

    static func start(_ executable: String, _ arguments: [String], log: URL) throws -> Process {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        _ = FileManager.default.createFile(atPath: log.path, contents: nil)
        let handle = try FileHandle(forWritingTo: log)
        process.standardOutput = handle
        process.standardError = handle
        process.standardInput = FileHandle.nullDevice
        try process.run()
        return process
    }

    /// SIGTERM, then SIGKILL after 3 s. The children inherit the blocked signals of the thread that started them
    /// (a dispatch worker's mask blocks SIGTERM), so a program that does not unblock it, as python3's http.server,
    /// never sees the SIGTERM.
    static func stop(_ process: Process) {
        guard process.isRunning else { return }
        process.terminate()
        for _ in 0..<30 where process.isRunning { usleep(100_000) }
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
    }

    static func run(_ executable: String, _ arguments: [String]) throws -> (status: Int32, output: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = FileHandle.standardError
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: data, as: UTF8.self))
    }

    /// Waits until the zoo answers a Connect call over HTTP (it listens once its data is loaded).
    static func waitUntilAnswering(port: Int, log: URL) async throws {
        let request =
            "POST /menagerie.zoo.v1.Zoo/GetMetadata HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            + "Content-Length: 2\r\nConnection: close\r\n\r\n{}"
        for _ in 0..<Int(600 * TestTime.scale) {
            if let socket = try? RawSocket(port: port), socket.write(Array(request.utf8)) {
                let (bytes, _) = await socket.readUntilClosed()
                if String(decoding: bytes.prefix(12), as: UTF8.self) == "HTTP/1.1 200" { return }
            }
            try await Task.sleep(for: .milliseconds(100))
        }
        let text = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
        Issue.record(
            "the zoo did not answer on port \(port) within \(TestTime.scaled(.seconds(60))); its log:\n\(text.suffix(2000))"
        )
        throw CancellationError()
    }

    static func waitUntilListening(port: Int, process: Process) async throws {
        for _ in 0..<Int(300 * TestTime.scale) where process.isRunning {
            if !RawSocket.isFree(port) { return }
            try await Task.sleep(for: .milliseconds(100))
        }
        Issue.record("the static server did not listen on port \(port)")
        throw CancellationError()
    }
}
