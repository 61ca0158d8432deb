import ArgumentParser
import ClassificationAPI
import Foundation
import GatewayKit
import JobsAPI
import RPC
import Schema

/// `--algorithm` of `train`.
enum TrainingAlgorithm: String, CaseIterable, ExpressibleByArgument {
    case cnn, features, transfer, yolo
}

struct Train: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "train",
        abstract:
            "Train a classifier or detector on a dataset; follows the job with a progress bar and prints the model.",
        discussion: """
            Algorithms: transfer (a linear head on the built-in pretrained feature print, EfficientNet-Lite0 from \
            ImageNet, on images augmented by flips, crops and exposure; the classifier default for photos, over 64 \
            pixels, when compose has installed the feature print), cnn (a small residual network trained from \
            scratch, the default for small images such as the digits), features (HOG and colour histograms with a \
            linear model, trained in seconds), yolo (the detector, trained from scratch); with --kind detector, transfer \
            trains a yolo head on the frozen feature print (stride-16 features of a 224-pixel input). --fine-tune (transfer) also trains the feature \
            print's last block, after the head, for a few epochs. --base MODEL fine-tunes another model's \
            trained layers: a cnn classifier for a classifier; a cnn classifier or a yolo detector for a detector. The same --seed and data give the same model. --detach prints the job and \
            returns (gateway classify jobs watch ID). --json prints the job's TrainingResult ({"model": {the ModelSummary}}), \
            or with --detach the started Job.
            """)

    @Option(help: "The dataset to train on.") var dataset: String
    @Option(help: "What to train.") var kind = ModelKind.classifier
    @Option(
        help:
            "The learning algorithm (default: transfer for photos when the feature print is installed, else cnn; yolo for a detector)."
    ) var algorithm: TrainingAlgorithm?
    @Option(
        help:
            "Start from this model's layers (a cnn classifier; or a yolo detector, for a detector; default: none, from scratch)."
    ) var base: String?
    @Option(help: "The model's name (default DATASET-ALGORITHM-N).") var name: String?
    @Option(
        help:
            "Passes over the training images (default: cnn 30, features and transfer 300 full-batch steps of the head, yolo and transfer detectors 150)."
    ) var epochs: Int32?
    @Option(name: .customLong("batch-size"), help: "cnn: images per optimisation step (default 64).") var batchSize:
        Int32?
    @Option(
        help:
            "cnn: stop after this many epochs without a lower validation loss and keep the best epoch (default: run every epoch)."
    ) var patience: Int32?
    @Option(help: "Seed of the shuffles and initial weights: the same seed and data give the same model (default: 0).")
    var seed: UInt64?
    @Option(name: .customLong("image-size"), help: "Side of the square network input (default: the algorithm's).")
    var imageSize: Int32?
    @Option(
        name: .customLong("validation-dataset"),
        help: "Measure on this dataset instead of holding images out (default: hold out --validation-fraction).")
    var validationDataset: String?
    @Option(name: .customLong("validation-fraction"), help: "Held out per label (default 0.1).") var validationFraction:
        Double?
    @Option(
        help:
            "Augmentations, comma-separated: flip, crop, rotation, turns (right angles, for photos taken from above), blur, exposure, noise; or none (default: cnn crop,rotation; transfer flip,crop,exposure; others none)."
    ) var augment: String?
    @Flag(
        name: .customLong("fine-tune"),
        help:
            "transfer: after the head, also train the feature print's last block with it for a few epochs, keeping the epoch best on the held-out images (slower; implies --algorithm transfer; default: off, the network frozen)."
    ) var fineTune = false
    @Option(
        name: .customLong("crop-classifier"),
        help:
            "Detectors: label each box by a transfer classifier of its crop, trained on the training boxes (true or false; default false: each box costs a pass of the feature print). Such a detector does not export as ONNX."
    ) var cropClassifier: Bool?
    @Option(
        name: .customLong("feature-stride"),
        help:
            "Transfer detectors: the feature map's stride, 8, 16 or 32 (default 16; 8 for small objects, under about 24 pixels of the 224-pixel input)."
    ) var featureStride: Int32?
    @Flag(
        name: .customLong("include-feedback"),
        help: "Add the photos kept by `gateway classify feedback --consent` (their labels must be the dataset's).")
    var includeFeedback = false
    @Flag(help: "Print the job and return at once.") var detach = false
    @OptionGroup var global: GlobalOptions

    func request() throws -> ClassificationV1.TrainRequest {
        var request = ClassificationV1.TrainRequest()
        request.dataset = dataset
        request.kind = kind == .detector ? .detector : .classifier
        request.algorithm = algorithm?.rawValue ?? ""
        request.name = name ?? ""
        request.baseModel = base
        request.epochs = epochs
        request.seed = seed
        request.batchSize = batchSize
        request.patience = patience
        request.imageSize = imageSize
        request.validationDataset = validationDataset
        request.validationFraction = validationFraction
        if let augment {
            var a = ClassificationV1.Augmentation()
            for item in augment.split(separator: ",").map({ $0.trimmingCharacters(in: .whitespaces).lowercased() }) {
                switch item {
                case "none": break
                case "flip": a.flip = true
                case "crop": a.crop = 0.1
                case "rotation": a.rotation = 10
                case "blur": a.blur = true
                case "exposure": a.exposure = 0.2
                case "noise": a.noise = 0.03
                case "turns": a.turns = true
                default:
                    throw InvalidValue(
                        "--augment: unknown augmentation \(item) (flip, crop, rotation, turns, blur, exposure, noise or none)"
                    )
                }
            }
            request.augmentation = a
        }
        request.includeFeedback = includeFeedback
        request.fineTune = fineTune
        request.cropClassifier = cropClassifier
        request.featureStride = featureStride
        return request
    }

    func run() async throws {
        let request = try request()
        try await global.withClient(for: "classification", { $0 }) { rpc in
            let client = ClassificationV1.Classification.Client(wrapping: rpc)
            let job = try await client.train(request, options: global.callOptions)
            if detach {
                try global.render(
                    job, text: { print("started job \(job.id); follow it with: gateway classify jobs watch \(job.id)") }
                )
                return
            }
            let ended = try await followJob(
                job.id, with: JobsV1.Jobs.Client(wrapping: rpc), display: global.json ? nil : ProgressDisplay())
            guard let result = try ended.requireResult(), result.typeName == ClassificationV1.TrainingResult.protoName,
                let model = try ClassificationV1.TrainingResult(serializedBytes: result.value).model
            else {
                throw RPCError(.internalError, "training job \(job.id) ended without its model")
            }
            try global.render(ClassificationV1.TrainingResult(model: model), text: { print(modelText(model)) })
        }
    }
}

struct Evaluate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "evaluate",
        abstract:
            "Accuracy, per-class precision/recall/F1 and the confusion matrix (classifiers); precision/recall/F1 at the confidence threshold, AP at IoU 0.5 and 0.5:0.95 and each label's best recall at precision ≥ 0.8 (detectors).",
        discussion: """
            A detector's box is right when it overlaps an object of its label by IoU ≥ 0.5. AP50 is Create ML's \
            "I/U 50 %" and AP50:95 its "varied I/U". Per label, the confidence threshold with the best recall at \
            precision ≥ 0.8 is the one to detect at ("-": none is that precise). Evaluating on images the model \
            was trained on prints a warning on standard error (and in --json's "warnings").
            """)

    @Argument(help: "The model to evaluate.") var model: String
    @Argument(help: "A labelled dataset it was not trained on.") var dataset: String
    @Option(
        help:
            "Detectors: the confidence at which precision, recall and F1 are counted (default: as detect, the detector's own or 0.25)."
    )
    var confidence: Double?
    @OptionGroup var global: GlobalOptions

    func run() async throws {
        try await global.withClassification { client in
            var request = ClassificationV1.EvaluateRequest(model: model, dataset: dataset)
            request.confidence = confidence
            let r = try await client.evaluate(request, options: global.longCallOptions)
            for warning in r.warnings { writeStandardError("warning: \(warning)\n") }
            try global.render(
                r,
                text: {
                    if let map50 = r.map50 {
                        print(
                            String(
                                format:
                                    "%lld images: mAP50 (I/U 50%%) %.3f, mAP50:95 (varied I/U) %.3f; at confidence %.2f precision %.3f, recall %.3f, F1 %.3f",
                                r.images, map50, r.map5095 ?? 0, r.confidence ?? 0, r.precision ?? 0, r.recall ?? 0,
                                r.f1 ?? 0))
                        printTable(
                            ["LABEL", "PRECISION", "RECALL", "F1", "RIGHT", "WRONG", "MISSED", "AP50", "AP50:95"],
                            r.perClass.map {
                                [
                                    $0.label, String(format: "%.3f", $0.precision), String(format: "%.3f", $0.recall),
                                    String(format: "%.3f", $0.f1),
                                    String($0.truePositives), String($0.falsePositives), String($0.missed),
                                    $0.ap50.map { String(format: "%.3f", $0) } ?? "-",
                                    $0.ap5095.map { String(format: "%.3f", $0) } ?? "-",
                                ]
                            })
                        print(operatingPointTitle(r))
                        printTable(
                            ["LABEL", "CONFIDENCE", "PRECISION", "RECALL", "RIGHT", "WRONG", "MISSED"],
                            operatingPointRows(r))
                    } else {
                        print("\(r.images) images: accuracy \(percent(r.accuracy))")
                        printTable(
                            ["LABEL", "PRECISION", "RECALL", "F1"],
                            r.perClass.map {
                                [
                                    $0.label, String(format: "%.3f", $0.precision), String(format: "%.3f", $0.recall),
                                    String(format: "%.3f", $0.f1),
                                ]
                            })
                        print("confusion (rows: truth, columns: predicted \(r.labels.joined(separator: " ")))")
                        for row in r.confusion {
                            print("  \(row.label): \(row.predicted.map(String.init).joined(separator: " "))")
                        }
                    }
                })
        }
    }
}
