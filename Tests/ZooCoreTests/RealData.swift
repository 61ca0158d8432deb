import Foundation
import Testing

@testable import ZooCore

/// The shared real datasets (`<package root>/../shared/datasets/zoo`), loaded once.
enum RealData {
    static let directory: URL = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("shared/datasets/zoo")

    /// Real-data tests run when the data is present, and always under `CI=true` (where they fail if it is missing).
    static let enabled =
        FileManager.default.fileExists(atPath: directory.path)
        || ProcessInfo.processInfo.environment["CI"] == "true"
    static let skipMessage: Comment = "skipped: ../shared/datasets/zoo is missing (set CI=true to require it)"

    static func data(_ name: String) throws -> Data {
        try Data(contentsOf: directory.appendingPathComponent(name))
    }

    static func text(_ name: String) throws -> String {
        String(decoding: try data(name), as: UTF8.self)
    }

    static let lexiconCSV: Result<LexiconImport, Error> = Result { try LexiconCSV.parse(text("lexikon-zvirat.csv")) }
    static let animalsJSON: Result<LexiconImport, Error> = Result { try AnimalsJSON.parse(data("animals.json")) }
    static let adoptions: Result<[Adoption], Error> = Result {
        try AdoptionCSV.parse(text("adopce-zvirat.csv")).adoptions
    }
    static let joins: Result<MapJoinTables, Error> = Result {
        MapJoinTables(
            pavilionNames: MapJoinTables.parsePavilionFixes(try text("zoo-parts-fixes.csv")),
            singulars: MapJoinTables.parseSingulars(try text("singular-plural.csv")))
    }
    static let router: Result<Router, Error> = Result {
        Router(
            graph: FootpathGraph(network: try FootpathNetwork.parse(data("map-metadata.json"))),
            bounds: try MapBounds.parse(data("map-bounds.json")))
    }

    /// The CSV lexicon with adoptions and the scraped map features joined.
    static let csvCatalogue: Result<Catalogue, Error> = Result {
        Catalogue(
            animals: try lexiconCSV.get().animals, mapFeatures: try animalsJSON.get().mapFeatures,
            adoptions: try adoptions.get(), joins: try joins.get())
    }

    /// The scraped lexicon (with its own map locations) over the real footpath graph.
    static let jsonSnapshot: Result<ZooSnapshot, Error> = Result {
        let scraped = try animalsJSON.get()
        let catalogue = Catalogue(
            animals: scraped.animals, mapFeatures: scraped.mapFeatures,
            adoptions: try adoptions.get(), joins: try joins.get())
        return ZooSnapshot(catalogue: catalogue, router: try router.get())
    }

    /// All GPS points of the GPX tracks, per file.
    static func gpxTracks() throws -> [String: [GeoPoint]] {
        let names = try FileManager.default.contentsOfDirectory(atPath: directory.appendingPathComponent("gpx").path)
        var tracks: [String: [GeoPoint]] = [:]
        let pattern = try NSRegularExpression(pattern: #"lat="([-0-9.]+)"\s+lon="([-0-9.]+)""#)
        for name in names.sorted() where name.hasSuffix(".gpx") {
            let text = try self.text("gpx/" + name)
            let range = NSRange(text.startIndex..., in: text)
            tracks[name] = pattern.matches(in: text, range: range).map { match in
                GeoPoint(
                    lat: Double(text[Range(match.range(at: 1), in: text)!])!,
                    lon: Double(text[Range(match.range(at: 2), in: text)!])!)
            }
        }
        return tracks
    }
}
