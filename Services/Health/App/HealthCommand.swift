import ArgumentParser
import Base
import Foundation
import HealthAPI
import HealthCore
import HealthService
import Identity
import ServiceKit

/// The health service executable: users' health samples, statistics and sync, in one SQLite file that
/// replicas may share, or in a dqlite cluster (`--cluster`) that replicas on several machines form.
@main
struct HealthCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "health",
        abstract: "Menagerie's health service: per-user health samples, statistics, and sync with devices.",
        discussion:
            "Data lives in an SQLite file (--database, default DATA_DIR/health.sqlite) that replicas on one machine may share, or, with --cluster, in a dqlite cluster that the replicas' nodes form across machines."
    )

    @OptionGroup var options: ServiceOptions

    @Flag(
        help:
            "Let anyone sign up (CreateUser without a token), at most 10 users per source network before a back-off; by default signing up needs an admin token, as the gateway's `health user create` sends."
    )
    var openSignup = false

    /// Exits 0 after a graceful stop, 1 when the service could not start.
    func run() async throws {
        do {
            try await ServiceRunner.run(name: "health", options: options) { environment in
                let store = HealthStore(database: try environment.openDatabase(migrations: HealthSchema.migrations))
                // Health's users and tokens from before the shared identity keep working there.
                let moved = try HealthService.moveAccounts(from: store, to: environment.identity)
                if moved > 0 { environment.logger.info("moved \(moved) health token(s) to the shared identity") }
                // Samples are their user's; signing up needs an admin (health.proto) unless the operator opens it.
                let signupLimit = openSignup ? HealthService.openSignupLimit(logger: environment.logger) : nil
                return AppServices(
                    rpc: [
                        HealthService(
                            store: store, lane: environment.lane, identity: environment.identity,
                            signupLimit: signupLimit)
                    ],
                    access: openSignup ? AccessRules(overriding: [HealthV1.Health.createUser.path: .public]) : .declared
                )
            }
        } catch {
            throw ExitCode.failure
        }
    }
}
