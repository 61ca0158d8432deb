import ClassificationTestSupport
import Foundation
import Testing
import Torch

@testable import ClassificationCore

/// Issue 41, small parts of a picture: a transfer detector at stride 8 — EfficientNet-Lite0's blocks 0–4 joined by
/// blocks 5–10's stride-16 map enlarged to it — on seeded lawn scenes of three- and four-leaf clovers
/// (`CloverScenes`). The suite checks the mechanics on a few scenes (the map, training, saving, ONNX); the figures
/// beside stride 16 come from `menagerie-bench small-objects` or, here, `CLOVER_FIGURES=1`.
@Suite(.serialized)
struct SmallObjectDetectionTests {
    static let installed = ONNXTransferExportTests.installed
    static let missing = ONNXTransferExportTests.missing

    /// The scenes depend on the seed alone; four-leaf clovers are the minority and every clover is small.
    @Test func cloverScenesAreSeededAndSmall() throws {
        var scenes = CloverScenes(seed: 7)
        scenes.side = 224
        scenes.diameters = 14...18
        let a = try scenes.dataset(count: 6), b = try scenes.dataset(count: 6)
        #expect(a.samples.map(\.hash) == b.samples.map(\.hash) && a.samples.map(\.objects) == b.samples.map(\.objects))
        scenes.seed = 8
        #expect(try scenes.dataset(count: 6).samples.map(\.hash) != a.samples.map(\.hash))
        #expect(a.labels == CloverScenes.labels)
        let objects = a.samples.flatMap(\.objects)
        let four = objects.filter { a.labels[$0.label] == "four-leaf" }.count
        #expect(four > 0 && four < objects.count - four, "four-leaf \(four) of \(objects.count)")
        #expect(objects.allSatisfy { $0.box.width <= 19 && $0.box.height <= 19 && $0.box.width >= 10 })
    }

    /// Stride 8's map is the fine blocks' 40 channels and the deep blocks' 112 each repeated over 2×2 cells: 152
    /// channels on a 28×28 grid of a 224-pixel input.
    @Test(.enabled(if: installed, missing))
    func theStride8MapIsTheFineMapBesideTheDeepOneEnlarged() throws {
        let featurePrint = try FeaturePrint.load(directory: ONNXTransferExportTests.folder)
        let network = try ONNXExport.liteTensors(try ScriptModule(bytes: featurePrint.module))
        let kept = LiteBackbone.kept(network, blocks: 11)
        let pyramid = try LiteBackbone(tensors: kept, blocks: 11, fineBlocks: 5)
        #expect(pyramid.stride == 8 && pyramid.deepestStride == 16 && pyramid.channels == 152)
        try Torch.seed(5)
        let x = try Tensor.rand([1, 3, 224, 224]) * 2 + (-1)
        let map = try pyramid.module.forward(x)
        #expect(map.shape == [1, 152, 28, 28])
        let fine = try LiteBackbone(tensors: LiteBackbone.kept(network, blocks: 5), blocks: 5).module.forward(x)
            .floats()
        let deep = try LiteBackbone(tensors: kept, blocks: 11).module.forward(x).floats()
        let values = try map.floats()
        var worst: Float = 0
        for c in 0..<152 {
            for y in 0..<28 {
                for x in 0..<28 {
                    let expected = c < 40 ? fine[(c * 28 + y) * 28 + x] : deep[((c - 40) * 14 + y / 2) * 14 + x / 2]
                    worst = max(worst, abs(values[(c * 28 + y) * 28 + x] - expected))
                }
            }
        }
        #expect(worst < 1e-4, "largest difference \(worst)")
        #expect(throws: ClassificationError.invalid("the fine map's block (11) must come before the last (11)")) {
            try LiteBackbone(tensors: kept, blocks: 11, fineBlocks: 11)
        }
    }

    /// A few small scenes, a short training: enough to check the stride-8 detector's header, grid, save and load,
    /// and its ONNX graph in onnxruntime — not its accuracy (the figures are the benchmark's).
    static let trained: Result<(file: ModelFile, scenes: Dataset), Error> = Result {
        var scenes = CloverScenes(seed: 1)
        scenes.side = 224
        scenes.diameters = 12...18
        let dataset = try scenes.dataset(count: 6)
        try Torch.setThreads(2)
        var options = DetectorTrainingOptions()
        options.inputSize = 224
        options.epochs = 10
        options.batchSize = 3
        options.featureVariants = 2
        options.featureStride = 8
        options.validationFraction = 0
        let file = try DetectorTrainer.train(
            dataset, options: options, featurePrint: try FeaturePrint.load(directory: ONNXTransferExportTests.folder))
        return (file, dataset)
    }

    @Test(.enabled(if: installed, missing))
    func aStride8DetectorTrainsSavesAndDetectsOnItsFinerGrid() throws {
        let (file, scenes) = try Self.trained.get()
        #expect(file.header.transferDetector?.blocks == 11 && file.header.transferDetector?.fineBlocks == 5)
        let detector = try #require(try Detectors.load(ModelFile.decode(file.encoded())) as? TransferDetector)
        #expect(detector.cellSize == 8 && detector.grid == 28)
        let image = try RGBImage.decode(scenes.images[scenes.samples[0].hash]!)
        let found = try detector.detect(image, confidenceThreshold: 0.01)
        #expect(!found.isEmpty)
        #expect(
            found.allSatisfy {
                $0.box.minX >= 0 && $0.box.maxX <= Double(image.width) && $0.box.maxY <= Double(image.height)
            })
    }

    /// Exported, the stride-8 graph (Resize nearest and Concat before the head) gives the service's boxes in
    /// onnxruntime: 3 anchors × 28 × 28 rows.
    @Test(
        .enabled(if: installed, missing),
        .enabled(if: ONNXExportTests.onnxruntimeInstalled, ONNXExportTests.onnxruntimeMissing))
    func onnxruntimeFindsTheStride8DetectorsBoxes() throws {
        let (file, scenes) = try Self.trained.get()
        let service = try TransferDetector(file)
        let exported = try ONNXExport.export(file, name: "clovers")
        let photos = try scenes.samples.prefix(2).map { try RGBImage.decode(scenes.images[$0.hash]!) }
        let prepared = try photos.map { try Preprocessing.input($0, width: 224, height: 224, scaling: .fit) }
        let run = try ONNXExportTests.onnxruntime(exported, prepared.map { file.header.normalised($0.pixels) })
        let rows = 3 * 28 * 28
        #expect(run.output == [.string("boxes"), .int(1), .int(rows), .int(7)], "\(run.output)")
        try ONNXExportTests.expectTheServicesBoxes(
            service, on: photos, placed: prepared.map(\.placement), rows: run.probabilities, shape: [1, rows, 7],
            classes: 2, threshold: 0.01)
    }

    /// The figures: strides 8 and 16 on the same clover scenes, per label (`CLOVER_FIGURES=1`; minutes).
    @Test(
        .enabled(
            if: installed && ProcessInfo.processInfo.environment["CLOVER_FIGURES"] == "1",
            "set CLOVER_FIGURES=1 for the figures"))
    func strides8And16OnCloverScenes() throws {
        let environment = ProcessInfo.processInfo.environment
        let scenes = CloverScenes(seed: 11)
        let train = try scenes.dataset(count: Int(environment["CLOVER_TRAIN"] ?? "") ?? 60, prefix: "train")
        let test = try CloverScenes(seed: 12).dataset(
            count: Int(environment["CLOVER_TEST"] ?? "") ?? 20, prefix: "test")
        var options = DetectorTrainingOptions()
        options.inputSize = Int(environment["CLOVER_SIZE"] ?? "") ?? 224
        options.epochs = Int(environment["CLOVER_EPOCHS"] ?? "") ?? 150
        var runs: [(stride: Int, crops: Bool)] = [(8, false), (16, false)]
        if environment["CLOVER_CROPS"] == "1" { runs += [(8, true)] }
        if let only = environment["CLOVER_RUNS"] {
            // "8,8c,16": strides, c for the crop classifier.
            runs = only.split(separator: ",").compactMap { item in
                Int(item.filter(\.isNumber)).map { ($0, item.hasSuffix("c")) }
            }
        }
        let rows = try StrideComparison(options: options, runs: runs)
            .run(
                train: train, test: test, featurePrint: try FeaturePrint.load(directory: ONNXTransferExportTests.folder)
            )
        for line in StrideComparison.describe(rows, labels: CloverScenes.labels) { print(line) }
        // Other operating points: precision and recall per label at higher confidences ("0.4,0.55").
        for confidence in (environment["CLOVER_SWEEP"] ?? "").split(separator: ",").compactMap({ Double($0) }) {
            for row in rows {
                let evaluation = try DetectorEvaluation.run(
                    try Detectors.load(row.file), on: test, confidence: confidence)
                let perLabel = CloverScenes.labels.map { label in
                    let counts = evaluation.counts[label] ?? Metrics.MatchCounts()
                    return
                        "\(label) P \(String(format: "%.3f", counts.precision)) R \(String(format: "%.3f", counts.recall))"
                }
                print(
                    "stride \(row.stride)\(row.crops ? " + crop classifier" : "") at confidence \(confidence): "
                        + perLabel.joined(separator: "; "))
            }
        }
    }
}
