import ArgumentParser
import ClassificationAPI
import Foundation
import GatewayKit
import JobsAPI
import RPC
import Schema

/// `gateway classify …`: datasets, training, evaluation, predictions, models, the catalogue and feedback of the
/// classification service.
public struct ClassificationCommands: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "classify",
        abstract:
            "Train image classifiers and object detectors from labelled photos, evaluate them, and classify or detect.",
        discussion:
            "Bad input exits with the status code of INVALID_ARGUMENT (3), unknown datasets or models with NOT_FOUND (5), and so on.",
        subcommands: [
            DatasetCommands.self, Train.self, Evaluate.self, ClassifyImage.self, Detect.self, ModelCommands.self,
            DeploymentCommands.self, CatalogueCommands.self, Feedback.self, JobsCommands<ClassificationCommands>.self,
        ])

    public init() {}
}

extension ClassificationCommands: JobsCommandService {
    public static let serviceName = "classification"
}

extension GlobalOptions {
    func withClassification(_ body: (ClassificationV1.Classification.Client) async throws -> Void) async throws {
        try await withClient(for: "classification", ClassificationV1.Classification.Client.init(wrapping:), body)
    }

    /// Uploads and trainings carry or wait for much more than a quick call: at least five minutes.
    var longCallOptions: CallOptions { CallOptions(timeout: .milliseconds(Int64(max(timeout, 300) * 1000))) }

    /// A detection stream lasts as long as its camera: no deadline (it ends with its input, or Ctrl-C).
    var streamCallOptions: CallOptions { CallOptions() }
}
