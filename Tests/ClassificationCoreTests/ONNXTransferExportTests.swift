import Foundation
import Testing
import Torch

@testable import ClassificationCore

/// Issue 26, models that run elsewhere: a `transfer` classifier — the installed feature print, EfficientNet-Lite0, with
/// a head trained on it — exported as one ONNX graph gives the service's own top-1 and probabilities (within 1e-4) in
/// onnxruntime and through OpenCV's DNN module when imported back.
@Suite(.serialized) struct ONNXTransferExportTests {
    /// The feature print `compose/compose feature-print` installs (or MENAGERIE_FEATURE_PRINT).
    static let folder =
        ProcessInfo.processInfo.environment["MENAGERIE_FEATURE_PRINT"]
        ?? ONNXExportTests.root.appendingPathComponent("compose/.cache/feature-print").path
    /// Under CI=true the tests run (and fail) without it, as `compose test` installs it.
    static let installed =
        FileManager.default.fileExists(atPath: folder + "/" + FeaturePrint.manifestName)
        || ProcessInfo.processInfo.environment["CI"] == "true"
    static let missing: Comment =
        "skipped: the feature print is not installed (compose/compose feature-print; set CI=true to require it)"

    /// Photos of two kinds a pretrained network tells apart: stripes across and stripes down, in changing colours.
    static func striped(_ seed: UInt64, across: Bool, width: Int = 80, height: Int = 60) -> RGBImage {
        var random = SeededRandom(seed: seed)
        let period = 6 + Int(random.next() % 6)
        let colour = (0..<3).map { _ in UInt8(100 + random.next() % 156) }
        var pixels = [UInt8](repeating: 0, count: width * height * 3)
        for y in 0..<height {
            for x in 0..<width where ((across ? y : x) / period) % 2 == 0 {
                for c in 0..<3 { pixels[3 * (y * width + x) + c] = colour[c] &- UInt8(random.next() % 30) }
            }
        }
        return RGBImage(width: width, height: height, pixels: pixels)
    }

    static let trained: Result<ModelFile, Error> = Result {
        let featurePrint = try FeaturePrint.load(directory: folder)
        let images = (0..<8).map { striped(UInt64($0), across: $0 % 2 == 0) }
        var options = ClassifierTrainingOptions()
        options.algorithm = .transfer
        options.augmentation = Augmentation.none
        options.validationFraction = 0
        return try ClassifierTrainer.train(
            try TrainingDefaultsTests.dataset(images, labels: ["across", "down"]),
            options: options, featurePrint: featurePrint)
    }

    /// Held-out photos of other sizes and shapes than the input, so the service's resizing is part of what is compared.
    static let photos = (0..<4).map {
        striped(UInt64(50 + $0), across: $0 % 2 == 0, width: 90 + 7 * $0, height: 64 + 11 * $0)
    }

    /// Each photo as the exported graph takes it: resized as the service does, x = p / 255, (x − mean) / std.
    static func inputs(_ header: ModelHeader) throws -> [[Float]] {
        try photos.map {
            header.normalised(
                try Preprocessing.input(
                    $0, width: header.inputWidth, height: header.inputHeight, scaling: header.scaling
                ).pixels)
        }
    }

    @Test(.enabled(if: installed, missing))
    func onnxruntimeGivesTheTransferClassifiersTopOneAndProbabilities() throws {
        let file = try Self.trained.get()
        #expect(file.header.algorithm == "transfer" && file.header.inputWidth == 224)
        let exported = try ONNXExport.export(file, name: "stripes")
        let run = try ONNXExportTests.onnxruntime(exported, try Self.inputs(file.header))
        let service = try Classifier(file)
        var right = 0
        for (index, (photo, theirs)) in zip(Self.photos, run.probabilities).enumerated() {
            let ours = try service.classify(photo, top: 2)
            #expect(ours[0].label == file.header.labels[argmax(theirs)], "\(ours) vs \(theirs)")
            for prediction in ours {
                let label = try #require(file.header.labels.firstIndex(of: prediction.label))
                #expect(abs(prediction.confidence - Double(theirs[label])) < 1e-4, "\(ours) vs \(theirs)")
            }
            if ours[0].label == (index % 2 == 0 ? "across" : "down") { right += 1 }
        }
        // The head learnt the stripes, so equal top-1s are not two uniform guesses.
        #expect(right >= 3, "\(right) of 4 held-out photos right")
        #expect(run.input == [.string("image"), .int(1), .int(3), .int(224), .int(224)])
        #expect(run.output == [.string("probabilities"), .int(1), .int(2)])
        #expect(run.metadata["menagerie.algorithm"] == "transfer" && run.metadata["labels"] == "[\"across\",\"down\"]")
        #expect(
            run.metadata["input_mean"] == "0.49803922,0.49803922,0.49803922"
                && run.metadata["input_std"] == "0.5019608,0.5019608,0.5019608",
            "\(run.metadata)")
        #expect(run.metadata["input_resize"] == "fit" && run.metadata["input_scale"] == "1/255")
    }

    @Test(.enabled(if: installed, missing))
    func theExportedTransferClassifierImportsBackThroughOpenCV() throws {
        let file = try Self.trained.get()
        let exported = try ONNXExport.export(file, name: "stripes")
        // What `model import --format onnx` takes from metadata_props: labels, input size, normalisation.
        let described = try #require(ONNXExport.described(exported))
        #expect(
            described
                == ONNXExport.Described(
                    labels: ["across", "down"], width: 224, height: 224, kind: .classifier,
                    mean: file.header.mean, std: file.header.std))
        var header = ModelHeader(
            kind: .classifier, algorithm: "onnx", labels: described.labels, inputWidth: described.width,
            inputHeight: described.height)
        header.mean = described.mean
        header.std = described.std
        let imported = try Classifier(ModelFile(header: header, tensors: [], script: exported))
        let service = try Classifier(file)
        let raw = try Self.photos.map { try Preprocessing.input($0, width: 224, height: 224, scaling: .fit).pixels }
        for (ours, theirs) in zip(try service.probabilities(raw), try imported.probabilities(raw)) {
            #expect(argmax(ours) == argmax(theirs))
            #expect(zip(ours, theirs).allSatisfy { abs($0 - $1) < 1e-4 }, "\(ours) vs \(theirs)")
        }
    }

    /// A transfer model with tensors beside its head is refused by name: the export writes the layers its module
    /// holds (a fine-tuned model's own tuned copy included) and the head, which such tensors are neither.
    @Test func aTransferModelWithTensorsBesideItsHeadIsRefused() throws {
        let header = ModelHeader(
            kind: .classifier, algorithm: "transfer", labels: ["a", "b"], inputWidth: 8, inputHeight: 8)
        let head = [
            NamedArray(name: "mean", shape: [2], values: [0, 0]),
            NamedArray(name: "deviation", shape: [2], values: [1, 1]),
            NamedArray(name: "weight", shape: [2, 2], values: [1, 0, 0, 1]),
            NamedArray(name: "bias", shape: [2], values: [0, 0]),
        ]
        func refusal(_ file: ModelFile) -> String? {
            do {
                _ = try ONNXExport.export(file, name: "tuned")
                return nil
            } catch let error as ClassificationError {
                return error.category == .failedPrecondition ? error.message : "\(error.category): \(error.message)"
            } catch { return "\(error)" }
        }
        let tuned = refusal(
            ModelFile(
                header: header,
                tensors: head + [NamedArray(name: "_blocks.15._project_conv.weight", shape: [1], values: [1])]))
        #expect(
            tuned?.contains("tensors besides its linear head (_blocks.15._project_conv.weight)") == true,
            "\(tuned ?? "exported")")
    }

    /// A transfer model on another feature print than EfficientNet-Lite0 (here a small compiled module) is refused
    /// naming the network the export writes, not written wrong.
    @Test func aFeaturePrintOtherThanLite0IsRefused() throws {
        let folder = FeaturePrintTests.scratch()
        defer { try? FileManager.default.removeItem(at: folder) }
        _ = try FeaturePrintTests.install(in: folder)
        var options = ScriptBaseTests.noHoldOut
        options.algorithm = .transfer
        options.augmentation = Augmentation.none
        let file = try ClassifierTrainer.train(
            try ScriptBaseTests.temperatures(), options: options,
            featurePrint: try FeaturePrint.load(directory: folder.path))
        #expect {
            try ONNXExport.export(file, name: "tiny")
        } throws: { error in
            let error = error as? ClassificationError
            return error?.category == .failedPrecondition
                && error?.message.contains("is not EfficientNet-Lite0 (its module has no _conv_stem)") == true
        }
    }

    /// TensorFlow's "same" padding as efficientnet-lite-pytorch's Conv2dStaticSamePadding computes it: the smaller
    /// half before (a stride-2 3×3 on 224 pads only after), the output ⌈size / stride⌉.
    @Test func samePaddingSplitsAsTheTracedModuleDoes() {
        #expect(ONNXExport.Graph.samePadding(size: 224, kernel: 3, stride: 2) == (0, 1, 112))
        #expect(ONNXExport.Graph.samePadding(size: 56, kernel: 5, stride: 2) == (1, 2, 28))
        #expect(ONNXExport.Graph.samePadding(size: 14, kernel: 5, stride: 1) == (2, 2, 14))
        #expect(ONNXExport.Graph.samePadding(size: 7, kernel: 1, stride: 1) == (0, 0, 7))
    }
}
