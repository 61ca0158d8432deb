import Base
import Foundation

/// Refreshes the zoo's data from configured sources on a cron schedule. Replicas sharing one database each
/// run the schedule; the first to import a firing wins and the others skip it. The service runs it as a
/// background service, stopped (between or during a refresh, whose import is one transaction) on shutdown.
public final class ZooRefresher: BackgroundService {
    public var name: String { "zoo refresher" }

    public let sources: [RefreshSource]
    public let scheduler: RefreshScheduler
    private let library: ZooLibrary
    private let logger: Logger

    public init(
        library: ZooLibrary, sources: [RefreshSource], scheduler: RefreshScheduler,
        logger: Logger = Logger(label: "zoo")
    ) {
        self.library = library
        self.sources = sources
        self.scheduler = scheduler
        self.logger = logger
    }

    /// Fetches every source and imports the files in one import. Returns nil when another replica already
    /// imported the firing at `scheduledFor`. A fetch that fails fails the whole refresh, which is recorded
    /// in the import metadata; the old data stays.
    @discardableResult
    public func refresh(scheduledFor: Date?) async throws -> ImportRecord? {
        if let scheduledFor, try library.hasImported(scheduledFor: scheduledFor) { return nil }
        let started = Date()
        let source = sources.map(\.description).joined(separator: ", ")
        var files: [ZooSourceFile] = []
        do {
            for item in sources { files += try await item.fetch() }
        } catch {
            library.recordFailedImport(
                source: source, trigger: .schedule, scheduledFor: scheduledFor, startedAt: started, error: error)
            throw error
        }
        return try library.importFiles(files, source: source, trigger: .schedule, scheduledFor: scheduledFor)
    }

    /// Refreshes at every firing of the schedule until the task is cancelled; failures are logged. (A
    /// schedule that fires no more within 30 years ends it, which stops the service: `BackgroundService`.)
    public func run() async {
        logger.info(
            "refreshing on \"\(scheduler.schedule)\" from \(sources.map(\.description).joined(separator: ", "))")
        await scheduler.run { firing in
            do {
                if let record = try await self.refresh(scheduledFor: firing) {
                    self.logger.info(
                        "scheduled refresh imported \(record.rowsImported) records, skipped \(record.rowsSkipped)")
                } else {
                    self.logger.info("scheduled refresh of \(firing) was done by another replica")
                }
            } catch {
                self.logger.error("scheduled refresh failed: \(error)")
            }
        }
    }
}
