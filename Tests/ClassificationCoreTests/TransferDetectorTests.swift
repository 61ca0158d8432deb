import Foundation
import Testing
import Torch

@testable import ClassificationCore

/// Issue 26, detectors on the pretrained backbone: `--kind detector --algorithm transfer` — the installed feature
/// print (EfficientNet-Lite0) frozen up to its stride-16 blocks under a yolo head — trained briefly on a few
/// digit-detection scenes finds their digits, saves and loads, evaluates, and exports to ONNX giving the service's
/// boxes in onnxruntime.
@Suite(.serialized, .enabled(if: RealData.enabled, RealData.skipMessage))
struct TransferDetectorTests {
    static let installed = ONNXTransferExportTests.installed
    static let missing = ONNXTransferExportTests.missing

    static let scenes: Result<Dataset, Error> = Result {
        let folder = DetectionTrainingTests.folder
        return try DatasetBuilder.detection(
            annotationsFile: folder.appendingPathComponent("train-annotations.json"),
            imagesDirectory: folder.appendingPathComponent("images"))
    }

    /// The first 12 training scenes, fitted for 80 epochs on two copies of each (as they are, and jittered).
    static let trained: Result<(file: ModelFile, scenes: Dataset), Error> = Result {
        var subset = try scenes.get()
        subset.samples = Array(subset.samples.prefix(12))
        try Torch.setThreads(Int(ProcessInfo.processInfo.environment["TORCH_THREADS"] ?? "") ?? 2)
        var options = DetectorTrainingOptions()
        let environment = ProcessInfo.processInfo.environment
        options.inputSize = 224
        options.epochs = Int(environment["TDET_EPOCHS"] ?? "") ?? 80
        options.batchSize = 4
        options.featureVariants = Int(environment["TDET_VARIANTS"] ?? "") ?? 2
        options.learningRate = Double(environment["TDET_LR"] ?? "") ?? options.learningRate
        options.featureStride = Int(environment["TDET_STRIDE"] ?? "") ?? 16
        options.jitter = Double(environment["TDET_JITTER"] ?? "") ?? options.jitter
        options.validationFraction = 0
        let file = try DetectorTrainer.train(
            subset, options: options, featurePrint: try FeaturePrint.load(directory: ONNXTransferExportTests.folder))
        return (file, subset)
    }

    @Test(.enabled(if: installed, missing))
    func aTransferDetectorFitsAFewScenes() throws {
        let (file, subset) = try Self.trained.get()
        #expect(file.header.kind == .detector && file.header.algorithm == "transfer" && file.header.inputWidth == 224)
        #expect(file.header.transferDetector?.blocks == 11 && file.header.transferDetector?.anchors.count == 3)
        #expect(file.header.mean?.count == 3 && file.header.std?.count == 3)
        // Saved and loaded through the container and `Detectors.load`, as the service's model cache does.
        let detector = try Detectors.load(ModelFile.decode(file.encoded()))
        #expect(detector is TransferDetector)
        let fitted = try DetectorEvaluation.run(detector, on: subset)
        print(
            "digit-detection transfer, \(subset.samples.count) scenes: mAP50 on them \(String(format: "%.3f", fitted.map50)), mAP50-95 \(String(format: "%.3f", fitted.map50to95)), \(String(format: "%.1f", file.header.trainingSeconds ?? 0)) s"
        )
        #expect(fitted.map50 >= 0.6, "mAP50 \(fitted.map50)")
        #expect(fitted.overall.truePositives > 0)
        let sample = subset.samples[0]
        let image = try RGBImage.decode(subset.images[sample.hash]!)
        let found = try detector.detect(image)
        #expect(!found.isEmpty)
        for d in found {
            #expect(
                d.box.minX >= 0 && d.box.minY >= 0 && d.box.maxX <= Double(image.width)
                    && d.box.maxY <= Double(image.height))
        }
        // The label filter, as for yolo.
        let labelled = try detector.detect(
            image, confidenceThreshold: 0.25, iouThreshold: 0.45, maximum: 100, labels: ["three"])
        #expect(labelled.allSatisfy { file.header.labels[$0.label] == "three" })
    }

    /// The backbone compiled from the feature print's tensors is EfficientNet-Lite0 as traced: with every block, then
    /// the head convolution and its pooling, it gives the feature print's own 1,280 features.
    @Test(.enabled(if: installed, missing))
    func theCompiledBackboneIsTheFeaturePrintsNetwork() throws {
        let featurePrint = try FeaturePrint.load(directory: ONNXTransferExportTests.folder)
        let module = try ScriptModule(bytes: featurePrint.module)
        let network = try ONNXExport.liteTensors(module)
        let backbone = try LiteBackbone(tensors: LiteBackbone.kept(network, blocks: 16), blocks: 16)
        #expect(backbone.stride == 32 && backbone.channels == 320)
        #expect(
            LiteBackbone.blocks(forStride: 16) == 11 && LiteBackbone.blocks(forStride: 32) == 16
                && LiteBackbone.blocks(forStride: 8) == 5)
        #expect(try LiteBackbone(tensors: LiteBackbone.kept(network, blocks: 11), blocks: 11).channels == 112)
        try Torch.seed(3)
        let x = try Tensor.rand([2, 3, 224, 224]) * 2 + (-1)
        let byName = Dictionary(network.map { ($0.name, $0) }, uniquingKeysWith: { a, _ in a })
        func tensor(_ name: String) throws -> Tensor { try Tensor(byName[name]!.values, shape: byName[name]!.shape) }
        let map = try backbone.module.forward(x)
        let head = try map.conv2d(weight: tensor("_conv_head.weight"), bias: nil)
            .batchNorm(
                weight: tensor("_bn1.weight"), bias: tensor("_bn1.bias"), runningMean: tensor("_bn1.running_mean"),
                runningVariance: tensor("_bn1.running_var"), training: false, epsilon: 1e-3
            )
            .clamped(min: 0).clamped(max: 6)
        let ours = try head.mean(dim: 3).mean(dim: 2).floats()
        let traced = try module.forward(x).floats()
        #expect(ours.count == 2 * 1280 && traced.count == ours.count)
        let worst = zip(ours, traced).map { abs($0 - $1) }.max() ?? 1
        #expect(worst < 1e-4, "largest difference \(worst)")
    }

    /// Exported to ONNX, run by onnxruntime on letterboxed, normalised scenes and decoded as a YOLOv5 app does, the
    /// detector gives the service's boxes: same labels, confidences within 1e-4, boxes within a pixel.
    @Test(.enabled(if: installed && ONNXExportTests.onnxruntimeInstalled, missing))
    func onnxruntimeFindsTheTransferDetectorsBoxes() throws {
        let (file, subset) = try Self.trained.get()
        let service = try TransferDetector(file)
        let exported = try ONNXExport.export(file, name: "digits")
        let photos = try subset.samples.prefix(3).map { try RGBImage.decode(subset.images[$0.hash]!) }
        let prepared = try photos.map { try Preprocessing.input($0, width: 224, height: 224, scaling: .fit) }
        let run = try ONNXExportTests.onnxruntime(exported, prepared.map { file.header.normalised($0.pixels) })
        let rows = 3 * 14 * 14
        #expect(
            run.output == [.string("boxes"), .int(1), .int(rows), .int(7)] && run.metadata["layout"] == "yolov5",
            "\(run.output)")
        #expect(run.metadata["menagerie.kind"] == "detector" && run.metadata["menagerie.algorithm"] == "transfer")
        #expect(run.metadata["input_mean"] != nil && run.metadata["input_resize"] == "fit")
        try ONNXExportTests.expectTheServicesBoxes(
            service, on: photos, placed: prepared.map(\.placement), rows: run.probabilities, shape: [1, rows, 7],
            classes: 2, threshold: 0.05)
        // What `model import --format onnx` reads back from metadata_props.
        let described = try #require(ONNXExport.described(exported))
        #expect(
            described.kind == .detector && described.layout == "yolov5" && described.labels == file.header.labels
                && described.width == 224 && described.mean == file.header.mean && described.std == file.header.std)
    }

    /// Cancelled, a transfer detector's training keeps its last epoch's weights, as a yolo training does (they share
    /// the loop), and the kept model loads and runs.
    @Test(.enabled(if: installed, missing))
    func aCancelledTransferDetectorKeepsItsLastEpoch() throws {
        var subset = try Self.scenes.get()
        subset.samples = Array(subset.samples.prefix(4))
        var options = DetectorTrainingOptions()
        options.inputSize = 224
        options.epochs = 5
        options.featureVariants = 1
        options.validationFraction = 0
        let featurePrint = try FeaturePrint.load(directory: ONNXTransferExportTests.folder)
        do {
            _ = try DetectorTrainer.train(subset, options: options, featurePrint: featurePrint) { p in
                if p.epoch == 2 { throw CancellationError() }
            }
            Issue.record("the training was not interrupted")
        } catch let interrupted as TrainingInterrupted {
            #expect(interrupted.cause is CancellationError)
            #expect(interrupted.partial.header.interrupted == "after epoch 2/5; kept its weights")
            let detector = try Detectors.load(ModelFile.decode(interrupted.partial.encoded()))
            #expect(detector.header.algorithm == "transfer" && detector.header.labels == ["four", "three"])
            _ = try detector.detect(try RGBImage.decode(subset.images[subset.samples[0].hash]!))
        }
    }

    /// What a transfer detector cannot be trained with is refused before any work, saying why.
    @Test(.enabled(if: installed, missing))
    func badCombinationsAreRefused() throws {
        var subset = try Self.scenes.get()
        subset.samples = Array(subset.samples.prefix(2))
        let featurePrint = try FeaturePrint.load(directory: ONNXTransferExportTests.folder)
        var options = DetectorTrainingOptions()
        options.inputSize = 224
        options.epochs = 1
        options.featureStride = 64
        #expect(throws: ClassificationError.invalid("a transfer detector's feature stride is 8, 16 or 32 (got 64)")) {
            try DetectorTrainer.train(subset, options: options, featurePrint: featurePrint)
        }
        options.featureStride = 16
        options.inputSize = 200
        #expect(throws: ClassificationError.invalid("input size 200 is not a multiple of the feature map's stride 16"))
        {
            try DetectorTrainer.train(subset, options: options, featurePrint: featurePrint)
        }
        let base = ModelFile(
            header: ModelHeader(
                kind: .detector, algorithm: "yolo", labels: ["four", "three"], inputWidth: 160, inputHeight: 160),
            tensors: [])
        #expect(
            throws: ClassificationError.invalid(
                "a transfer detector trains on the built-in feature print; a base model is for yolo")
        ) {
            try DetectorTrainer.train(subset, options: options, base: base, featurePrint: featurePrint)
        }
        // A transfer detector is no yolo base.
        var header = ModelHeader(
            kind: .detector, algorithm: "transfer", labels: ["four", "three"], inputWidth: 224, inputHeight: 224)
        header.transferDetector = TransferDetectorConfiguration(anchors: [[20, 20]], blocks: 11, neckWidth: 8)
        #expect(throws: (any Error).self) { try DetectorTrainer.checkBase(header) }
    }
}
