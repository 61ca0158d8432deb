import Foundation
import Testing
import Torch

@testable import ClassificationCore

/// Issue 41, "four-leaf clovers among three-leaf ones": a detector's boxes labelled by a transfer classifier of their
/// crops (`ReclassifyingDetector`), trained on digit-detection's 120 training scenes and measured on its 40 test
/// scenes — per label, precision and recall at Detect's confidence (0.25) and AP50, a box right when it overlaps an
/// object of its label by IoU > 0.5, as the clover seed reports it. The issue's goal per label: recall ≥ 0.8 at
/// precision ≥ 0.8.
@Suite(.serialized, .enabled(if: RealData.enabled, RealData.skipMessage))
struct CropReclassificationTests {
    static let installed = ONNXTransferExportTests.installed
    static let missing = ONNXTransferExportTests.missing
    static let environment = ProcessInfo.processInfo.environment
    /// The whole measurement trains for 30 minutes in a debug build on 2 busy cores: asked for by name.
    static let figures = environment["CROP_FIGURES"] == "1"
    static let figuresSkipped: Comment =
        "skipped: trains for about 30 minutes (debug); CROP_FIGURES=1 runs it (figures in Services/Classification/README.md)"

    static func scenes(_ file: String) throws -> Dataset {
        let folder = DetectionTrainingTests.folder
        return try DatasetBuilder.detection(
            annotationsFile: folder.appendingPathComponent(file),
            imagesDirectory: folder.appendingPathComponent("images"))
    }

    static func report(_ name: String, _ e: DetectorEvaluation) -> String {
        let labels = e.counts.keys.sorted().map { label in
            let c = e.counts[label]!
            return
                "\(label) P \(String(format: "%.3f", c.precision)) R \(String(format: "%.3f", c.recall)) AP50 \(String(format: "%.3f", e.ap50[label] ?? 0))"
        }
        return "\(name): mAP50 \(String(format: "%.3f", e.map50)); " + labels.joined(separator: "; ")
    }

    static func expectTheGoal(_ e: DetectorEvaluation, _ name: String) {
        for (label, counts) in e.counts {
            #expect(
                counts.precision >= 0.8 && counts.recall >= 0.8,
                "\(name) \(label): precision \(counts.precision), recall \(counts.recall)")
        }
    }

    /// Trains `algorithm` ("yolo" or "transfer") with a crop classifier on the training scenes; evaluates it, and the
    /// same detector without its crop classifier, on the test scenes.
    static func measure(_ algorithm: String) throws -> (
        plain: DetectorEvaluation, reclassified: DetectorEvaluation, file: ModelFile
    ) {
        let featurePrint = try FeaturePrint.load(directory: ONNXTransferExportTests.folder)
        try Torch.setThreads(Int(environment["TORCH_THREADS"] ?? "") ?? 2)
        var training = try scenes("train-annotations.json")
        training.samples = Array(training.samples.prefix(Int(environment["CROP_SCENES"] ?? "") ?? 120))
        let test = try scenes("test-annotations.json")
        var options = DetectorTrainingOptions()
        options.epochs = Int(environment["CROP_EPOCHS"] ?? "") ?? 150
        if algorithm == "transfer" { options.inputSize = 224 }
        let file = try DetectorTrainer.train(
            training, options: options, featurePrint: algorithm == "transfer" ? featurePrint : nil,
            cropClassifier: featurePrint)
        let loaded = try #require(try Detectors.load(ModelFile.decode(file.encoded())) as? ReclassifyingDetector)
        let plain = try DetectorEvaluation.run(loaded.detector, on: test)
        let reclassified = try DetectorEvaluation.run(loaded, on: test)
        print(report("digit-detection \(algorithm), \(options.epochs) epochs, test", plain))
        print(report("digit-detection \(algorithm) + crop classifier, test", reclassified))
        return (plain, reclassified, file)
    }

    /// Measured (debug, seed 0): yolo alone four P 0.981 R 1.000 AP50 1.000, three P 0.947 R 0.973 AP50 0.979; with the
    /// crop classifier four 0.962 / 1.000 / 0.991, three 0.973 / 0.973 / 0.997 (mAP50 0.989 → 0.994).
    @Test(.enabled(if: installed, missing), .enabled(if: figures, figuresSkipped))
    func yoloWithACropClassifierReachesTheGoalPerLabel() throws {
        let (plain, reclassified, file) = try Self.measure("yolo")
        #expect(file.header.cropClassifier != nil && file.header.metrics["crop_classifier_images"] ?? 0 > 0)
        Self.expectTheGoal(reclassified, "yolo + crops")
        #expect(reclassified.map50 >= plain.map50 - 0.02, "\(reclassified.map50) against \(plain.map50)")
    }

    @Test(.enabled(if: installed, missing), .enabled(if: figures, figuresSkipped))
    func transferWithACropClassifierReachesTheGoalPerLabel() throws {
        let (_, reclassified, _) = try Self.measure("transfer")
        Self.expectTheGoal(reclassified, "transfer + crops")
    }

    /// A detector with a crop classifier is written as format version 3 (an older build would answer with the
    /// detector's own labels without a word) and is not exported as one ONNX graph.
    @Test(.enabled(if: installed, missing))
    func aReclassifyingDetectorIsVersion3AndNotExportedAsONNX() throws {
        let featurePrint = try FeaturePrint.load(directory: ONNXTransferExportTests.folder)
        var training = try Self.scenes("train-annotations.json")
        training.samples = Array(training.samples.prefix(6))
        var options = DetectorTrainingOptions()
        options.epochs = 1
        options.validationFraction = 0
        let file = try DetectorTrainer.train(training, options: options, cropClassifier: featurePrint)
        let bytes = try file.encoded()
        #expect(bytes[16] == 3)
        let loaded = try #require(try Detectors.load(ModelFile.decode(bytes)) as? ReclassifyingDetector)
        #expect(loaded.header.labels == ["four", "three"] && loaded.detector is Detector)
        #expect(throws: ClassificationError.self) { try ONNXExport.export(file, name: "crops") }
        var plain = file
        plain.header.cropClassifier = nil
        plain.script = nil
        #expect(try plain.encoded()[16] == 1)
    }
}
