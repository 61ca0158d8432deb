import ArgumentParser
import Foundation
import GatewayKit
import RPC
import Schema
import ServiceAPI

/// `gateway zoo …`: the zoo service's lexicon, data and walking routes. The gateway executable lists it among
/// its subcommands; everything it shares with other groups (options, endpoints, output, exit codes) is GatewayKit's.
public struct ZooCommands: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "zoo",
        abstract: "The Prague Zoo lexicon, its data, and walking routes.",
        discussion: "Bad input exits with the status code of INVALID_ARGUMENT (3), unknown animals with NOT_FOUND (5), and so on.",
        subcommands: [
            ZooSearch.self, ZooShow.self, ZooFilters.self, ZooStatus.self, ZooImport.self, ZooRoute.self, ZooNearby.self,
            ZooTour.self, ZooGeoJSON.self,
        ])

    public init() {}
}

/// Runs `body` with a typed client of the zoo's instances, closing it afterwards; failures print their status and
/// exit with its code.
func withZoo(_ global: GlobalOptions, _ body: (ZooV1.Zoo.Client) async throws -> Void) async throws {
    try await global.withClient(for: "zoo", ZooV1.Zoo.Client.init(wrapping:), body)
}

/// Parses `LAT,LON`; anything else is INVALID_ARGUMENT naming `option`.
func parseCoordinate(_ text: String, option: String) throws -> ZooV1.GeoPoint {
    let parts = text.split(separator: ",", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
    guard parts.count == 2, let lat = Double(parts[0]), let lon = Double(parts[1]) else {
        throw RPCError(.invalidArgument, "\(option) \"\(text)\" is not LAT,LON (e.g. 50.1163,14.4000)")
    }
    return ZooV1.GeoPoint(lat: lat, lon: lon)
}

// MARK: JSON shapes

/// The keys search results and detail share: `id`, `name`, `latin_name`, `class`, `location`, `available`.
func summaryJSON(_ animal: ZooV1.AnimalSummary) -> [String: Any] {
    ["id": animal.id, "name": animal.name, "latin_name": jsonValue(animal.latinName), "class": jsonValue(animal.className),
     "location": jsonValue(animal.location), "available": animal.available]
}

func routeJSON(_ route: ZooV1.Route) -> [String: Any] {
    ["distance_m": route.distanceM, "duration_s": route.durationS, "nodes": route.nodeIds,
     "coordinates": route.coordinates.map { [$0.lat, $0.lon] }]
}

/// `1.2 km`, `350 m`.
func formatDistance(_ meters: Double) -> String {
    meters >= 1000 ? String(format: "%.1f km", meters / 1000) : String(format: "%.0f m", meters)
}

/// `4 min`, `45 s`.
func formatWalk(_ seconds: Double) -> String {
    seconds >= 60 ? "\(Int((seconds / 60).rounded())) min" : "\(Int(seconds.rounded())) s"
}
