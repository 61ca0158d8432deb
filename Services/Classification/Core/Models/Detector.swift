import Base
import Foundation
import Torch

public struct DetectorTrainingOptions: Sendable, Codable, Equatable {
    /// On the 120 digit-detection scenes (digits 24–72 px in 400×300 photos) the test mAP50 rose from 0.27 to 0.52
    /// between 60 and 150 epochs with four stages, and from 0.64 to 0.84 with three (debug build, this machine).
    public var epochs = 150
    /// Side of the square (letterboxed) network input.
    public var inputSize = 160
    public var anchors = 3
    /// Three stages: a stride of 16, so a 160-pixel input is a 10×10 grid whose cells fit small objects; a fourth
    /// stage (a 5×5 grid) halved the test mAP50 at 60 epochs (0.27 against 0.54).
    public var widths = [16, 32, 64]
    public var seed: UInt64 = 0
    public var batchSize = 16
    public var learningRate = 0.003
    /// Photometric augmentation (exposure, noise, blur); geometric jitter is `jitter`, which moves the boxes too.
    public var augmentation = Augmentation.none
    /// Random zoom by up to this fraction and shift by up to this fraction of the side, with the boxes (0: off).
    /// From-scratch detectors on a hundred scenes need it to generalise.
    public var jitter = 0.3
    public var validationFraction = 0.1
    /// The box loss: 1 − GIoU of the predicted and true boxes (what AP measures) plus `giouScaleWeight` times the
    /// squared error of the log-sizes, or YOLOv2's squared errors of the offsets and log-sizes.
    public var boxLoss = BoxLoss.giou
    /// GIoU alone let boxes collapse to dots or swell to the frame in short trainings (16 scenes, 40 epochs: mAP50
    /// 0.003): its gradient for a box far smaller than its object is their area ratio. A little of the log-size
    /// error pulls sizes back at any scale without outweighing GIoU. Measured (16 scenes, 40 epochs / the full set,
    /// test mAP50 from scratch): weight 0 → 0.003 / 1.000; 0.03 → 0.950 / 0.989; 0.1 → 0.928 / 0.957; 1 → 0.768 / 0.882.
    public static let giouScaleWeight = 0.03
    /// An object also trains every other anchor whose shape overlaps its box by at least this IoU (besides the
    /// best one): more positives per object on a small set (1: the best anchor only, as YOLOv2).
    public var extraAnchorIoU = 0.5
    public var boxWeight = 5.0

    /// A transfer detector's feature map: EfficientNet-Lite0's stride-16 blocks (0–10, 112 channels) or all of its
    /// blocks (stride 32, 320 channels). See `TransferDetector.defaultFeatureStride` for the choice.
    public var featureStride = TransferDetector.defaultFeatureStride
    /// Augmented copies of each training scene whose feature maps a transfer detector trains its head on (the first
    /// as it is): the frozen backbone runs once per copy, not once per epoch.
    public var featureVariants = 8

    public enum BoxLoss: String, Sendable, Codable { case giou, squared }

    public init() {}
}

/// What the yolo-style heads share — their decoding, NMS and training loss (`DetectorTrainer.fit`): raw outputs
/// [N, anchors, grid, grid, 5 + classes] over a letterboxed square input, per cell and anchor a centre offset
/// (before the sigmoid), a log-scale of the anchor's size, an objectness logit and per-class logits.
protocol GridDetector: ObjectDetector {
    /// Anchor widths and heights in input pixels.
    var anchors: [[Double]] { get }
    /// Input pixels per grid cell.
    var cellSize: Int { get }
    /// Raw outputs for letterboxed inputs [N, 3, side, side] in [0, 1].
    func forward(_ x: Tensor, training: Bool) throws -> Tensor
}

extension GridDetector {
    var grid: Int { header.inputWidth / cellSize }
    var classes: Int { header.labels.count }

    /// Detections in input pixels for a batch of inputs.
    func decode(_ raw: [Float], batch: Int, threshold: Double) -> [[Detection]] {
        let a = anchors.count, g = grid, c = classes, stride = Double(cellSize)
        func sigmoid(_ v: Float) -> Double { 1 / (1 + Foundation.exp(-Double(v))) }
        var result: [[Detection]] = []
        for n in 0..<batch {
            var found: [Detection] = []
            for anchor in 0..<a {
                for gy in 0..<g {
                    for gx in 0..<g {
                        let base = ((((n * a + anchor) * g + gy) * g) + gx) * (5 + c)
                        let objectness = sigmoid(raw[base + 4])
                        if objectness < threshold { continue }
                        let scores = Metrics.softmax(Array(raw[(base + 5)..<(base + 5 + c)]))
                        let best = argmax(scores)
                        let confidence = objectness * Double(scores[best])
                        if confidence < threshold { continue }
                        let cx = (Double(gx) + sigmoid(raw[base])) * stride
                        let cy = (Double(gy) + sigmoid(raw[base + 1])) * stride
                        let w = anchors[anchor][0] * Foundation.exp(min(4, Double(raw[base + 2])))
                        let h = anchors[anchor][1] * Foundation.exp(min(4, Double(raw[base + 3])))
                        found.append(
                            Detection(
                                label: best, confidence: confidence,
                                box: Box(centerX: cx, centerY: cy, width: w, height: h)))
                    }
                }
            }
            result.append(found)
        }
        return result
    }

    /// Labelled boxes in the image's pixels (origin top-left), after the threshold, the label filter and NMS: each
    /// detector's `detect`.
    func gridDetections(
        _ image: RGBImage, confidenceThreshold: Double, iouThreshold: Double, maximum: Int,
        labels only: Set<String>
    ) throws -> [Detection] {
        let side = header.inputWidth
        let (input, placement) = try Preprocessing.input(image, width: side, height: side, scaling: .fit)
        let raw = try Torch.withoutGradients {
            try forward(Tensor(input, shape: [1, 3, side, side]), training: false).floats()
        }
        var found = decode(raw, batch: 1, threshold: confidenceThreshold)[0]
        if !only.isEmpty { found = found.filter { only.contains(header.labels[$0.label]) } }
        let kept = Metrics.nonMaximumSuppression(found, iouThreshold: iouThreshold, limit: maximum)
        return kept.map { i in
            var d = found[i]
            let box = placement.toSource(d.box)
            // Clip to the image.
            let x0 = max(0, box.minX), y0 = max(0, box.minY)
            let x1 = min(Double(image.width), box.maxX), y1 = min(Double(image.height), box.maxY)
            d.box = Box(x: x0, y: y0, width: max(0, x1 - x0), height: max(0, y1 - y0))
            return d
        }
    }

    /// Starts the objectness logits low, as YOLO's prior: most cells hold nothing.
    static func startObjectnessLow(_ parameters: Parameters, outputs: Int, classes: Int) throws {
        let stride = 5 + classes
        try parameters["detect.bias"].copy(
            from: Tensor((0..<outputs).map { $0 % stride == 4 ? -4 : 0 }, shape: [outputs]))
    }

    /// The detection layer's output [N, anchors·(5 + classes), g, g] as raw outputs [N, anchors, g, g, 5 + classes].
    func cells(_ out: Tensor) throws -> Tensor {
        let g = out.shape[2]
        return try out.reshaped([-1, anchors.count, 5 + classes, g, g]).permuted([0, 1, 3, 4, 2])
    }
}

/// A YOLOv2-style single-shot grid detector on the residual backbone, trained from scratch.
public final class Detector: GridDetector, @unchecked Sendable {
    public let header: ModelHeader
    let configuration: DetectorConfiguration
    let backbone: ResidualNetwork

    init(header: ModelHeader, configuration: DetectorConfiguration, seed: UInt64 = 0) throws {
        self.header = header
        self.configuration = configuration
        backbone = try ResidualNetwork(configuration.backbone, seed: seed)
        let outputs = configuration.anchors.count * (5 + header.labels.count)
        try Layers.conv(
            backbone.parameters, "detect", in: configuration.backbone.widths.last!, out: outputs, kernel: 1, bias: true)
        try Self.startObjectnessLow(backbone.parameters, outputs: outputs, classes: header.labels.count)
    }

    public convenience init(_ file: ModelFile) throws {
        guard file.header.kind == .detector, file.header.algorithm == "yolo", let configuration = file.header.detector
        else {
            throw ClassificationError.invalid("the model is not a yolo detector")
        }
        try self.init(header: file.header, configuration: configuration)
        try backbone.parameters.load(file.tensors)
    }

    var anchors: [[Double]] { configuration.anchors }
    var cellSize: Int { backbone.stride }

    /// Raw outputs [N, anchors, grid, grid, 5 + classes].
    func forward(_ x: Tensor, training: Bool) throws -> Tensor {
        let map = try backbone.featureMap(x, training: training)
        return try cells(try Layers.applyConv(backbone.parameters, "detect", map, padding: 0))
    }

    /// Labelled boxes in the image's pixels (origin top-left), after the threshold, the label filter and NMS.
    public func detect(
        _ image: RGBImage, confidenceThreshold: Double = 0.25, iouThreshold: Double = 0.45,
        maximum: Int = 100, labels only: Set<String> = []
    ) throws -> [Detection] {
        try gridDetections(
            image, confidenceThreshold: confidenceThreshold, iouThreshold: iouThreshold, maximum: maximum, labels: only)
    }
}

/// Detector evaluation as COCO computes it — per-class AP at IoU 0.5 (Create ML's "I/U 50 %") and averaged over
/// 0.5:0.95 (its "varied I/U"), and their means — and what a user of `Detect` gets at its confidence threshold:
/// per-class and overall precision, recall and F1, a box right when it overlaps an object of its label by IoU ≥ 0.5;
/// and per class the threshold to run it at for the most objects found with few wrong boxes (`operatingPoints`).
public struct DetectorEvaluation: Sendable, Equatable {
    public var ap50: [String: Double]
    public var ap50to95: [String: Double]
    public var map50: Double
    public var map50to95: Double
    /// At `confidence`, per label (every label of the model) and summed over labels.
    public var counts: [String: Metrics.MatchCounts] = [:]
    public var overall = Metrics.MatchCounts()
    public var confidence = DetectorEvaluation.defaultConfidence
    /// Per label, the confidence threshold with the best recall at precision ≥ `operatingPrecision` (IoU ≥ 0.5);
    /// absent for a label without objects or that no threshold makes that precise.
    public var operatingPoints: [String: Metrics.OperatingPoint] = [:]

    /// The threshold of `calibrationThresholds` at which the boxes have the best F1 at IoU 0.5, averaged over the
    /// labels with objects (the lowest of equals); nil without objects. Training stores it in the model
    /// (`calibratedConfidenceMetric`) and Detect uses it when the caller names none.
    public var calibratedConfidence: Double?

    /// The thresholds calibration chooses from: Detect's default and higher, never lower, so calibration only drops
    /// boxes, and only where the held-out images show that dropping them raises F1.
    public static let calibrationThresholds = stride(from: 0.25, through: 0.9, by: 0.05).map {
        ($0 * 100).rounded() / 100
    }

    /// The model metric holding the calibrated threshold.
    public static let calibratedConfidenceMetric = "detect_confidence"

    /// The threshold Detect and Evaluate use for `header`'s model when the caller names none: its calibrated one,
    /// else `defaultConfidence`.
    public static func confidence(for header: ModelHeader) -> Double {
        header.metrics[calibratedConfidenceMetric].flatMap { (0...1).contains($0) ? $0 : nil } ?? defaultConfidence
    }

    /// The precision an operating point keeps: issue 41's "recall ≥ 0.8 at precision ≥ 0.8" for four-leaf clovers.
    public static let operatingPrecision = 0.8

    /// `Detect`'s default threshold, so the figures describe the boxes a caller gets by default.
    public static let defaultConfidence = 0.25

    public static func run(
        _ detector: any ObjectDetector, on dataset: Dataset,
        confidence: Double = DetectorEvaluation.defaultConfidence
    ) throws -> DetectorEvaluation {
        guard dataset.kind == .detection else {
            throw ClassificationError.invalid("a detector is evaluated on a detection dataset")
        }
        let labels = detector.header.labels
        let index = Dictionary(uniqueKeysWithValues: labels.enumerated().map { ($1, $0) })
        var detections: [[(image: Int, detection: Detection)]] = Array(repeating: [], count: labels.count)
        var truth: [[(image: Int, box: Box)]] = Array(repeating: [], count: labels.count)
        for (i, sample) in dataset.samples.enumerated() {
            let image = try RGBImage.decode(dataset.images[sample.hash]!, name: sample.name)
            // COCO scores every detection down to a low threshold.
            for d in try detector.detect(image, confidenceThreshold: 0.001, iouThreshold: 0.45, maximum: 100) {
                detections[d.label].append((i, d))
            }
            for object in sample.objects {
                guard let label = index[dataset.labels[object.label]] else {
                    throw ClassificationError.invalid(
                        "the dataset's label \(dataset.labels[object.label]) is not one of the model's labels")
                }
                truth[label].append((i, object.box))
            }
        }
        var ap50: [String: Double] = [:], ap: [String: Double] = [:]
        var perClass: [[Double: Double]] = []
        for (c, label) in labels.enumerated() where !truth[c].isEmpty {
            var byThreshold: [Double: Double] = [:]
            for t in Metrics.cocoThresholds {
                byThreshold[t] = Metrics.averagePrecision(detections: detections[c], truth: truth[c], iouThreshold: t)
            }
            perClass.append(byThreshold)
            ap50[label] = byThreshold[0.5]
            ap[label] = byThreshold.values.reduce(0, +) / Double(byThreshold.count)
        }
        let map50 = ap50.isEmpty ? 0 : ap50.values.reduce(0, +) / Double(ap50.count)
        var evaluation = DetectorEvaluation(
            ap50: ap50, ap50to95: ap, map50: map50, map50to95: Metrics.meanAveragePrecision(perClass: perClass))
        evaluation.confidence = confidence
        let withObjects = labels.indices.filter { !truth[$0].isEmpty }
        if !withObjects.isEmpty {
            let f1 = { (threshold: Double) in
                withObjects.map { c in
                    Metrics.matchCounts(
                        detections: detections[c], truth: truth[c], confidence: threshold, iouThreshold: 0.5
                    ).f1
                }.reduce(0, +) / Double(withObjects.count)
            }
            let scored = calibrationThresholds.map { ($0, f1($0)) }
            evaluation.calibratedConfidence = scored.max { $0.1 < $1.1 || ($0.1 == $1.1 && $0.0 > $1.0) }?.0
        }
        for (c, label) in labels.enumerated() {
            let counts = Metrics.matchCounts(
                detections: detections[c], truth: truth[c], confidence: confidence, iouThreshold: 0.5)
            evaluation.counts[label] = counts
            evaluation.overall = evaluation.overall + counts
            evaluation.operatingPoints[label] = Metrics.operatingPoint(
                detections: detections[c], truth: truth[c], minimumPrecision: operatingPrecision, iouThreshold: 0.5)
        }
        return evaluation
    }
}

public enum DetectorTrainer {
    /// YOLOv2's anchors: k-means over (width, height) with 1 − IoU (boxes aligned at their centres) as distance,
    /// seeded; sorted by area.
    public static func anchors(_ sizes: [(Double, Double)], count k: Int, seed: UInt64) -> [[Double]] {
        guard !sizes.isEmpty else { return [] }
        var random = SeededRandom(seed: seed ^ 0xA1C4)
        var centres = (0..<min(k, sizes.count)).map { _ in sizes[Int(random.next() % UInt64(sizes.count))] }
        func iou(_ a: (Double, Double), _ b: (Double, Double)) -> Double {
            let inter = min(a.0, b.0) * min(a.1, b.1)
            return inter / (a.0 * a.1 + b.0 * b.1 - inter)
        }
        for _ in 0..<50 {
            var sums = [(Double, Double, Int)](repeating: (0, 0, 0), count: centres.count)
            for s in sizes {
                let nearest = centres.indices.max { iou(s, centres[$0]) < iou(s, centres[$1]) }!
                sums[nearest].0 += s.0
                sums[nearest].1 += s.1
                sums[nearest].2 += 1
            }
            for i in centres.indices where sums[i].2 > 0 {
                centres[i] = (sums[i].0 / Double(sums[i].2), sums[i].1 / Double(sums[i].2))
            }
        }
        return centres.sorted { $0.0 * $0.1 < $1.0 * $1.1 }.map { [$0.0, $0.1] }
    }

    /// Generalised IoU of boxes given as centres and sizes ([…, 2] each, the same units), elementwise: IoU minus
    /// the share of the smallest enclosing box that neither covers. 1 for the same box; towards −1 far apart.
    static func giou(centre: Tensor, size: Tensor, targetCentre: Tensor, targetSize: Tensor) throws -> Tensor {
        let half = try size * 0.5, targetHalf = try targetSize * 0.5
        let low = try centre - half, high = try centre + half
        let targetLow = try targetCentre - targetHalf, targetHigh = try targetCentre + targetHalf
        let overlap = try (try high.minimum(targetHigh) - low.maximum(targetLow)).clamped(min: 0)
        let enclosing = try high.maximum(targetHigh) - low.minimum(targetLow)
        func area(_ t: Tensor) throws -> Tensor {
            try t.narrowed(dim: -1, start: 0, length: 1) * t.narrowed(dim: -1, start: 1, length: 1)
        }
        let intersection = try area(overlap)
        let union = try (try (try area(size) + area(targetSize)) - intersection) + 1e-9
        let hull = try area(enclosing) + 1e-9
        return try (intersection / union) - ((try hull - union) / hull)
    }

    /// The summed box loss of the predictions under `mask` ([…, 1]). `raw` ([…, 4]) holds the centre offsets in
    /// their cell before the sigmoid and the log-scales of the anchor (`anchorCells`, sizes in cells); the targets
    /// are the centre offsets, the sizes in cells and the log-scales.
    static func boxLoss(
        _ kind: DetectorTrainingOptions.BoxLoss, raw: Tensor, anchorCells: Tensor, centre: Tensor, size: Tensor,
        logScale: Tensor, mask: Tensor, scaleWeight: Double = DetectorTrainingOptions.giouScaleWeight
    ) throws -> Tensor {
        let predictedCentre = try raw.narrowed(dim: -1, start: 0, length: 2).sigmoid()
        let predictedScale = try raw.narrowed(dim: -1, start: 2, length: 2)
        let scaleLoss = try ((try predictedScale - logScale).squared() * mask).sum()
        switch kind {
        case .squared:
            return try ((try predictedCentre - centre).squared() * mask).sum() + scaleLoss
        case .giou:
            let extent = try predictedScale.clamped(max: 4).exp() * anchorCells
            let loss =
                try giou(centre: predictedCentre, size: extent, targetCentre: centre, targetSize: size).negated() + 1
            // Plus a little of the squared error of the log-scales: GIoU's pull on a box far smaller than its object
            // is only their area ratio, so a box that shrinks early in a short training stays a dot.
            return try (loss * mask).sum() + (try scaleLoss * scaleWeight)
        }
    }

    struct Prepared {
        var input: [Float]
        var boxes: [Dataset.Object]  // in input pixels
    }

    /// Zooms and shifts an input and its boxes together; boxes mostly pushed out of the frame are dropped.
    static func jitter(_ sample: Prepared, side: Int, amount: Double, using random: inout SeededRandom) -> (
        [Float], [Dataset.Object]
    ) {
        guard amount > 0 else { return (sample.input, sample.boxes) }
        let scale = 1 + (Double(random.unit()) * 2 - 1) * amount
        let centre = Double(side) / 2
        let tx = centre * (1 - scale) + (Double(random.unit()) * 2 - 1) * amount * Double(side)
        let ty = centre * (1 - scale) + (Double(random.unit()) * 2 - 1) * amount * Double(side)
        var out = [Float](repeating: 0, count: sample.input.count)
        let plane = side * side
        for y in 0..<side {
            let sy = (Double(y) - ty) / scale
            let y0 = Int(sy.rounded(.down)), fy = Float(sy - Double(y0))
            for x in 0..<side {
                let sx = (Double(x) - tx) / scale
                let x0 = Int(sx.rounded(.down)), fx = Float(sx - Double(x0))
                guard x0 >= 0, y0 >= 0, x0 + 1 < side, y0 + 1 < side else { continue }
                for c in 0..<3 {
                    let base = c * plane
                    let top =
                        sample.input[base + y0 * side + x0] * (1 - fx) + sample.input[base + y0 * side + x0 + 1] * fx
                    let bottom =
                        sample.input[base + (y0 + 1) * side + x0] * (1 - fx) + sample.input[
                            base + (y0 + 1) * side + x0 + 1] * fx
                    out[base + y * side + x] = top * (1 - fy) + bottom * fy
                }
            }
        }
        var boxes: [Dataset.Object] = []
        for object in sample.boxes {
            let moved = Box(
                x: object.box.x * scale + tx, y: object.box.y * scale + ty, width: object.box.width * scale,
                height: object.box.height * scale)
            let x0 = max(0, moved.minX), y0 = max(0, moved.minY)
            let x1 = min(Double(side), moved.maxX), y1 = min(Double(side), moved.maxY)
            guard x1 > x0, y1 > y0, (x1 - x0) * (y1 - y0) >= 0.6 * moved.area else { continue }
            boxes.append(Dataset.Object(label: object.label, box: Box(x: x0, y: y0, width: x1 - x0, height: y1 - y0)))
        }
        return (out, boxes)
    }

    /// What a detector's base gives it.
    public enum Base {
        case classifier(ResidualNetworkConfiguration)
        case detector(DetectorConfiguration)
    }

    /// A detector's base must be a cnn classifier or a yolo detector trained here (`INVALID_ARGUMENT` otherwise): an
    /// imported model has no backbone of this network's shape to start from.
    @discardableResult
    public static func checkBase(_ header: ModelHeader) throws -> Base {
        switch (header.kind, header.algorithm, header.network, header.detector) {
        case (.classifier, "cnn", let network?, _): return .classifier(network)
        case (.detector, "yolo", _, let configuration?): return .detector(configuration)
        default:
            throw ClassificationError.invalid(
                "a detector's base model must be a cnn classifier or a yolo detector trained here (this one is a \(header.algorithm) \(header.kind.rawValue))"
            )
        }
    }

    /// Trains on `dataset` — all of it when a `validation` dataset is given, else all but a seeded
    /// `validationFraction` held out — and stores the mAP at IoU 0.5 and 0.5:0.95 on the validation images (the
    /// given dataset or the held-out scenes) in the model's metrics (`map50`, `map50_95`, `validation_images`), and
    /// the confidence Detect uses by default (`detect_confidence`: `DetectorEvaluation.calibratedConfidence`); with
    /// no validation images there are none.
    ///
    /// `base` (transfer learning) is a trained cnn classifier or yolo detector: the backbone takes its widths and
    /// starts from its trained layers (a yolo base's detection layer too when its labels are the same); the anchors
    /// come from the new boxes and every other layer starts afresh.
    ///
    /// `featurePrint` trains a `transfer` detector instead (`TransferDetector`): the pretrained network frozen as
    /// its backbone, only the head trained.
    public static func train(
        _ dataset: Dataset, validation: Dataset? = nil, options: DetectorTrainingOptions,
        base: ModelFile? = nil, featurePrint: FeaturePrint? = nil, cropClassifier cropFeaturePrint: FeaturePrint? = nil,
        progress: (TrainingProgress) throws -> Void = { _ in }
    ) throws -> ModelFile {
        guard dataset.kind == .detection else {
            throw ClassificationError.invalid("a detector trains on a detection dataset (annotations.json)")
        }
        if base != nil, featurePrint != nil {
            throw ClassificationError.invalid(
                "a transfer detector trains on the built-in feature print; a base model is for yolo")
        }
        var options = options
        var inherited: [NamedArray] = []
        if let base {
            switch try checkBase(base.header) {
            case .classifier(let network):
                options.widths = network.widths
                inherited = base.tensors.filter { !$0.name.hasPrefix("head.") }
            case .detector(let configuration):
                options.widths = configuration.backbone.widths
                inherited = base.tensors.filter {
                    !$0.name.hasPrefix("detect.") || base.header.labels == dataset.labels
                }
            }
        }
        if let validation {
            guard validation.kind == .detection else {
                throw ClassificationError.invalid(
                    "the validation dataset is a classification dataset; a detector validates on a detection one")
            }
            // Checked before training: an unknown label would only fail the evaluation after every epoch ran.
            for label in validation.labels where !dataset.labels.contains(label) {
                throw ClassificationError.invalid(
                    "the validation dataset's label \(label) is not one of the training dataset's labels (\(dataset.labels.joined(separator: ", ")))"
                )
            }
        }
        let started = ContinuousClock.now
        let side = options.inputSize
        var prepared: [Prepared] = []
        for sample in dataset.samples {
            let image = try RGBImage.decode(dataset.images[sample.hash]!, name: sample.name)
            let (input, placement) = try Preprocessing.input(image, width: side, height: side, scaling: .fit)
            prepared.append(
                Prepared(
                    input: input,
                    boxes: sample.objects.map { Dataset.Object(label: $0.label, box: placement.toInput($0.box)) }))
        }
        let split =
            validation != nil
            ? (training: Array(prepared.indices), validation: [Int]())
            : ClassifierTrainer.split(
                labels: Array(repeating: 0, count: prepared.count), fraction: options.validationFraction,
                seed: options.seed)
        let training = split.training.map { prepared[$0] }
        let anchors = Self.anchors(
            training.flatMap { $0.boxes.map { ($0.box.width, $0.box.height) } }, count: options.anchors,
            seed: options.seed)
        try Torch.seed(options.seed)
        var random = SeededRandom(seed: options.seed)

        var header: ModelHeader
        let detector: any GridDetector
        let stopped: (cause: any Error, epoch: Int)?
        let tensors: () throws -> [NamedArray]
        if let featurePrint {
            header = ModelHeader(
                kind: .detector, algorithm: "transfer", labels: dataset.labels, inputWidth: side, inputHeight: side)
            let transfer = try TransferDetector(
                header: header, featurePrint: featurePrint, featureStride: options.featureStride,
                anchors: anchors, seed: options.seed)
            header = transfer.header
            detector = transfer
            // The backbone is frozen, so each training scene's feature maps are taken once, for `featureVariants`
            // augmented copies (the first as it is), and the head trains on them: the network runs
            // scenes × variants times instead of scenes × epochs.
            let variants = max(1, options.featureVariants)
            var maps: [[Tensor]] = []
            var boxes: [[[Dataset.Object]]] = []
            for sample in training {
                var copies: [(input: [Float], boxes: [Dataset.Object])] = [(sample.input, sample.boxes)]
                for _ in 1..<variants {
                    let (jittered, moved) = jitter(sample, side: side, amount: options.jitter, using: &random)
                    copies.append(
                        (
                            options.augmentation.apply(
                                jittered, channels: 3, height: side, width: side, using: &random), moved
                        ))
                }
                let map = try transfer.featureMaps(copies.map(\.input))
                maps.append(try (0..<variants).map { try map.narrowed(dim: 0, start: $0, length: 1) })
                boxes.append(copies.map(\.boxes))
            }
            stopped = try fit(
                count: training.count, options: options, anchors: anchors, detector: transfer,
                trainable: transfer.head.trainable, random: &random, progress: progress
            ) { batch, random in
                let picks = batch.map { ($0, Int(random.next() % UInt64(variants))) }
                let out = try transfer.predict(try Tensor.cat(picks.map { maps[$0][$1] }, dim: 0))
                return (out, picks.map { boxes[$0][$1] })
            }
            tensors = { try transfer.tensors() }
        } else {
            let backbone = ResidualNetworkConfiguration(
                widths: options.widths, classes: 1, stemStride: 2, firstStageStride: 2)
            header = ModelHeader(
                kind: .detector, algorithm: "yolo", labels: dataset.labels, inputWidth: side, inputHeight: side)
            header.detector = DetectorConfiguration(backbone: backbone, anchors: anchors)
            let yolo = try Detector(header: header, configuration: header.detector!, seed: options.seed)
            guard side % yolo.backbone.stride == 0 else {
                throw ClassificationError.invalid(
                    "input size \(side) is not a multiple of the backbone's stride \(yolo.backbone.stride)")
            }
            detector = yolo
            // Layers whose names and shapes match (convolution weights do not depend on the input size or strides).
            if !inherited.isEmpty { _ = try yolo.backbone.parameters.loadMatching(inherited) }
            stopped = try fit(
                count: training.count, options: options, anchors: anchors, detector: yolo,
                trainable: yolo.backbone.parameters.trainable, random: &random, progress: progress
            ) { batch, random in
                var values: [Float] = []
                var boxes: [[Dataset.Object]] = []
                for i in batch {
                    let (jittered, moved) = jitter(training[i], side: side, amount: options.jitter, using: &random)
                    values += options.augmentation.apply(
                        jittered, channels: 3, height: side, width: side, using: &random)
                    boxes.append(moved)
                }
                return (try yolo.forward(Tensor(values, shape: [batch.count, 3, side, side]), training: true), boxes)
            }
            tensors = { try yolo.backbone.parameters.export() }
        }
        header.seed = options.seed
        // Boxes labelled by a transfer classifier of their crops, trained on the training scenes' boxes only (the
        // held-out scenes still measure the whole).
        var evaluated: any ObjectDetector = detector
        var cropClassifierBytes: [UInt8]?
        if let cropFeaturePrint, stopped == nil {
            var scenes = dataset
            scenes.samples = split.training.map { dataset.samples[$0] }
            let configuration = CropClassifierConfiguration()
            let classifier = try CropClassifier.train(
                scenes, featurePrint: cropFeaturePrint, seed: options.seed, configuration: configuration)
            evaluated = try ReclassifyingDetector(
                detector: detector, classifier: Classifier(classifier), configuration: configuration)
            cropClassifierBytes = try classifier.encoded()
            header.cropClassifier = configuration
            header.metrics["crop_classifier_images"] = classifier.header.metrics["training_images"]
        }
        header.trainingSeconds = (ContinuousClock.now - started).seconds
        header.metrics["training_images"] = Double(training.count)
        var held = validation
        if held == nil, !split.validation.isEmpty {
            var subset = dataset
            subset.samples = split.validation.map { dataset.samples[$0] }
            held = subset
        }
        if let held, !held.samples.isEmpty {
            let evaluation = try DetectorEvaluation.run(evaluated, on: held)
            header.metrics["map50"] = evaluation.map50
            header.metrics["map50_95"] = evaluation.map50to95
            header.metrics["validation_images"] = Double(held.samples.count)
            header.metrics[DetectorEvaluation.calibratedConfidenceMetric] = evaluation.calibratedConfidence
        }
        if let stopped {
            // No validation per epoch picks a best one: the last epoch's weights, measured as a finished model is.
            header.interrupted = "after epoch \(stopped.epoch)/\(options.epochs); kept its weights"
            throw TrainingInterrupted(cause: stopped.cause, partial: ModelFile(header: header, tensors: try tensors()))
        }
        return ModelFile(header: header, tensors: try tensors(), script: cropClassifierBytes)
    }

    /// The yolo training loop every grid detector shares: `options.epochs` over `count` training scenes in seeded
    /// batches, each batch's raw outputs and boxes (in input pixels) from `batch`, the boxes assigned to cells and
    /// anchors and the loss taken as YOLOv2 does (`loss`), AdamW on `trainable` with warm-up and cosine decay.
    /// Returns why and after which epoch it stopped when the progress callback threw (a cancel), else nil.
    static func fit(
        count: Int, options: DetectorTrainingOptions, anchors: [[Double]], detector: some GridDetector,
        trainable: [Tensor], random: inout SeededRandom, progress: (TrainingProgress) throws -> Void,
        batch: (_ indices: [Int], _ random: inout SeededRandom) throws -> (out: Tensor, boxes: [[Dataset.Object]])
    )
        throws -> (cause: any Error, epoch: Int)?
    {
        let optimizer = try Optimizer(
            .adamW, parameters: trainable, learningRate: options.learningRate, weightDecay: 5e-4)
        let batches = (count + options.batchSize - 1) / options.batchSize
        let steps = options.epochs * batches
        var step = 0
        for epoch in 1...max(1, options.epochs) {
            var order = Array(0..<count)
            order.shuffle(using: &random)
            var total = 0.0
            for start in stride(from: 0, to: order.count, by: options.batchSize) {
                let (out, boxes) = try batch(Array(order[start..<min(order.count, start + options.batchSize)]), &random)
                let progressShare = Double(step) / Double(max(1, steps))
                let warm = min(1, Double(step + 1) / Double(max(1, steps / 20)))
                try optimizer.setLearningRate(options.learningRate * warm * 0.5 * (1 + cos(.pi * progressShare)))
                let loss = try Self.loss(
                    out, boxes: boxes, anchors: anchors, cellSize: Double(detector.cellSize), options: options)
                try optimizer.zeroGradients()
                try loss.backward()
                try optimizer.step()
                step += 1
                total += Double(try loss.item())
            }
            do {
                try progress(
                    TrainingProgress(
                        epoch: epoch, epochs: options.epochs, loss: total / Double(max(1, batches)),
                        trainingAccuracy: 0, validationAccuracy: nil))
            } catch {
                return (error, epoch)
            }
        }
        return nil
    }

    /// YOLOv2's loss of raw outputs [n, anchors, g, g, 5 + classes] against each input's boxes (in input pixels):
    /// an object trains the cell holding its centre at its best anchor (and every other anchor overlapping its box
    /// by `extraAnchorIoU`) — box, objectness and class — and every other cell and anchor learns it holds nothing.
    /// Averaged over the objects.
    static func loss(
        _ out: Tensor, boxes objects: [[Dataset.Object]], anchors: [[Double]], cellSize: Double,
        options: DetectorTrainingOptions
    ) throws -> Tensor {
        let n = out.shape[0], a = anchors.count, g = out.shape[2], c = out.shape[4] - 5
        var objectness = [Float](repeating: 0, count: n * a * g * g)
        var weight = [Float](repeating: 1, count: n * a * g * g)
        var xy = [Float](repeating: 0, count: n * a * g * g * 2), wh = xy, size = xy
        var classTargets = [Float](repeating: 0, count: n * a * g * g * c)
        var positives = 0
        for (b, boxes) in objects.enumerated() {
            for object in boxes {
                let cx = object.box.x + object.box.width / 2, cy = object.box.y + object.box.height / 2
                let gx = min(g - 1, max(0, Int(cx / cellSize))), gy = min(g - 1, max(0, Int(cy / cellSize)))
                func overlap(_ k: Int) -> Double {
                    let inter = min(anchors[k][0], object.box.width) * min(anchors[k][1], object.box.height)
                    return inter / (anchors[k][0] * anchors[k][1] + object.box.area - inter)
                }
                let best = anchors.indices.max { overlap($0) < overlap($1) }!
                for k in anchors.indices where k == best || overlap(k) >= options.extraAnchorIoU {
                    let cell = ((b * a + k) * g + gy) * g + gx
                    // A cell and anchor already taken keeps its object unless this one is its best anchor.
                    if objectness[cell] != 0 && k != best { continue }
                    if objectness[cell] == 0 { positives += 1 }
                    objectness[cell] = 1
                    weight[cell] = 5
                    xy[cell * 2] = Float(cx / cellSize - Double(gx))
                    xy[cell * 2 + 1] = Float(cy / cellSize - Double(gy))
                    wh[cell * 2] = Float(Foundation.log(object.box.width / anchors[k][0]))
                    wh[cell * 2 + 1] = Float(Foundation.log(object.box.height / anchors[k][1]))
                    size[cell * 2] = Float(object.box.width / cellSize)
                    size[cell * 2 + 1] = Float(object.box.height / cellSize)
                    for j in 0..<c { classTargets[cell * c + j] = j == object.label ? 1 : 0 }
                }
            }
        }
        // The anchors' sizes in cells, broadcast over [n, anchors, g, g, 2].
        let anchorCells = try Tensor(
            anchors.flatMap { [Float($0[0] / cellSize), Float($0[1] / cellSize)] }, shape: [1, a, 1, 1, 2])
        let mask = try Tensor(objectness, shape: [n, a, g, g, 1])
        let count = Double(max(1, positives))
        let boxLoss = try Self.boxLoss(
            options.boxLoss, raw: out.narrowed(dim: 4, start: 0, length: 4), anchorCells: anchorCells,
            centre: Tensor(xy, shape: [n, a, g, g, 2]), size: Tensor(size, shape: [n, a, g, g, 2]),
            logScale: Tensor(wh, shape: [n, a, g, g, 2]), mask: mask)
        let objLoss = try out.narrowed(dim: 4, start: 4, length: 1).binaryCrossEntropyWithLogits(
            targets: mask, weight: Tensor(weight, shape: [n, a, g, g, 1]), summed: true)
        let clsLoss = try
            (try out.narrowed(dim: 4, start: 5, length: c).logSoftmax(dim: 4)
            * Tensor(classTargets, shape: [n, a, g, g, c])).sum().negated()
        return try (try (try boxLoss * options.boxWeight + objLoss) + clsLoss) * (1 / count)
    }
}
