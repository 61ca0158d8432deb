import ArgumentParser
import GuestbookCore
import GuestbookService
import ServiceKit

/// The guestbook's executable, a test-only service: the suite starts it to check that a service added by the
/// documented path runs like the others (health, reflection, its CLI group, a clean stop on SIGTERM).
@main
struct GuestbookCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "guestbook-test-service",
        abstract: "Menagerie's test-only guestbook service: visitors' notes about animals.",
        discussion: "Data lives in an SQLite file (--database, default DATA_DIR/guestbook.sqlite) that replicas may share.")

    @OptionGroup var options: ServiceOptions

    /// Exits 0 after a graceful stop, 1 when the service could not start.
    func run() async throws {
        do {
            try await ServiceRunner.run(name: "guestbook", options: options) { environment in
                AppServices(rpc: [GuestbookService(store: try GuestbookStore(path: environment.databasePath))])
            }
        } catch {
            throw ExitCode.failure
        }
    }
}
