import ClassificationCore
import Foundation
import Torch

/// Issue 26's detectors on the pretrained backbone beside the from-scratch one: on digit-detection
/// (`train-annotations.json` → `test-annotations.json`) a `yolo` detector and `transfer` detectors (the feature print
/// frozen up to each stride asked for, a yolo head trained on it), the same epochs and seed, each with its training
/// seconds (the feature maps' extraction included) and mAP50 and mAP50:95 on the test scenes as `evaluate` prints them.
struct DetectorBenchmark {
    /// The detection set's training and test scenes (train-annotations.json, test-annotations.json, images/), the
    /// training ones cut to the first `limit` when given.
    static func scenes(_ folder: URL, trainingAtMost limit: Int?) throws -> (train: Dataset, test: Dataset) {
        let images = folder.appendingPathComponent("images")
        var train = try DatasetBuilder.detection(
            annotationsFile: folder.appendingPathComponent("train-annotations.json"), imagesDirectory: images)
        let test = try DatasetBuilder.detection(
            annotationsFile: folder.appendingPathComponent("test-annotations.json"), imagesDirectory: images)
        if let limit { train.samples = Array(train.samples.prefix(limit)) }
        return (train, test)
    }

    /// Epochs of every detector (nil: the default, 150).
    var epochs: Int?
    /// At most this many training scenes (nil: all 120).
    var detectionImages: Int?
    /// The transfer detectors' feature strides.
    var featureStrides: [Int]
    let cores = ProcessInfo.processInfo.activeProcessorCount

    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    /// The feature print compose installs (or MENAGERIE_FEATURE_PRINT).
    static let featurePrintFolder =
        ProcessInfo.processInfo.environment["MENAGERIE_FEATURE_PRINT"]
        ?? root.appendingPathComponent("compose/.cache/feature-print").path

    func run() async throws {
        let scenes = ClassificationBenchmark.datasets.appendingPathComponent("digit-detection")
        guard FileManager.default.fileExists(atPath: scenes.path) else {
            print("Detector benchmark skipped: \(scenes.path) is missing")
            return
        }
        let featurePrint: FeaturePrint
        do { featurePrint = try FeaturePrint.load(directory: Self.featurePrintFolder) } catch {
            print("Detector benchmark skipped: \(error)")
            return
        }
        try Torch.setThreads(cores)
        let (train, test) = try Self.scenes(scenes, trainingAtMost: detectionImages)
        var options = DetectorTrainingOptions()
        if let epochs { options.epochs = epochs }
        print(
            "Detector benchmark: \(cores) cores, libtorch on \(Torch.threads) threads, \(options.epochs) epochs, seed 0, "
                + "\(train.samples.count) training scenes → \(test.samples.count) test scenes")
        var runs: [(String, DetectorTrainingOptions, FeaturePrint?)] = [("yolo (from scratch, 160 px)", options, nil)]
        for stride in featureStrides {
            var transfer = options
            transfer.inputSize = featurePrint.manifest.inputWidth
            transfer.featureStride = stride
            runs.append(
                ("transfer (EfficientNet-Lite0 stride \(stride), \(transfer.inputSize) px)", transfer, featurePrint))
        }
        var rows: [[String]] = []
        for (name, options, print) in runs {
            let started = ContinuousClock.now
            let file = try DetectorTrainer.train(train, options: options, featurePrint: print)
            let seconds = (ContinuousClock.now - started).seconds
            let detector = try Detectors.load(file)
            let evaluated = ContinuousClock.now
            let detection = try DetectorEvaluation.run(detector, on: test)
            let perImage = (ContinuousClock.now - evaluated).seconds / Double(test.samples.count) * 1000
            rows.append([
                name, String(format: "%.1f", seconds), String(format: "%.3f", detection.map50),
                String(format: "%.3f", detection.map50to95),
                String(format: "%.2f", detection.overall.precision), String(format: "%.2f", detection.overall.recall),
                String(format: "%.0f", perImage),
            ])
            Swift.print(
                "  \(name): \(String(format: "%.1f", seconds)) s, mAP50 \(String(format: "%.3f", detection.map50)), mAP50:95 \(String(format: "%.3f", detection.map50to95))"
            )
        }
        printTable(
            [
                "detector", "training s", "test mAP50", "test mAP50:95", "precision@0.25", "recall@0.25",
                "evaluate ms/scene",
            ], rows)
    }
}
