import ArgumentParser
import ClassificationCore
import ClassificationService
import Foundation
import Jobs
import JobsService
import ServiceKit

/// The classification service executable: datasets, training (jobs on the heavy-work lane), evaluation and
/// predictions on libtorch.
@main
struct ClassificationCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "classification",
        abstract: "Menagerie's classification service: image classifiers and object detectors trained from labelled photos.",
        discussion: """
            Datasets, models, the catalogue and jobs live in one SQLite file (--database, default \
            DATA_DIR/classification.sqlite); replicas given the same file serve the same models.
            """)

    @OptionGroup var options: ServiceOptions

    @Option(name: .customLong("database"), help: "The SQLite file (default: DATA_DIR/classification.sqlite).")
    var databasePath: String?

    @Option(name: .customLong("torch-threads"), help: "libtorch's threads for each training or prediction (default: the cores).")
    var torchThreads: Int?

    @Option(name: .customLong("max-upload-bytes"), help: "The largest dataset or model upload, in bytes.")
    var maxUploadBytes = 1 << 30

    func validate() throws {
        if let torchThreads, !(1...256).contains(torchThreads) { throw ValidationError("--torch-threads must be 1…256") }
        guard maxUploadBytes > 0 else { throw ValidationError("--max-upload-bytes must be positive") }
    }

    func run() async throws {
        try await ServiceRunner.run(name: "classification", options: options) { environment in
            let path = databasePath ?? environment.dataDirectory.appendingPathComponent("classification.sqlite").path
            let store = try ClassificationStore(path: path)
            // Trainings are recorded beside the models so every replica answers for them.
            let jobs = JobRunner(store: try JobStore(database: store.database), lane: environment.lane, failureMapping: JobsRPC.failure)
            let failed = try await jobs.recoverAbandonedJobs()
            if !failed.isEmpty { environment.logger.warning("failed \(failed.count) trainings left running by stopped replicas") }
            var limits = ClassificationService.Limits()
            if let torchThreads { limits.torchThreads = torchThreads }
            limits.maxUploadBytes = maxUploadBytes
            return [ClassificationService(store: store, lane: environment.lane, jobs: jobs, limits: limits), JobsService(runner: jobs)]
        }
    }
}
