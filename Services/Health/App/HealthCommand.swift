import ArgumentParser
import Base
import Foundation
import HealthCore
import HealthService
import ServiceKit

/// The health service executable: users' health samples, statistics and sync, in one SQLite file that
/// replicas may share.
@main
struct HealthCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "health",
        abstract: "Menagerie's health service: per-user health samples, statistics, and sync with devices.",
        discussion: "Data lives in an SQLite file (--database, default DATA_DIR/health.sqlite) that replicas may share.")

    @OptionGroup var options: ServiceOptions

    @Option(name: .customLong("database"), help: "The SQLite file (default: DATA_DIR/health.sqlite).")
    var databasePath: String?

    func run() async throws {
        try await ServiceRunner.run(name: "health", options: options) { environment in
            let path = databasePath ?? environment.dataDirectory.appendingPathComponent("health.sqlite").path
            return [HealthService(store: try HealthStore(path: path), lane: environment.lane)]
        }
    }
}
