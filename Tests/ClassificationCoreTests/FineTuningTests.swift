import Base
import Foundation
import TLS
import Testing
import Torch

@testable import ClassificationCore

/// `transfer --fine-tune` on a small feature print shaped like EfficientNet-Lite0's: numbered blocks under a
/// container named `blocks`, a layer after them and one its features never use. The real network is fine-tuned by
/// the integration test (ClassificationTransferTests).
@Suite struct FineTuningTests {
    /// Channel means and spreads (6 numbers) through two 6×6 blocks; `classifier` is registered but not used, as
    /// the feature print's dropped 1,000-class layer.
    static let source = """
        def forward(self, x):
            m = torch.cat([x.mean([2, 3]), x.std([2, 3])], 1)
            return torch.matmul(torch.matmul(m, getattr(self.blocks, "0").weight), getattr(self.blocks, "1").weight) + self.after.bias

        """

    static func module() throws -> [UInt8] {
        try ScriptModule.compile(
            source: source,
            parameters: [
                ("blocks.0.weight", try identity()), ("blocks.1.weight", try identity()),
                ("after.bias", try Tensor.zeros([6])), ("classifier.weight", try Tensor.ones([2, 6])),
            ])
    }

    static func identity() throws -> Tensor {
        try Tensor((0..<36).map { $0 % 7 == 0 ? 1 : 0 }, shape: [6, 6])
    }

    /// Writes the module as an installed feature print (as FeaturePrintTests does) and loads it.
    static func featurePrint(_ folder: URL) throws -> FeaturePrint {
        let module = try module()
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        try Data(module).write(to: folder.appendingPathComponent("blocks.pt"))
        let manifest = FeaturePrint.Manifest(
            name: "blocks", file: "blocks.pt", sha256: SHA256.hex(module), inputWidth: 16,
            inputHeight: 16, mean: [0.5, 0.5, 0.5], std: [0.25, 0.25, 0.25], features: 6)
        try JSONEncoder().encode(manifest).write(to: folder.appendingPathComponent(FeaturePrint.manifestName))
        return try FeaturePrint.load(directory: folder.path)
    }

    /// Other warm and cool shades than the training photos'.
    static func shades() throws -> Dataset {
        let warm: [(UInt8, UInt8, UInt8)] = [(250, 120, 40), (210, 90, 30)]
        let cool: [(UInt8, UInt8, UInt8)] = [(40, 90, 230), (30, 150, 160)]
        return try DatasetBuilder.classification(
            files: warm.enumerated().map {
                ("warm/\($0.offset).png", ScriptBaseTests.photo($0.element, mark: 3 + $0.offset))
            }
                + cool.enumerated().map {
                    ("cool/\($0.offset).png", ScriptBaseTests.photo($0.element, mark: 3 + $0.offset))
                })
    }

    static var options: ClassifierTrainingOptions {
        var options = ClassifierTrainingOptions()
        options.algorithm = .transfer
        options.fineTune = true
        options.fineTuneEpochs = 4
        return options
    }

    static func value(_ module: ScriptModule, _ name: String) throws -> [Float] { try module.parameter(name).floats() }

    @Test func theLastBlockAndTheLayersAfterItAreTuned() throws {
        let module = try ScriptModule(bytes: try Self.module())
        let names = try module.parameterNames()
        #expect(names == ["blocks.0.weight", "blocks.1.weight", "after.bias", "classifier.weight"])
        #expect(try FineTuning.lastBlock(of: names) == ["blocks.1.weight", "after.bias", "classifier.weight"])

        // EfficientNet-Lite0's names, as the installed feature print lists them: block 15, not 9 (numbers, not text).
        let lite =
            ["net._conv_stem.weight", "net._bn0.weight"]
            + (0...15).flatMap { ["net._blocks.\($0)._depthwise_conv.weight", "net._blocks.\($0)._bn1.bias"] }
            + ["net._conv_head.weight", "net._bn1.weight", "net._bn1.bias", "net._fc.weight", "net._fc.bias"]
        #expect(
            try FineTuning.lastBlock(of: lite) == [
                "net._blocks.15._depthwise_conv.weight", "net._blocks.15._bn1.bias", "net._conv_head.weight",
                "net._bn1.weight", "net._bn1.bias", "net._fc.weight", "net._fc.bias",
            ])
        #expect(throws: ClassificationError.self) { try FineTuning.lastBlock(of: ["conv.weight", "fc.weight"]) }
        #expect(throws: TorchError.self) { try module.parameter("blocks.2.weight") }
    }

    @Test func fineTuningTrainsTheLastBlockKeepsTheBestEpochAndServesTheTunedNetwork() throws {
        let folder = FeaturePrintTests.scratch()
        defer { try? FileManager.default.removeItem(at: folder) }
        let featurePrint = try Self.featurePrint(folder)
        var reported: [TrainingProgress] = []
        let file = try ClassifierTrainer.train(
            try ScriptBaseTests.temperatures(), validation: try Self.shades(), options: Self.options,
            featurePrint: featurePrint
        ) { reported.append($0) }
        #expect(file.header.algorithm == "transfer" && file.header.fineTuned == true)

        // The head's pass, then up to four epochs of fine-tuning, each named.
        let tuning = reported.filter { $0.pass == 2 }
        #expect(
            tuning.map(\.epoch) == Array(1...tuning.count)
                && tuning.allSatisfy { $0.passes == 2 && $0.epochs == 4 && $0.stage == "fine-tuning the last block" })
        #expect(reported.first?.pass == 1 && reported.first?.stage == "head on the frozen network")
        // The kept epoch is the one with the best held-out figures, and the model says so; fine-tuning ran every
        // epoch or stopped two epochs after it.
        let best = try #require(file.header.metrics["fine_tune_best_epoch"].map(Int.init))
        #expect(
            (1...tuning.count).contains(best) && file.header.validationAccuracy == tuning[best - 1].validationAccuracy)
        #expect(tuning.count == 4 || tuning.count == best + FineTuning.patience, "\(tuning.count) epochs, best \(best)")

        // The module stored is the tuned one: the last block moved, the blocks before it and the unused layer did not.
        let original = try ScriptModule(bytes: featurePrint.module)
        let tuned = try ScriptModule(bytes: try #require(file.script))
        #expect(file.script != featurePrint.module)
        #expect(try Self.value(tuned, "blocks.0.weight") == Self.value(original, "blocks.0.weight"))
        #expect(try Self.value(tuned, "blocks.1.weight") != Self.value(original, "blocks.1.weight"))
        #expect(try Self.value(tuned, "classifier.weight") == Self.value(original, "classifier.weight"))
        #expect(
            file.header.metrics["fine_tuned_parameters"] == Double(36 + 6),
            "blocks.1.weight and after.bias; classifier.weight gets no gradient")

        // Stored and read back (format version 2, which older builds read: the tuned network is the module itself),
        // it classifies with the tuned network.
        let bytes = try file.encoded()
        #expect(bytes[16] == 2)
        let decoded = try ModelFile.decode(bytes)
        #expect(decoded == file)
        let classifier = try Classifier(decoded)
        for (colour, label) in [((250, 120, 40), "warm"), ((40, 90, 230), "cool")] as [((UInt8, UInt8, UInt8), String)]
        {
            let image = try RGBImage.decode(ScriptBaseTests.photo(colour, mark: 9), name: "\(label).png")
            #expect(try classifier.classify(image, top: 1).map(\.label) == [label])
        }
        // Its probabilities are the tuned network's: the frozen network under the same head gives others.
        var frozen = decoded
        frozen.script = featurePrint.module
        let input = try Preprocessing.input(
            try RGBImage.decode(ScriptBaseTests.photo((210, 90, 30), mark: 4), name: "a.png"),
            width: 16, height: 16, scaling: .fit
        ).pixels
        #expect(try Classifier(decoded).probabilities([input]) != Classifier(frozen).probabilities([input]))

        // ONNX export reads the network from the model's own (tuned) module: this small one is not EfficientNet-Lite0,
        // which it says, rather than refusing the model for being fine-tuned (the stack test exports a tuned Lite0).
        let refusal = FeaturePrintTests.error { _ = try ONNXExport.export(decoded, name: "tuned") }
        #expect(
            refusal?.category == .failedPrecondition && refusal?.message.contains("is not EfficientNet-Lite0") == true,
            "\(String(describing: refusal))")
    }

    @Test func onlyTransferFineTunes() throws {
        var options = Self.options
        options.algorithm = .cnn
        let refused = FeaturePrintTests.error {
            _ = try ClassifierTrainer.train(try ScriptBaseTests.temperatures(), options: options)
        }
        #expect(
            refused?.category == .invalidArgument
                && refused?.message.contains("fine-tuning applies to transfer") == true,
            "\(String(describing: refused))")
    }

    /// A cancel while fine-tuning keeps the best epoch so far, tuned and marked as interrupted.
    @Test func aCancelWhileFineTuningKeepsTheBestEpochSoFar() throws {
        struct Cancelled: Error {}
        let folder = FeaturePrintTests.scratch()
        defer { try? FileManager.default.removeItem(at: folder) }
        let featurePrint = try Self.featurePrint(folder)
        do {
            _ = try ClassifierTrainer.train(
                try ScriptBaseTests.temperatures(), validation: try Self.shades(), options: Self.options,
                featurePrint: featurePrint
            ) { if $0.pass == 2 && $0.epoch == 2 { throw Cancelled() } }
            Issue.record("the training was not cancelled")
        } catch let interrupted as TrainingInterrupted {
            #expect(interrupted.cause is Cancelled)
            let partial = interrupted.partial
            #expect(
                partial.header.fineTuned == true && partial.header.algorithm == "transfer"
                    && partial.script != featurePrint.module)
            #expect(
                partial.header.interrupted?.hasPrefix("in pass 2/2 while fine-tuning, after epoch 2/4; kept epoch ")
                    == true,
                "\(partial.header.interrupted ?? "")")
            #expect(try Classifier(ModelFile.decode(try partial.encoded())).header.labels == ["cool", "warm"])
        }
    }
}
