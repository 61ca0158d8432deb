import Base
import Foundation
import Torch

/// How a detector's boxes are labelled by a classifier of their crops (`ReclassifyingDetector`), stored in its header.
public struct CropClassifierConfiguration: Sendable, Codable, Equatable {
    /// Context kept around a box on each side, as a fraction of its larger side: a clover's or a digit's outline is
    /// what tells it apart, and a box a few pixels short must not cut it off.
    public var padding: Double
    /// Boxes the detector finds with less confidence than this are classified only while fewer than
    /// `lowConfidenceCrops` are: each crop costs a pass of the feature print, and evaluation asks for every box down
    /// to 0.001 (its AP then counts no more of them per scene).
    public var minimumConfidence: Double
    public var lowConfidenceCrops: Int

    public init(
        padding: Double = CropClassifier.defaultPadding,
        minimumConfidence: Double = CropClassifier.defaultMinimumConfidence,
        lowConfidenceCrops: Int = CropClassifier.defaultLowConfidenceCrops
    ) {
        self.padding = padding
        self.minimumConfidence = minimumConfidence
        self.lowConfidenceCrops = lowConfidenceCrops
    }
}

/// A detector's boxes labelled by a transfer classifier of their crops (issue 41, "crops re-classified by the
/// transfer classifier"): the detector says where objects are, the classifier — the feature print at its own 224 px
/// on the crop alone, trained on the training scenes' boxes — says which label each is. A grid detector's class
/// scores come from a coarse cell of a whole scene; a small object's crop, seen at full input size, keeps the fine
/// detail (three leaves or four) that those cells lose.
public enum CropClassifier {
    public static let defaultPadding = 0.15
    public static let defaultMinimumConfidence = 0.05
    public static let defaultLowConfidenceCrops = 20

    /// The square region around `box` with `padding` of its larger side on each side, clipped to the image: square,
    /// so that the classifier's letterbox keeps the object's shape with even context around it.
    public static func crop(_ image: RGBImage, box: Box, padding: Double) -> RGBImage? {
        let side = max(box.width, box.height) * (1 + 2 * padding)
        let cx = box.x + box.width / 2, cy = box.y + box.height / 2
        let x0 = max(0, Int((cx - side / 2).rounded())), y0 = max(0, Int((cy - side / 2).rounded()))
        let x1 = min(image.width, Int((cx + side / 2).rounded())),
            y1 = min(image.height, Int((cy + side / 2).rounded()))
        guard x1 - x0 >= 2, y1 - y0 >= 2 else { return nil }
        return image.cropped(x: x0, y: y0, width: x1 - x0, height: y1 - y0)
    }

    /// Every box of a detection dataset cropped and scaled to a `width`×`height` input, labelled with its object's
    /// label; `group` the scene each crop comes from.
    static func inputs(_ dataset: Dataset, width: Int, height: Int, padding: Double) throws -> (
        inputs: LabelledInputs, scene: [Int]
    ) {
        var inputs: [[Float]] = [], labels: [Int] = [], scenes: [Int] = []
        for (index, sample) in dataset.samples.enumerated() {
            let image = try RGBImage.decode(dataset.images[sample.hash]!, name: sample.name)
            for object in sample.objects {
                guard let crop = crop(image, box: object.box, padding: padding) else { continue }
                inputs.append(try Preprocessing.input(crop, width: width, height: height, scaling: .fit).pixels)
                labels.append(object.label)
                scenes.append(index)
            }
        }
        return (LabelledInputs(inputs: inputs, labels: labels, width: width, height: height), scenes)
    }

    /// A transfer classifier of the training scenes' box crops (the feature print frozen, a linear head, the transfer
    /// classifier's augmentation and class balancing), its labels the dataset's.
    public static func train(
        _ dataset: Dataset, featurePrint: FeaturePrint, seed: UInt64,
        configuration: CropClassifierConfiguration = .init()
    ) throws -> ModelFile {
        guard dataset.kind == .detection else {
            throw ClassificationError.invalid("crops are taken from a detection dataset")
        }
        let base = featurePrint.base
        let (training, _) = try inputs(
            dataset, width: base.header.inputWidth, height: base.header.inputHeight, padding: configuration.padding)
        let present = Set(training.labels)
        guard present.count >= 2 else {
            throw ClassificationError.invalid(
                "classifying a detector's crops needs boxes of at least two labels (the scenes have \(present.count))")
        }
        var options = ClassifierTrainingOptions()
        options.algorithm = .transfer
        options.seed = seed
        try Torch.seed(seed)
        var file = try ClassifierTrainer.trainScriptHead(
            training, nil, labels: dataset.labels, base: base, options: options
        ) { _ in }
        file.header.algorithm = "transfer"
        file.header.seed = seed
        file.header.metrics["training_images"] = Double(training.inputs.count)
        return file
    }
}

/// A detector whose boxes are labelled by a classifier of their crops (`CropClassifier`). The detector's own label
/// is ignored: its boxes are kept when their confidence reaches the threshold and are labelled with the
/// classifier's most probable label; a box's confidence is the detector's times that label's probability, and
/// boxes are suppressed per label after relabelling (two boxes the detector gave different labels may now share one).
public final class ReclassifyingDetector: ObjectDetector, @unchecked Sendable {
    public let header: ModelHeader
    let detector: any ObjectDetector
    let classifier: Classifier
    let configuration: CropClassifierConfiguration

    public init(detector: any ObjectDetector, classifier: Classifier, configuration: CropClassifierConfiguration) throws
    {
        guard classifier.header.labels == detector.header.labels else {
            throw ClassificationError.invalid(
                "the crop classifier's labels (\(classifier.header.labels.joined(separator: ", "))) are not the detector's (\(detector.header.labels.joined(separator: ", ")))"
            )
        }
        self.detector = detector
        self.classifier = classifier
        self.configuration = configuration
        var header = detector.header
        header.cropClassifier = configuration
        self.header = header
    }

    public func detect(
        _ image: RGBImage, confidenceThreshold: Double, iouThreshold: Double, maximum: Int,
        labels only: Set<String>
    ) throws -> [Detection] {
        // Every box the detector finds, whatever its label; NMS again once the crops have labelled them.
        let found = try detector.detect(
            image, confidenceThreshold: confidenceThreshold, iouThreshold: iouThreshold,
            maximum: max(maximum, 100), labels: []
        )
        .sorted { $0.confidence > $1.confidence }
        var boxes: [Detection] = [], inputs: [[Float]] = []
        for (rank, d) in found.enumerated()
        where d.confidence >= configuration.minimumConfidence || rank < configuration.lowConfidenceCrops {
            guard let crop = CropClassifier.crop(image, box: d.box, padding: configuration.padding) else { continue }
            inputs.append(
                try Preprocessing.input(
                    crop, width: classifier.header.inputWidth, height: classifier.header.inputHeight, scaling: .fit
                ).pixels)
            boxes.append(d)
        }
        guard !inputs.isEmpty else { return [] }
        let probabilities = try classifier.probabilities(inputs)
        var relabelled: [Detection] = []
        for (d, p) in zip(boxes, probabilities) {
            let best = argmax(p)
            let confidence = d.confidence * Double(p[best])
            guard confidence >= confidenceThreshold else { continue }
            if !only.isEmpty, !only.contains(header.labels[best]) { continue }
            relabelled.append(Detection(label: best, confidence: confidence, box: d.box))
        }
        return Metrics.nonMaximumSuppression(relabelled, iouThreshold: iouThreshold, limit: maximum).map {
            relabelled[$0]
        }
    }
}
