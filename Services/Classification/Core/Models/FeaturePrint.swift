import Base
import Foundation
import TLS

/// The built-in pretrained network under `--algorithm transfer`, Menagerie's counterpart of Create ML's feature
/// print: ImageNet-pretrained EfficientNet-Lite0 without its classifier, traced to TorchScript by
/// Services/Classification/tools/make_feature_print.py when compose installs it (nothing is fetched at run time).
/// Its folder holds the module and `feature-print.json`, a manifest naming the module's file, its SHA-256, input
/// size and normalisation. The module is checked against that checksum every time it is loaded: a module cut short
/// or changed on disk would otherwise load and give wrong features without a word.
public struct FeaturePrint: Sendable {
    /// The manifest the install script writes.
    public struct Manifest: Codable, Sendable, Equatable {
        public var name: String
        public var file: String
        public var sha256: String
        public var inputWidth: Int
        public var inputHeight: Int
        public var mean: [Float]
        public var std: [Float]
        public var features: Int

        enum CodingKeys: String, CodingKey {
            case name, file, sha256, mean, std, features
            case inputWidth = "input_width", inputHeight = "input_height"
        }
    }

    /// The manifest's file name inside the folder.
    public static let manifestName = "feature-print.json"
    /// What to tell a user whose service has no feature print.
    public static let installHint =
        "run compose/compose up (or compose/compose feature-print), or start the service with --feature-print DIR"

    public let manifest: Manifest
    /// The TorchScript module's bytes, checked.
    public let module: [UInt8]

    /// Reads and checks the feature print in `directory`: `FAILED_PRECONDITION` when it is not installed there,
    /// `DATA_LOSS` when the module does not match its manifest's checksum.
    public static func load(directory: String) throws -> FeaturePrint {
        let folder = URL(fileURLWithPath: directory)
        let manifestURL = folder.appendingPathComponent(manifestName)
        guard let data = FileManager.default.contents(atPath: manifestURL.path) else {
            throw ClassificationError(
                .failedPrecondition, "the feature print is not installed (no \(manifestURL.path)); \(installHint)")
        }
        let manifest: Manifest
        do { manifest = try JSONDecoder().decode(Manifest.self, from: data) } catch {
            throw ClassificationError(
                .dataLoss,
                "the feature print's manifest \(manifestURL.path) is not readable (\(error)); reinstall it: \(installHint)"
            )
        }
        guard !manifest.file.isEmpty, !manifest.file.contains("/"), manifest.inputWidth > 0, manifest.inputHeight > 0,
            manifest.mean.count == 3, manifest.std.count == 3, manifest.std.allSatisfy({ $0 > 0 })
        else {
            throw ClassificationError(
                .dataLoss,
                "the feature print's manifest \(manifestURL.path) is incomplete; reinstall it: \(installHint)")
        }
        let moduleURL = folder.appendingPathComponent(manifest.file)
        guard let bytes = FileManager.default.contents(atPath: moduleURL.path) else {
            throw ClassificationError(
                .failedPrecondition, "the feature print is not installed (no \(moduleURL.path)); \(installHint)")
        }
        let module = [UInt8](bytes)
        let actual = SHA256.hex(module)
        guard actual == manifest.sha256.lowercased() else {
            throw ClassificationError(
                .dataLoss,
                "the feature print \(moduleURL.path) is corrupt: its SHA-256 is \(actual), its manifest says \(manifest.sha256); delete \(directory) and reinstall it: \(installHint)"
            )
        }
        return FeaturePrint(manifest: manifest, module: module)
    }

    public init(manifest: Manifest, module: [UInt8]) {
        self.manifest = manifest
        self.module = module
    }

    /// The feature print as a TorchScript base model (`ClassifierTrainer.trainScriptHead`): no labels, its input
    /// size and normalisation, its module.
    public var base: ModelFile {
        var header = ModelHeader(
            kind: .classifier, algorithm: "torchscript", labels: [],
            inputWidth: manifest.inputWidth, inputHeight: manifest.inputHeight)
        header.mean = manifest.mean
        header.std = manifest.std
        header.featureMethod = "forward"
        return ModelFile(header: header, tensors: [], script: module)
    }
}
