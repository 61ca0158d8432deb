import ArgumentParser
import Foundation
import GatewayKit
import RPC
import Schema
import ZooAPI

/// `gateway zoo …`: the zoo service's lexicon, data and walking routes. The gateway executable lists it among
/// its subcommands; everything it shares with other groups (options, endpoints, output, exit codes) is GatewayKit's.
public struct ZooCommands: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "zoo",
        abstract: "The Prague Zoo lexicon, its data, and walking routes.",
        discussion: """
            Bad input exits with the status code of INVALID_ARGUMENT (3), whether the gateway or the service rejects \
            it; unknown animals with NOT_FOUND (5), and so on. A command line that does not parse (unknown option, \
            missing argument) exits 64. Negative numbers are values: --from -33.9,18.4.
            """,
        subcommands: [
            ZooSearch.self, ZooShow.self, ZooFilters.self, ZooStatus.self, ZooImport.self, ZooRoute.self,
            ZooNearby.self,
            ZooTour.self, ZooGeoJSON.self, ZooCatalogue.self, ZooGraph.self, JobsCommands<ZooCommands>.self,
        ])

    public init() {}
}

extension ZooCommands: JobsCommandService {
    public static let serviceName = "zoo"
}

extension GlobalOptions {
    /// Runs `body` with a typed client of the zoo's instances, closing it afterwards; failures print their status
    /// and exit with its code.
    func withZoo(_ body: (ZooV1.Zoo.Client) async throws -> Void) async throws {
        try await withClient(for: "zoo", ZooV1.Zoo.Client.init(wrapping:), body)
    }
}
