import ArgumentParser
import Base
import Foundation
import Identity
import Jobs
import JobsService
import RPC
import ServiceKit
import ZooAPI
import ZooCore
import ZooService

/// The zoo service executable.
@main
struct ZooCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "zoo",
        abstract: "Menagerie's zoo service: the Prague Zoo lexicon and walking routes.",
        discussion: """
            Data lives in an SQLite file (--database, default DATA_DIR/zoo.sqlite) that replicas may share. \
            An empty database is loaded with the bundled sample data (--sample-data); load the real data with \
            `gateway zoo import`. \
            Map tiles sent with `gateway zoo import --tiles FILE.mbtiles` are kept beside the database \
            (zoo.sqlite keeps zoo.mbtiles) and served at /api/map/data.
            """)

    @OptionGroup var options: ServiceOptions

    @Option(
        name: .customLong("sample-data"),
        help:
            "Directory of data files loaded into an empty database (default: the sample data in the Menagerie_ZooCore.resources bundle beside the executable)."
    )
    var sampleData: String?

    @Flag(name: .customLong("no-sample-data"), help: "Start with an empty database instead of loading the sample data.")
    var noSampleData = false

    @Option(
        name: .customLong("web"),
        help:
            "Directory of the web page served at / (default: Web in the Menagerie_ZooService.resources bundle beside the executable)."
    )
    var webDirectory: String?

    @Option(name: .customLong("walking-speed"), help: "Walking pace for route durations, in metres per second.")
    var walkingSpeed = 1.2

    @Option(
        name: .customLong("refresh"),
        help:
            "Cron expression for refreshing from the --refresh-source sources, e.g. \"0 2 * * 6\" (Saturdays 02:00 local time)."
    )
    var refreshCron: String?

    @Option(
        name: .customLong("refresh-source"),
        help:
            "[KIND=]PATH|URL to refresh from (repeatable): a file, a directory of the open data's files, or an http(s) URL. Also loaded into an empty database instead of the sample data."
    )
    var refreshSources: [String] = []

    func validate() throws {
        guard walkingSpeed.isFinite, (0.1...5).contains(walkingSpeed) else {
            throw ValidationError("--walking-speed must be 0.1…5 metres per second (got \(walkingSpeed))")
        }
        guard (refreshCron == nil) == refreshSources.isEmpty else {
            throw ValidationError("--refresh and --refresh-source go together")
        }
        if let refreshCron {
            do { _ = try CronSchedule(refreshCron) } catch { throw ValidationError("--refresh: \(error)") }
        }
        for source in refreshSources {
            do { _ = try RefreshSource(parsing: source) } catch { throw ValidationError("--refresh-source: \(error)") }
        }
    }

    /// Exits 0 after a graceful stop, 1 when the service could not start or a background service failed.
    func run() async throws {
        do {
            try await ServiceRunner.run(name: "zoo", options: options) { environment in
                // The SQLite file, or with --cluster the replicas' dqlite cluster.
                let library = try ZooLibrary(
                    database: environment.openDatabase(migrations: ZooSchema.migrations), walkingSpeed: walkingSpeed)
                // The map tiles live beside the database (DATA_DIR/zoo.mbtiles), shared by the replicas as it is;
                // on a cluster the file is each node's own (see ZooService.tilesShared).
                let tiles = MapTilesStore(besideDatabase: environment.databasePath)
                let refresher = try refreshCron.map { cron in
                    ZooRefresher(
                        library: library, sources: try refreshSources.map { try RefreshSource(parsing: $0) },
                        scheduler: RefreshScheduler(schedule: try CronSchedule(cron)), logger: environment.logger)
                }
                if try library.isEmpty {
                    await loadInitialData(into: library, refresher: refresher, logger: environment.logger)
                }
                // Imports run as jobs, recorded beside the zoo's data so every replica answers for them.
                let jobs = try await ServiceJobs(
                    database: library.database, logger: environment.logger,
                    shutdownGrace: environment.shutdownGrace, limits: environment.jobs)
                // A --web directory must exist; the bundled page may be absent (a binary copied without its bundle).
                let bundled = ZooHTTP.bundledWebDirectory
                let web =
                    webDirectory.map { URL(fileURLWithPath: $0) }
                    ?? (FileManager.default.fileExists(atPath: bundled.path) ? bundled : nil)
                return AppServices(
                    rpc: [
                        ZooService(
                            library: library, refresher: refresher, jobs: jobs.runner, tiles: tiles,
                            tilesShared: environment.cluster == nil), jobs.rpcService,
                    ],
                    background: [jobs.backgroundService] + (refresher.map { [$0] } ?? []),
                    http: try ZooHTTP.routes(
                        library: library, webDirectory: web, tiles: tiles, nextUpdate: { refresher?.scheduler.nextRun }),
                    access: Self.access,
                    answerCache: ZooHTTP.answerCache(library: library))
            }
        } catch {
            throw ExitCode.failure
        }
    }

    /// Reading the zoo is public and replacing its data (imports, tiles) the admin's, as zoo.proto says; its jobs
    /// are served at levels of their own (`ZooService.jobsAccess`).
    static let access = AccessRules(overriding: ZooService.jobsAccess)

    /// Fills an empty database from the refresh sources, else (or when they fail) from the sample data.
    private func loadInitialData(into library: ZooLibrary, refresher: ZooRefresher?, logger: Logger) async {
        if let refresher {
            do {
                try await refresher.refresh(scheduledFor: nil)
                logger.info("loaded the empty database from the refresh sources")
                return
            } catch {
                logger.error("could not load the empty database from the refresh sources: \(error)")
            }
        }
        if !noSampleData { loadSampleData(into: library, logger: logger) }
    }

    private func loadSampleData(into library: ZooLibrary, logger: Logger) {
        let directory = sampleData.map { URL(fileURLWithPath: $0) } ?? ZooDataSet.bundledSampleDirectory
        guard FileManager.default.fileExists(atPath: directory.path) else {
            logger.warning(
                "the database is empty and there is no sample data at \(directory.path); load data with gateway zoo import"
            )
            return
        }
        do {
            if let record = try library.loadSampleDataIfEmpty(from: directory) {
                logger.info("loaded the sample data from \(directory.path): \(record.rowsImported) records")
            }
        } catch {
            logger.error("could not load the sample data from \(directory.path): \(error)")
        }
    }
}
