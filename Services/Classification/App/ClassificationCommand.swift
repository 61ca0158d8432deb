import ArgumentParser
import ClassificationCore
import ClassificationService
import ClassificationAPI
import Foundation
import Identity
import Jobs
import JobsAPI
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

    @Option(name: .customLong("torch-threads"), help: "libtorch's threads for each training or prediction (default: the cores).")
    var torchThreads: Int?

    @Option(name: .customLong("max-upload-bytes"), help: "The largest dataset or model upload, in bytes.")
    var maxUploadBytes = 1 << 30

    @Option(name: .customLong("feature-print"),
            help: "The pretrained feature print's folder (`train --algorithm transfer`; default: $MENAGERIE_FEATURE_PRINT, which compose sets; without one, transfer is refused and photos train with cnn).")
    var featurePrint: String?

    func validate() throws {
        if let torchThreads, !(1...256).contains(torchThreads) { throw ValidationError("--torch-threads must be 1…256") }
        guard maxUploadBytes > 0 else { throw ValidationError("--max-upload-bytes must be positive") }
    }

    /// Exits 0 after a graceful stop, 1 when the service could not start or a background service failed.
    func run() async throws {
        do {
            try await ServiceRunner.run(name: "classification", options: options) { environment in
                let store = try ClassificationStore(path: environment.databasePath)
                // Trainings are recorded beside the models so every replica answers for them.
                let jobs = try await ServiceJobs(
                    database: store.database, logger: environment.logger,
                    shutdownGrace: environment.shutdownGrace, limits: environment.jobs)
                var limits = ClassificationService.Limits()
                if let torchThreads { limits.torchThreads = torchThreads }
                limits.maxUploadBytes = maxUploadBytes
                let featurePrint = FeaturePrintSource(directory: featurePrint ?? ProcessInfo.processInfo.environment["MENAGERIE_FEATURE_PRINT"])
                return AppServices(
                    rpc: [ClassificationService(store: store, lane: environment.lane, jobs: jobs.runner, limits: limits, featurePrint: featurePrint),
                          jobs.rpcService],
                    background: [jobs.backgroundService], access: Self.access)
            }
        } catch {
            throw ExitCode.failure
        }
    }

    /// Activated models serve everyone (classify, list, search the catalogue); changing which models and which
    /// catalogue every user gets is the admin's; datasets and trainings need a user.
    static let access = AccessRules(default: .user, [
        ClassificationV1.Classification.classify.path: .everyone, ClassificationV1.Classification.detect.path: .everyone,
        ClassificationV1.Classification.listModels.path: .everyone, ClassificationV1.Classification.getModel.path: .everyone,
        ClassificationV1.Classification.searchCatalogue.path: .everyone,
        ClassificationV1.Classification.getCatalogueEntry.path: .everyone,
        ClassificationV1.Classification.importModel.path: .admin, ClassificationV1.Classification.setActiveModel.path: .admin,
        ClassificationV1.Classification.deleteModel.path: .admin, ClassificationV1.Classification.importCatalogue.path: .admin,
    ])
}
