import Foundation
import GatewayKit
import RPC
import Schema
import ZooAPI

/// How the zoo's command group reads and writes values: distances and times for
/// reading, and `LAT,LON` options.
enum ZooFormat {
    /// Parses `LAT,LON`; anything else is INVALID_ARGUMENT naming `option`.
    static func coordinate(_ text: String, option: String) throws -> ZooV1.GeoPoint {
        let parts = text.split(separator: ",", omittingEmptySubsequences: false).map {
            $0.trimmingCharacters(in: .whitespaces)
        }
        guard parts.count == 2, let lat = Double(parts[0]), let lon = Double(parts[1]) else {
            throw InvalidValue("\(option) \"\(text)\" is not LAT,LON (e.g. 50.1163,14.4000)")
        }
        return ZooV1.GeoPoint(lat: lat, lon: lon)
    }

    /// "pen Lvi", "house Pavilon šelem a plazů", "zoo part Dolní část zoo"; nil when unspecified.
    static func destination(_ kind: ZooV1.PlaceKind, _ name: String) -> String? {
        switch kind {
        case .pen: "pen \(name)"
        case .house: "house \(name)"
        case .zooPart: "zoo part \(name)"
        case .point: "a point"
        default: nil
        }
    }

    /// `1.2 km`, `350 m`.
    static func distance(_ meters: Double) -> String {
        meters >= 1000 ? String(format: "%.1f km", meters / 1000) : String(format: "%.0f m", meters)
    }

    /// `4 min`, `45 s`.
    static func walk(_ seconds: Double) -> String {
        seconds >= 60 ? "\(Int((seconds / 60).rounded())) min" : "\(Int(seconds.rounded())) s"
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
