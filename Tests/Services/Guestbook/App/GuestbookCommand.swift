import ArgumentParser
import GuestbookCore
import GuestbookService
import JobsService
import ServiceKit

/// The guestbook's executable, a test-only service run as the others are: compose starts it from a services file
/// that lists it, the gateway's `guestbook` group drives it, and it takes every service's options (ServiceOptions),
/// `--cluster` included. Its methods are served at the levels guestbook.proto declares, over the binary protocol
/// and HTTP/JSON (Connect) alike.
@main
struct GuestbookCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "guestbook",
        abstract: "Menagerie's test-only guestbook service: visitors' notes about animals.",
        discussion:
            "Data lives in an SQLite file (--database, default DATA_DIR/guestbook.sqlite) that replicas on one machine may share, or, with --cluster, in a dqlite cluster that the replicas' nodes form."
    )

    @OptionGroup var options: ServiceOptions

    /// Exits 0 after a graceful stop, 1 when the service could not start.
    func run() async throws {
        do {
            try await ServiceRunner.run(name: "guestbook", options: options) { environment in
                // The SQLite file, or with --cluster the replicas' dqlite cluster: the one way onto either.
                let store = GuestbookStore(
                    database: try environment.openDatabase(migrations: GuestbookSchema.migrations))
                // CountEntries' jobs are recorded beside the notes, so every replica answers for them.
                let jobs = try await ServiceJobs(
                    database: store.database, logger: environment.logger, shutdownGrace: environment.shutdownGrace,
                    limits: environment.jobs)
                return AppServices(
                    rpc: [GuestbookService(store: store, jobs: jobs.runner), jobs.rpcService],
                    background: [jobs.backgroundService],
                    access: .declared)
            }
        } catch {
            throw ExitCode.failure
        }
    }
}
