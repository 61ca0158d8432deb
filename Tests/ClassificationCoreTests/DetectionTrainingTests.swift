import Foundation
import Testing
import Torch

@testable import ClassificationCore

/// The YOLO-style detector on the real digit-detection set (120 training scenes, 40 test scenes, labels three and
/// four). The issue's goal (test mAP at IoU 0.5 ≥ 0.90) needs a long release-build training: the benchmark's job.
/// Here a short training must fit a small subset, which checks targets, loss, decoding and box mapping agree.
@Suite(.serialized, .enabled(if: RealData.enabled, RealData.skipMessage))
struct DetectionTrainingTests {
    static let folder = RealData.directory.appendingPathComponent("digit-detection")

    @Test func yoloFitsASmallSetOfScenes() throws {
        let all = try DatasetBuilder.detection(
            annotationsFile: Self.folder.appendingPathComponent("train-annotations.json"),
            imagesDirectory: Self.folder.appendingPathComponent("images"))
        #expect(all.labels == ["four", "three"] && all.samples.count == 120)
        var subset = all
        subset.samples = Array(
            all.samples.prefix(Int(ProcessInfo.processInfo.environment["DETECTION_IMAGES"] ?? "") ?? 16))
        try Torch.setThreads(Int(ProcessInfo.processInfo.environment["TORCH_THREADS"] ?? "") ?? 1)
        var options = DetectorTrainingOptions()
        options.epochs = Int(ProcessInfo.processInfo.environment["DETECTION_EPOCHS"] ?? "") ?? 40
        options.jitter = 0
        // The default box loss. 1 − GIoU alone fitted these scenes only to mAP50 0.003: its boxes shrank to dots or
        // swelled to the frame (see `DetectorTrainingOptions.boxLoss`).
        options.batchSize = 8
        options.validationFraction = 0
        let file = try DetectorTrainer.train(subset, options: options)
        let detector = try Detector(ModelFile.decode(file.encoded()))
        let fitted = try DetectorEvaluation.run(detector, on: subset)
        print(
            "digit-detection yolo, \(subset.samples.count) scenes, \(options.epochs) epochs: mAP50 on them \(String(format: "%.3f", fitted.map50)), mAP50-95 \(String(format: "%.3f", fitted.map50to95)), anchors \(file.header.detector!.anchors.map { $0.map { Int($0) } }), \(String(format: "%.1f", file.header.trainingSeconds ?? 0)) s"
        )
        #expect(fitted.map50 >= 0.8)
        // Boxes come back in the photo's pixels, inside it.
        let sample = subset.samples[0]
        let image = try RGBImage.decode(subset.images[sample.hash]!)
        for d in try detector.detect(image) {
            #expect(
                d.box.minX >= 0 && d.box.minY >= 0 && d.box.maxX <= Double(image.width)
                    && d.box.maxY <= Double(image.height))
        }
    }

    /// The model's stored mAP is measured on the validation images — the given dataset, else the held-out scenes —
    /// never on the scenes it trained on (it used to be, and a given validation dataset was ignored).
    @Test func storedMAPComesFromTheValidationImages() throws {
        let all = try DatasetBuilder.detection(
            annotationsFile: Self.folder.appendingPathComponent("train-annotations.json"),
            imagesDirectory: Self.folder.appendingPathComponent("images"))
        var training = all, validation = all
        training.samples = Array(all.samples.prefix(10))
        validation.samples = Array(all.samples.suffix(4))
        try Torch.setThreads(1)
        var options = DetectorTrainingOptions()
        options.epochs = 1
        options.jitter = 0
        options.batchSize = 8

        let given = try DetectorTrainer.train(training, validation: validation, options: options)
        let onGiven = try DetectorEvaluation.run(Detector(given), on: validation)
        #expect(given.header.metrics["validation_images"] == 4)
        #expect(abs((given.header.metrics["map50"] ?? -1) - onGiven.map50) < 1e-9)
        #expect(abs((given.header.metrics["map50_95"] ?? -1) - onGiven.map50to95) < 1e-9)

        options.validationFraction = 0.3
        let heldOut = try DetectorTrainer.train(training, options: options)
        var held = training
        held.samples = ClassifierTrainer.split(labels: Array(repeating: 0, count: 10), fraction: 0.3, seed: 0)
            .validation.map { training.samples[$0] }
        let onHeld = try DetectorEvaluation.run(Detector(heldOut), on: held)
        #expect(heldOut.header.metrics["validation_images"] == 3)
        #expect(abs((heldOut.header.metrics["map50"] ?? -1) - onHeld.map50) < 1e-9)

        options.validationFraction = 0
        #expect(try DetectorTrainer.train(training, options: options).header.metrics["map50"] == nil)

        // A validation set the detector cannot be scored on is refused before any epoch runs.
        var foreign = validation
        foreign.labels = ["four", "seven"]
        #expect(
            throws: ClassificationError.invalid(
                "the validation dataset's label seven is not one of the training dataset's labels (four, three)")
        ) {
            try DetectorTrainer.train(training, validation: foreign, options: options)
        }
    }

    /// Transfer learning: a detector starts from a cnn classifier's or a yolo detector's trained layers (a yolo's
    /// detection layer only when the labels are the same); any other base is refused.
    @Test func detectorsFineTuneFromACNNOrYOLOBase() throws {
        let all = try DatasetBuilder.detection(
            annotationsFile: Self.folder.appendingPathComponent("train-annotations.json"),
            imagesDirectory: Self.folder.appendingPathComponent("images"))
        var scenes = all
        scenes.samples = Array(all.samples.prefix(6))
        try Torch.setThreads(1)
        var options = DetectorTrainingOptions()
        options.epochs = 1
        options.jitter = 0
        options.validationFraction = 0
        // With no learning rate the weights stay where they started (batch norm's running statistics still move).
        options.learningRate = 0
        func weights(_ file: ModelFile, _ name: String) -> [Float]? { file.tensors.first { $0.name == name }?.values }

        let yolo = try DetectorTrainer.train(scenes, options: options)
        let fromYOLO = try DetectorTrainer.train(scenes, options: options, base: yolo)
        for name in ["stem.weight", "stage2.conv2.weight", "detect.weight"] {
            let same = weights(fromYOLO, name) != nil && weights(fromYOLO, name) == weights(yolo, name)
            #expect(same, "\(name)")
        }
        // Another seed, so a fresh layer could not equal the base's by starting from the same draw.
        var relabelled = scenes
        relabelled.labels = ["four", "three-leaf"]
        var reseeded = options
        reseeded.seed = 1
        let otherLabels = try DetectorTrainer.train(relabelled, options: reseeded, base: yolo)
        let sameBackbone = weights(otherLabels, "stage2.conv2.weight") == weights(yolo, "stage2.conv2.weight")
        #expect(sameBackbone)
        let freshHead = weights(otherLabels, "detect.weight") != weights(yolo, "detect.weight")
        #expect(freshHead, "a base with other labels gives no detection layer")

        var cnnOptions = ClassifierTrainingOptions()
        cnnOptions.epochs = 1
        cnnOptions.widths = [8, 16, 32]
        let classification = try DatasetBuilder.classification(
            files: ["a/1.png", "a/2.png", "b/1.png", "b/2.png"].enumerated().map { index, path in
                (
                    path,
                    TestPNG.encode(
                        TestPNG.solid(
                            width: 16, height: 16, colour: (UInt8(index * 60), 0, 0),
                            mark: index % 2 == 0 ? (4, 4) : nil))
                )
            })
        let cnn = try ClassifierTrainer.train(classification, options: cnnOptions)
        let fromCNN = try DetectorTrainer.train(scenes, options: options, base: cnn)
        #expect(fromCNN.header.detector?.backbone.widths == [8, 16, 32])
        let fromCNNLayers =
            weights(fromCNN, "stage2.conv1.weight") != nil
            && weights(fromCNN, "stage2.conv1.weight") == weights(cnn, "stage2.conv1.weight")
        #expect(fromCNNLayers)
        #expect(try Detector(fromCNN).detect(RGBImage.decode(scenes.images[scenes.samples[0].hash]!)).count >= 0)

        var featuresOptions = ClassifierTrainingOptions()
        featuresOptions.algorithm = .features
        let features = try ClassifierTrainer.train(classification, options: featuresOptions)
        #expect(throws: ClassificationError.self) {
            try DetectorTrainer.train(scenes, options: options, base: features)
        }
    }

    @Test func anchorsComeFromKMeansOverTheBoxes() {
        let sizes: [(Double, Double)] = [(10, 10), (11, 11), (9, 9), (40, 20), (42, 21), (38, 19)]
        let anchors = DetectorTrainer.anchors(sizes, count: 2, seed: 1)
        #expect(anchors.count == 2)
        #expect(abs(anchors[0][0] - 10) < 1e-9 && abs(anchors[1][0] - 40) < 1e-9 && abs(anchors[1][1] - 20) < 1e-9)
    }
}
