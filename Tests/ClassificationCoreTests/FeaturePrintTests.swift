import Base
import Foundation
import TLS
import Testing
import Torch

@testable import ClassificationCore

/// The built-in feature print as the service loads it (a folder with a module and its manifest, checked by
/// SHA-256) and `transfer` training on it. The module here is a small TorchScript one compiled in the test, in
/// the installed one's place: the real EfficientNet-Lite0 is exercised by the integration test.
@Suite struct FeaturePrintTests {
    /// Writes a feature print whose module gives each channel's mean and spread, as make_feature_print.py lays it out.
    static func install(in folder: URL, side: Int = 16) throws -> [UInt8] {
        let module = try ScriptModule.compile(
            source: """
                def forward(self, x):
                    return torch.cat([x.mean([2, 3]), x.std([2, 3])], 1)

                """)
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        try Data(module).write(to: folder.appendingPathComponent("tiny.pt"))
        let manifest = FeaturePrint.Manifest(
            name: "tiny", file: "tiny.pt", sha256: SHA256.hex(module), inputWidth: side,
            inputHeight: side, mean: [0.5, 0.5, 0.5], std: [0.25, 0.25, 0.25], features: 6)
        try JSONEncoder().encode(manifest).write(to: folder.appendingPathComponent(FeaturePrint.manifestName))
        return module
    }

    static func scratch() -> URL {
        FileManager.default.temporaryDirectory.appendingPathComponent("feature-print-\(UUID().uuidString)")
    }

    static func error(_ body: () throws -> Void) -> ClassificationError? {
        do {
            try body()
            return nil
        } catch let error as ClassificationError { return error } catch { return nil }
    }

    @Test func anIntactFeaturePrintLoadsAndTrainsATransferClassifier() throws {
        let folder = Self.scratch()
        defer { try? FileManager.default.removeItem(at: folder) }
        let module = try Self.install(in: folder)
        let featurePrint = try FeaturePrint.load(directory: folder.path)
        #expect(featurePrint.module == module && featurePrint.manifest.inputWidth == 16)

        var options = ScriptBaseTests.noHoldOut
        options.algorithm = .transfer
        options.augmentation = Augmentation.none
        let file = try ClassifierTrainer.train(
            try ScriptBaseTests.temperatures(), options: options, featurePrint: featurePrint)
        #expect(file.header.algorithm == "transfer" && file.header.featureMethod == "forward")
        #expect(file.script == module && file.header.inputWidth == 16 && file.header.mean == [0.5, 0.5, 0.5])
        #expect(file.header.trainingAccuracy == 1)
        let classifier = try Classifier(ModelFile.decode(try file.encoded()))
        let orange = try RGBImage.decode(ScriptBaseTests.photo((250, 120, 40), mark: 9), name: "orange.png")
        #expect(try classifier.classify(orange, top: 1).map(\.label) == ["warm"])

        // The default augmentation (flips, crops, exposure) trains on two augmented copies besides each image.
        options.augmentation = nil
        let augmented = try ClassifierTrainer.train(
            try ScriptBaseTests.temperatures(), options: options, featurePrint: featurePrint)
        #expect(augmented.header.metrics["training_images"] == 8 && augmented.header.trainingAccuracy == 1)
    }

    /// A second training on the same photos takes their features from the cache (the same model); augmented copies
    /// are never kept.
    @Test func theFeaturesOfUnalteredPhotosAreCached() throws {
        let folder = Self.scratch()
        defer { try? FileManager.default.removeItem(at: folder) }
        _ = try Self.install(in: folder)
        let featurePrint = try FeaturePrint.load(directory: folder.path)
        let cache = FeatureCache()
        var options = ScriptBaseTests.noHoldOut
        options.algorithm = .transfer
        options.augmentation = Augmentation.none
        let first = try ClassifierTrainer.train(
            try ScriptBaseTests.temperatures(), options: options, featurePrint: featurePrint, featureCache: cache)
        #expect(cache.count == 8 && cache.hits == 0)
        let second = try ClassifierTrainer.train(
            try ScriptBaseTests.temperatures(), options: options, featurePrint: featurePrint, featureCache: cache)
        #expect(cache.hits == 8 && second.tensors == first.tensors)
        options.augmentation = nil
        _ = try ClassifierTrainer.train(
            try ScriptBaseTests.temperatures(), options: options, featurePrint: featurePrint, featureCache: cache)
        #expect(cache.count == 8 && cache.hits == 16, "the 16 augmented copies are computed, not kept")
    }

    @Test func aCorruptedModuleIsRefusedByItsChecksum() throws {
        let folder = Self.scratch()
        defer { try? FileManager.default.removeItem(at: folder) }
        var module = try Self.install(in: folder)
        module[module.count / 2] ^= 0xFF
        try Data(module).write(to: folder.appendingPathComponent("tiny.pt"))
        let error = Self.error { _ = try FeaturePrint.load(directory: folder.path) }
        #expect(error?.category == .dataLoss)
        #expect(error?.message.contains("tiny.pt is corrupt: its SHA-256 is") == true, "\(String(describing: error))")
        #expect(error?.message.contains("compose/compose feature-print") == true)

        // Cut short, the same.
        try Data(module.prefix(100)).write(to: folder.appendingPathComponent("tiny.pt"))
        #expect(Self.error { _ = try FeaturePrint.load(directory: folder.path) }?.category == .dataLoss)
    }

    @Test func aMissingFeaturePrintSaysHowToInstallIt() throws {
        let folder = Self.scratch()
        let missing = Self.error { _ = try FeaturePrint.load(directory: folder.path) }
        #expect(missing?.category == .failedPrecondition)
        #expect(
            missing?.message.contains("the feature print is not installed") == true
                && missing?.message.contains("compose/compose up") == true)

        var options = ClassifierTrainingOptions()
        options.algorithm = .transfer
        let untrained = Self.error {
            _ = try ClassifierTrainer.train(try ScriptBaseTests.temperatures(), options: options)
        }
        #expect(untrained?.category == .failedPrecondition && untrained?.message.contains("not installed") == true)
    }

    @Test func transferIsTheDefaultForPhotosOnlyWhenInstalled() throws {
        let photos = try TrainingDefaultsTests.dataset(
            (0..<4).map { TrainingDefaultsTests.noise(side: 100, seed: UInt64($0)) })
        let small = try TrainingDefaultsTests.dataset(
            (0..<4).map { TrainingDefaultsTests.noise(side: 32, seed: UInt64($0)) })
        #expect(ClassifierAlgorithm.automatic(for: photos, featurePrintInstalled: true) == .transfer)
        #expect(ClassifierAlgorithm.automatic(for: photos, featurePrintInstalled: false) == .cnn)
        #expect(ClassifierAlgorithm.automatic(for: small, featurePrintInstalled: true) == .cnn)
    }
}
