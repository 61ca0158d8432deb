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

    /// Exits 0 after a graceful stop, 1 when the service could not start.
    func run() async throws {
        do {
            try await ServiceRunner.run(name: "health", options: options) { environment in
                AppServices(rpc: [HealthService(store: try HealthStore(path: environment.databasePath), lane: environment.lane)])
            }
        } catch {
            throw ExitCode.failure
        }
    }
}
