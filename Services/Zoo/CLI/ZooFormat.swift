import Foundation
import GatewayKit
import RPC
import Schema
import ZooAPI

/// How the zoo's command group reads and writes values: the JSON shapes of `--json`, distances and times for
/// reading, and `LAT,LON` options.
enum ZooFormat {
    /// Parses `LAT,LON`; anything else is INVALID_ARGUMENT naming `option`.
    static func coordinate(_ text: String, option: String) throws -> ZooV1.GeoPoint {
        let parts = text.split(separator: ",", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
        guard parts.count == 2, let lat = Double(parts[0]), let lon = Double(parts[1]) else {
            throw RPCError(.invalidArgument, "\(option) \"\(text)\" is not LAT,LON (e.g. 50.1163,14.4000)")
        }
        return ZooV1.GeoPoint(lat: lat, lon: lon)
    }

    /// The keys search results and detail share: `id`, `name`, `latin_name`, `class`, `location`, `available`.
    static func summaryJSON(_ animal: ZooV1.AnimalSummary) -> [String: Any] {
        ["id": animal.id, "name": animal.name, "latin_name": jsonValue(animal.latinName), "class": jsonValue(animal.className),
         "location": jsonValue(animal.location), "available": animal.available]
    }

    /// A route as `route --json` and each leg of `tour --json` show it.
    static func routeJSON(_ route: ZooV1.Route) -> [String: Any] {
        ["distance_m": route.distanceM, "duration_s": route.durationS, "nodes": route.nodeIds,
         "coordinates": route.coordinates.map { [$0.lat, $0.lon] }]
    }

    /// `1.2 km`, `350 m`.
    static func distance(_ meters: Double) -> String {
        meters >= 1000 ? String(format: "%.1f km", meters / 1000) : String(format: "%.0f m", meters)
    }

    /// `4 min`, `45 s`.
    static func walk(_ seconds: Double) -> String {
        seconds >= 60 ? "\(Int((seconds / 60).rounded())) min" : "\(Int(seconds.rounded())) s"
    }

    /// An import record as `import --json` and `status --json` show it.
    static func importJSON(_ record: ZooV1.ImportRecord) -> [String: Any] {
        [
            "id": record.id, "source": record.source, "trigger": triggerName(record.trigger),
            "started_at": isoDate(record.startedAt), "finished_at": isoDate(record.finishedAt), "succeeded": record.succeeded,
            "rows_imported": record.rowsImported, "rows_skipped": record.rowsSkipped, "error": jsonValue(record.error),
            "files": record.files.map { file -> [String: Any] in
                ["kind": jsonValue(fileKindName(file.kind)), "name": file.name, "size_bytes": file.sizeBytes,
                 "rows_imported": file.rowsImported,
                 "skipped": file.skipped.map { ["row": $0.row, "line": $0.line, "reason": $0.reason] as [String: Any] }]
            },
        ]
    }

    /// The kind's name as in `--lexicon-csv` without the dashes: `lexicon_csv`; nil when unspecified.
    static func fileKindName(_ kind: ZooV1.FileKind) -> String? {
        switch kind {
        case .lexiconCsv: "lexicon_csv"
        case .animalsJson: "animals_json"
        case .map: "map"
        case .bounds: "bounds"
        case .adoptions: "adoptions"
        case .pavilionFixes: "pavilion_fixes"
        case .singularPlural: "singular_plural"
        case .unspecified, .unrecognized: nil
        }
    }

    /// What started an import: `client`, `sample_data`, `schedule`.
    static func triggerName(_ trigger: ZooV1.ImportTrigger) -> String {
        switch trigger {
        case .client: "client"
        case .sampleData: "sample_data"
        case .schedule: "schedule"
        case .unspecified, .unrecognized: "unknown"
        }
    }
}
