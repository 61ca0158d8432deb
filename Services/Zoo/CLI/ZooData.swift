import ArgumentParser
import Foundation
import GatewayKit
import JobsAPI
import RPC
import Schema
import ZooAPI

/// `gateway zoo status`: the import metadata.
struct ZooStatus: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract:
            "Show where the zoo's data came from, how the last imports went, what is stored, and the refresh schedule.")

    @OptionGroup var global: GlobalOptions

    func run() async throws {
        try await global.withZoo { zoo in
            let reply = try await zoo.getMetadata(ZooV1.GetMetadataRequest(), options: global.callOptions)
            try global.render(reply, text: { print(Self.text(reply)) })
        }
    }

    static func text(_ reply: ZooV1.GetMetadataResponse) -> String {
        let counts = reply.counts ?? ZooV1.DataCounts()
        var lines = [
            "animals: \(counts.animals) (\(counts.availableAnimals) kept now), lexicon from \(ZooFormat.fileKindName(reply.lexiconKind) ?? "nothing yet")",
            "classes \(counts.classes), orders \(counts.orders), continents \(counts.continents), biotopes \(counts.biotopes), "
                + "foods \(counts.foods), zoo houses \(counts.zooHouses)",
            "map: \(counts.mapLocations) animal locations, \(counts.footpathNodes) footpath nodes, \(counts.footpathEdges) edges; "
                + "adoptions: \(counts.adoptions); walking pace \(reply.walkingSpeed) m/s",
        ]
        if let sources = reply.sources, counts.animals > 0 {
            lines.append(
                "animal sources: \(sources.both) in both the lexicon CSV and animals.json, \(sources.lexiconCsvOnly) only in the lexicon CSV, "
                    + "\(sources.animalsJsonOnly) only in animals.json")
        }
        if let routes = reply.routability, routes.animals > 0 {
            let percent = Double(routes.routableAnimals) * 100 / Double(routes.animals)
            lines.append(
                String(
                    format:
                        "routable: %d of %d animals (%.1f %%: %d to their pen, %d to their house, %d to their zoo part), %d of %d houses and zoo parts",
                    Int(routes.routableAnimals), Int(routes.animals), percent, Int(routes.toPen), Int(routes.toHouse),
                    Int(routes.toZooPart),
                    Int(routes.routableHouses), Int(routes.houses)))
            for house in routes.unroutableHouses {
                lines.append("  unroutable house \"\(house.name)\": \(house.reason)")
            }
            for animal in routes.unroutableAnimals {
                lines.append("  unroutable animal \(animal.animalID) \"\(animal.name)\": \(animal.reason)")
            }
        }
        if let last = reply.lastImport {
            lines.append("last import: " + importSummary(last))
        } else {
            lines.append("last import: none")
        }
        if let success = reply.lastSuccessfulImport, success.id != reply.lastImport?.id {
            lines.append("last successful import: " + importSummary(success))
        }
        if let failed = reply.lastFailedImport {
            lines.append("last error (\(isoDate(failed.finishedAt))): \(failed.error ?? "unknown")")
        }
        if let tiles = reply.tiles {
            lines.append(
                "map tiles: \(tiles.sizeBytes) bytes, imported \(isoDate(tiles.importedAt)) (served at /api/map/data)")
        } else {
            lines.append("map tiles: none (gateway zoo import --tiles FILE)")
        }
        if let refresh = reply.refresh {
            lines.append(
                "refresh: \"\(refresh.cron)\" from \(refresh.sources.joined(separator: ", "))"
                    + (refresh.nextRun.map { "; next \(isoDate($0))" } ?? ""))
        } else {
            lines.append("refresh: not scheduled")
        }
        return lines.joined(separator: "\n")
    }

    private static func importSummary(_ record: ZooV1.ImportRecord) -> String {
        "#\(record.id) \(record.succeeded ? "succeeded" : "FAILED") \(isoDate(record.finishedAt)) (\(ZooFormat.triggerName(record.trigger))) "
            + "from \(record.source): \(record.rowsImported) records imported, \(record.rowsSkipped) skipped"
    }
}

/// `gateway zoo import --lexicon-csv F | --animals-json F | --map F | --adoptions F …`: sends files to the service.
struct ZooImport: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "import",
        abstract: "Send data files to the zoo service, which imports them in one transaction.",
        discussion: """
            Each kind of file replaces its part of the data; the rest stays. The animals are the animals JSON's entries, \
            under their own ids, with the lexicon CSV given together matched to them by Latin or Czech name (filling \
            only what an entry lacks; unmatched rows are added under ids from 100000, and the record lists the \
            conflicts), or those of the one given; the animals JSON always provides the map locations and which animals are kept now. Bad rows are skipped and listed. Together the files must \
            stay under 16 MiB. --tiles sends an MBTiles file (up to 1 GiB) in pieces; the service checks it and \
            replaces the stored one, or keeps the old one and says what is wrong. The import runs as a job: the command follows it with a progress bar (plain lines \
            when the output is not a terminal) and prints its record; --detach returns its id at once.
            """)

    @Option(
        name: .customLong("lexicon-csv"), help: "The open-data lexicon (default: lexikon-zvirat.csv in --dir).",
        completion: .file(extensions: ["csv"]))
    var lexiconCSV: String?

    @Option(
        name: .customLong("animals-json"),
        help: "The scraped lexicon with map locations (default: animals.json in --dir).",
        completion: .file(extensions: ["json"]))
    var animalsJSON: String?

    @Option(
        name: .customLong("map"), help: "The footpath graph (default: map-metadata.json in --dir).",
        completion: .file(extensions: ["json"]))
    var map: String?

    @Option(
        name: .customLong("bounds"), help: "The map's bounds (default: map-bounds.json in --dir).",
        completion: .file(extensions: ["json"]))
    var bounds: String?

    @Option(
        name: .customLong("adoptions"), help: "The adoption list (default: adopce-zvirat.csv in --dir).",
        completion: .file(extensions: ["csv"]))
    var adoptions: String?

    @Option(
        name: .customLong("pavilion-fixes"),
        help: "Pavilion names of map buildings (default: zoo-parts-fixes.csv in --dir).",
        completion: .file(extensions: ["csv"]))
    var pavilionFixes: String?

    @Option(
        name: .customLong("singular-plural"),
        help: "Singular forms of enclosure names (default: singular-plural.csv in --dir).",
        completion: .file(extensions: ["csv"]))
    var singularPlural: String?

    @Option(
        name: .customLong("tiles"),
        help:
            "An MBTiles file of the zoo map, served at /api/map/data: up to 1 GiB, sent in pieces, replacing the stored one (default: none).",
        completion: .file(extensions: ["mbtiles"]))
    var tiles: String?

    @Option(
        name: .customLong("dir"),
        help: "A directory of the open data: every file of the names above found in it (default: none).",
        completion: .directory)
    var directory: String?

    @Option(help: "Where the files come from, for the import metadata (default: their paths).")
    var source: String?

    @OptionGroup var global: GlobalOptions

    /// Frames are at most 16 MiB; leave room for the envelope.
    static let maxTotalBytes = (16 << 20) - (64 << 10)

    @Flag(help: "Print the import job's id and return at once instead of following it (gateway zoo jobs watch ID).")
    var detach = false

    func run() async throws {
        if let tiles { try InputFile.check(tiles, directory: false, role: "--tiles") }
        try await global.withClient(for: "zoo", { $0 }) { client in
            if let tiles {
                let stored = try await Self.sendTiles(
                    tiles, with: ZooV1.Zoo.Client(wrapping: client), timeout: global.timeout)
                try global.render(stored, text: { print(Self.text(stored, path: tiles)) })
                guard hasDataFiles else { return }
            }
            let files = try collectFiles()
            let request = ZooV1.ImportDataRequest(files: files, source: source ?? "")
            // The files travel in this call; allow them time on a slow link.
            let options = CallOptions(timeout: .milliseconds(Int64(max(global.timeout, 300) * 1000)))
            let job = try await ZooV1.Zoo.Client(wrapping: client).importData(request, options: options)
            if detach {
                try global.render(
                    job, text: { print("started \(job.summary); follow it with: gateway zoo jobs watch \(job.id)") })
                return
            }
            let ended = try await followJob(
                job.id, with: JobsV1.Jobs.Client(wrapping: client), display: global.json ? nil : ProgressDisplay())
            guard let result = try ended.requireResult(), result.typeName == ZooV1.ImportRecord.protoName else {
                throw RPCError(.internalError, "import job \(job.id) ended without the import's record")
            }
            let record = try ZooV1.ImportRecord(serializedBytes: result.value)
            try global.render(record, text: { print(Self.text(record)) })
        }
    }

    /// Whether any data file (not the tiles) was asked for.
    private var hasDataFiles: Bool {
        [lexiconCSV, animalsJSON, map, bounds, adoptions, pavilionFixes, singularPlural, directory].contains {
            $0 != nil
        }
    }

    /// Pieces of the tiles file per message: far below the 16 MiB frame, and the file is read piece by piece.
    static let tilesPieceBytes = 1 << 20

    /// Streams the MBTiles file at `path` to ImportTiles, reading it a piece at a time.
    static func sendTiles(_ path: String, with zoo: ZooV1.Zoo.Client, timeout: Double) async throws
        -> ZooV1.ImportTilesResponse
    {
        guard let handle = FileHandle(forReadingAtPath: path) else {
            throw RPCError(.invalidArgument, "--tiles: cannot open \(path)")
        }
        defer { try? handle.close() }
        // Hundreds of MB on a slow link: allow time.
        let options = CallOptions(timeout: .milliseconds(Int64(max(timeout, 600) * 1000)))
        return try await zoo.importTiles(options: options) { writer in
            while let piece = try handle.read(upToCount: tilesPieceBytes), !piece.isEmpty {
                try await writer.send(ZooV1.ImportTilesRequest(data: [UInt8](piece)))
            }
        }
    }

    static func text(_ reply: ZooV1.ImportTilesResponse, path: String) -> String {
        "stored the map tiles \(path): \(reply.tiles?.sizeBytes ?? 0) bytes, served at /api/map/data"
    }

    private func collectFiles() throws -> [ZooV1.ImportFile] {
        var paths: [(ZooV1.FileKind, String)] = [
            (.lexiconCsv, lexiconCSV), (.animalsJson, animalsJSON), (.map, map), (.bounds, bounds),
            (.adoptions, adoptions),
            (.pavilionFixes, pavilionFixes), (.singularPlural, singularPlural),
        ].compactMap { kind, path in path.map { (kind, $0) } }
        if let directory {
            try InputFile.check(directory, directory: true, role: "--dir")
            for (kind, name) in fileNames where !paths.contains(where: { $0.0 == kind }) {
                let path = URL(fileURLWithPath: directory).appendingPathComponent(name).path
                if FileManager.default.fileExists(atPath: path) { paths.append((kind, path)) }
            }
        }
        guard !paths.isEmpty else {
            throw RPCError(
                .invalidArgument,
                "nothing to import: give --lexicon-csv, --animals-json, --map, --bounds, --adoptions, --pavilion-fixes, --singular-plural, --dir or --tiles"
            )
        }
        let files = try paths.map { kind, path in
            let data = try InputFile.read(path)
            return ZooV1.ImportFile(kind: kind, name: path, content: Array(data))
        }
        let total = files.reduce(0) { $0 + $1.content.count }
        guard total <= Self.maxTotalBytes else {
            throw RPCError(
                .invalidArgument,
                "the files add up to \(total) bytes, more than one call carries (\(Self.maxTotalBytes)); import them in several calls"
            )
        }
        return files
    }

    /// The open data's file names.
    private var fileNames: [(ZooV1.FileKind, String)] {
        [
            (.lexiconCsv, "lexikon-zvirat.csv"), (.animalsJson, "animals.json"), (.map, "map-metadata.json"),
            (.bounds, "map-bounds.json"),
            (.adoptions, "adopce-zvirat.csv"), (.pavilionFixes, "zoo-parts-fixes.csv"),
            (.singularPlural, "singular-plural.csv"),
        ]
    }

    static func text(_ record: ZooV1.ImportRecord) -> String {
        var lines = [
            "import #\(record.id) succeeded: \(record.rowsImported) records imported, \(record.rowsSkipped) rows skipped"
        ]
        for file in record.files {
            lines.append(
                "  \(ZooFormat.fileKindName(file.kind) ?? "?") \(file.name): \(file.rowsImported) imported, \(file.skipped.count) skipped"
            )
            for row in file.skipped.prefix(20) { lines.append("    row \(row.row) (line \(row.line)): \(row.reason)") }
            if file.skipped.count > 20 { lines.append("    … and \(file.skipped.count - 20) more (see --json)") }
        }
        if let merge = record.lexiconMerge {
            lines.append(
                "  lexicon merged into animals.json's \(merge.websiteEntries) entries: of \(merge.lexiconRows) rows \(merge.matchedByLatinName) matched by Latin name, "
                    + "\(merge.matchedByCzechName) by Czech name, \(merge.added) added (ids \(merge.addedIDBase) + their own); \(merge.conflicts.count) conflicts"
            )
            for conflict in merge.conflicts.prefix(30) { lines.append("    \(conflict)") }
            if merge.conflicts.count > 30 { lines.append("    … and \(merge.conflicts.count - 30) more (see --json)") }
        }
        return lines.joined(separator: "\n")
    }
}
