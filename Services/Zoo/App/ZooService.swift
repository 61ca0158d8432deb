import ArgumentParser
import Foundation
import RPC
import ServiceKit
import ZooCore

/// The zoo service executable.
@main
struct ZooCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "zoo",
        abstract: "Menagerie's zoo service: the Prague Zoo lexicon and walking routes.",
        discussion: """
            Data lives in an SQLite file (--database, default DATA_DIR/zoo.sqlite) that replicas may share. \
            An empty database is loaded with the bundled sample data (--sample-data); load the real data with \
            `gateway zoo import`.
            """)

    @OptionGroup var options: ServiceOptions

    @Option(name: .customLong("database"), help: "The SQLite file (default: DATA_DIR/zoo.sqlite).")
    var databasePath: String?

    @Option(
        name: .customLong("sample-data"),
        help: "Directory of data files loaded into an empty database (default: Services/Zoo/SampleData of the source tree the executable was built in).")
    var sampleData: String?

    @Flag(name: .customLong("no-sample-data"), help: "Start with an empty database instead of loading the sample data.")
    var noSampleData = false

    @Option(name: .customLong("walking-speed"), help: "Walking pace for route durations, in metres per second.")
    var walkingSpeed = 1.2

    func validate() throws {
        guard walkingSpeed.isFinite, (0.1...5).contains(walkingSpeed) else {
            throw ValidationError("--walking-speed must be 0.1…5 metres per second (got \(walkingSpeed))")
        }
    }

    func run() async throws {
        try await ServiceRunner.run(name: "zoo", options: options) { environment in
            let path = databasePath ?? environment.dataDirectory.appendingPathComponent("zoo.sqlite").path
            let library = try ZooLibrary(path: path, walkingSpeed: walkingSpeed)
            if try library.isEmpty && !noSampleData { loadSampleData(into: library, logger: environment.logger) }
            return [ZooService(library: library)]
        }
    }

    private func loadSampleData(into library: ZooLibrary, logger: Logger) {
        guard let directory = sampleData.map({ URL(fileURLWithPath: $0) }) ?? SampleDataLocation.find() else {
            logger.warning("the database is empty and no sample data was found; load data with gateway zoo import")
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
