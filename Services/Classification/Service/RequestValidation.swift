import ClassificationAPI
import ClassificationCore
import Foundation
import RPC
import Schema

/// Checks of requests before any work: INVALID_ARGUMENT naming the field, so nothing half-done follows a bad request.
enum RequestValidation {
    /// A name that may be left empty (nil), checked as `name` when given.
    static func optionalName(_ value: String, field: String) throws -> String? {
        value.isEmpty ? nil : try name(value, field: field)
    }

    static func name(_ value: String, field: String) throws -> String {
        guard !value.isEmpty else { throw RPCError(.invalidArgument, "\(field): empty") }
        guard value.utf8.count <= 400, value.unicodeScalars.count <= 100, !value.contains("/"),
            value.trimmingCharacters(in: .whitespacesAndNewlines) == value,
            !value.unicodeScalars.contains(where: { $0.properties.generalCategory == .control })
        else {
            throw RPCError(
                .invalidArgument,
                "\(field): \"\(value.prefix(100))\" must be 1–100 characters without slashes, control characters or outer spaces"
            )
        }
        return value
    }

    struct Training: Sendable {
        var dataset: String
        var kind: ModelHeader.Kind
        var algorithm: String
        var name: String?
        var base: String?
        var epochs: Int?
        var validationDataset: String?
        var validationFraction: Double?
        /// nil: the algorithm's default.
        var augmentation: ClassificationCore.Augmentation?
        var imageSize: Int?
        var seed: UInt64
        var includeFeedback = false
        var batchSize: Int?
        var patience: Int?
        var fineTune = false
        /// Detectors: a transfer classifier of the boxes' crops labels them (nil: when the feature print is installed).
        var cropClassifier: Bool?
        /// Transfer detectors: the feature map's stride (nil: `TransferDetector.defaultFeatureStride`).
        var featureStride: Int?

        /// The classifier algorithm (validated: cnn, features or transfer; empty: chosen from the dataset by the job).
        var classifierAlgorithm: ClassifierAlgorithm { ClassifierAlgorithm(rawValue: algorithm) ?? .cnn }
    }

    static func train(_ request: ClassificationV1.TrainRequest) throws -> Training {
        let dataset = try name(request.dataset, field: "dataset")
        let kind: ModelHeader.Kind
        switch request.kind {
        case .classifier, .unspecified: kind = .classifier
        case .detector: kind = .detector
        case .unrecognized(let value): throw RPCError(.invalidArgument, "kind: \(value) is not a model kind")
        }
        // A classifier without one gets transfer or cnn by its dataset's images (`ClassifierAlgorithm.automatic`).
        // fine_tune says transfer by itself: only transfer has a pretrained network to tune.
        let algorithm =
            request.algorithm.isEmpty
            ? (kind == .classifier ? (request.fineTune ? "transfer" : "") : "yolo") : request.algorithm.lowercased()
        if request.fineTune, kind == .detector {
            throw RPCError(
                .invalidArgument,
                "fine_tune: only a transfer classifier fine-tunes (the last block of its pretrained feature print); a yolo detector trains every layer from the start and a transfer detector trains its head on the frozen feature print — leave --fine-tune out"
            )
        }
        if request.fineTune, algorithm != "transfer" {
            throw RPCError(
                .invalidArgument,
                "fine_tune: only a transfer classifier fine-tunes (the last block of its pretrained feature print); \(algorithm) trains every layer from the start — give --algorithm transfer, or leave --fine-tune out"
            )
        }
        if request.cropClassifier != nil, kind == .classifier {
            throw RPCError(
                .invalidArgument,
                "crop_classifier: only a detector's boxes are classified by their crops; a classifier classifies the whole image — leave --crop-classifier out"
            )
        }
        if let stride = request.featureStride {
            guard kind == .detector, algorithm == "transfer" else {
                throw RPCError(
                    .invalidArgument,
                    "feature_stride: only a transfer detector reads a feature map of the feature print at a chosen stride — give --kind detector --algorithm transfer, or leave --feature-stride out"
                )
            }
            guard TransferDetector.featureStrides.contains(Int(stride)) else {
                throw RPCError(
                    .invalidArgument,
                    "feature_stride must be \(TransferDetector.featureStrides.map(String.init).joined(separator: ", ")) (got \(stride))"
                )
            }
        }
        let allowed = kind == .classifier ? ["cnn", "features", "transfer"] : ["yolo", "transfer"]
        guard algorithm.isEmpty || allowed.contains(algorithm) else {
            throw RPCError(
                .invalidArgument,
                "algorithm: \(request.algorithm) does not train a \(kind.rawValue) (use \(allowed.joined(separator: " or ")))"
            )
        }
        if algorithm == "transfer", request.baseModel != nil {
            throw RPCError(
                .invalidArgument,
                kind == .detector
                    ? "base_model: a transfer detector trains on the built-in feature print; a base model is for yolo"
                    : "base_model: transfer trains on the built-in feature print; a base model is for cnn (or an imported TorchScript model, with any algorithm)"
            )
        }
        if let size = request.batchSize, !(1...4096).contains(size) {
            throw RPCError(.invalidArgument, "batch_size must be 1…4096 (got \(size))")
        }
        if request.batchSize != nil, algorithm != "cnn" {
            throw RPCError(
                .invalidArgument,
                "batch_size: only the cnn trains in batches here (give --algorithm cnn); features and transfer fit their head on every image at once"
            )
        }
        if let patience = request.patience {
            guard (1...1000).contains(patience) else {
                throw RPCError(.invalidArgument, "patience must be 1…1000 (got \(patience))")
            }
            guard algorithm == "cnn" else {
                throw RPCError(.invalidArgument, "patience: early stopping applies to the cnn (give --algorithm cnn)")
            }
            if request.validationFraction == 0 && request.validationDataset == nil {
                throw RPCError(
                    .invalidArgument,
                    "patience: early stopping needs validation images (a validation_fraction above 0 or a validation_dataset)"
                )
            }
        }
        if let epochs = request.epochs, !(1...1000).contains(epochs) {
            throw RPCError(.invalidArgument, "epochs must be 1…1000 (got \(epochs))")
        }
        if let fraction = request.validationFraction, !(fraction.isFinite && fraction >= 0 && fraction <= 0.5) {
            throw RPCError(.invalidArgument, "validation_fraction must be 0…0.5 (got \(fraction))")
        }
        if request.validationFraction != nil, request.validationDataset != nil {
            throw RPCError(.invalidArgument, "give validation_dataset or validation_fraction, not both")
        }
        if let size = request.imageSize, !(kind == .classifier ? 8...512 : 32...640).contains(Int(size)) {
            throw RPCError(
                .invalidArgument, "image_size must be \(kind == .classifier ? "8…512" : "32…640") (got \(size))")
        }
        if kind == .detector, let size = request.imageSize, size % 32 != 0 {
            throw RPCError(
                .invalidArgument, "image_size of a detector must be a multiple of 32, its grid's cell (got \(size))")
        }
        if request.includeFeedback, kind == .detector {
            throw RPCError(
                .invalidArgument,
                "include_feedback: feedback photos are labelled images without boxes; only a classifier trains on them")
        }
        let a = request.augmentation ?? ClassificationV1.Augmentation()
        // A detector's boxes would not follow a flipped, cropped or turned image; it jitters boxes and pixels
        // together itself, so only the photometric kinds apply.
        if kind == .detector, a.flip || a.crop != 0 || a.rotation != 0 || a.turns {
            throw RPCError(
                .invalidArgument,
                "augmentation: flip, crop, rotation and turns do not move a detector's boxes; a detector takes exposure, noise and blur (it jitters boxes itself)"
            )
        }
        for (field, value, range) in [
            ("crop", a.crop, 0.0...0.5), ("rotation", a.rotation, 0.0...180), ("exposure", a.exposure, 0.0...1),
            ("noise", a.noise, 0.0...0.5),
        ] where !(value.isFinite && range.contains(value)) {
            throw RPCError(
                .invalidArgument, "augmentation.\(field) must be \(range.lowerBound)…\(range.upperBound) (got \(value))"
            )
        }
        return Training(
            dataset: dataset, kind: kind, algorithm: algorithm,
            name: request.name.isEmpty ? nil : try name(request.name, field: "name"),
            base: try request.baseModel.map { try name($0, field: "base_model") },
            epochs: request.epochs.map(Int.init),
            validationDataset: try request.validationDataset.map { try name($0, field: "validation_dataset") },
            validationFraction: request.validationFraction,
            augmentation: request.augmentation == nil
                ? nil
                : ClassificationCore.Augmentation(
                    flip: a.flip, crop: a.crop, rotation: a.rotation, blur: a.blur,
                    exposure: a.exposure, noise: a.noise, turns: a.turns),
            imageSize: request.imageSize.map(Int.init), seed: request.seed ?? 0,
            includeFeedback: request.includeFeedback,
            batchSize: request.batchSize.map(Int.init), patience: request.patience.map(Int.init),
            fineTune: request.fineTune,
            cropClassifier: request.cropClassifier, featureStride: request.featureStride.map(Int.init))
    }

    struct Classification: Sendable {
        var image: [UInt8]
        var model: String?
        /// The app answered for (nil: the only one).
        var app: String?
        var top: Int
        var scaling: ClassificationCore.Scaling?
        var minimumConfidence: Double
    }

    static func classify(_ request: ClassificationV1.ClassifyRequest) throws -> Classification {
        guard !request.image.isEmpty else { throw RPCError(.invalidArgument, "image: empty; send PNG or JPEG bytes") }
        let top = Int(request.top ?? 5)
        guard (1...1000).contains(top) else { throw RPCError(.invalidArgument, "top must be 1…1000 (got \(top))") }
        let minimum = request.minimumConfidence ?? 0
        guard minimum.isFinite, (0...1).contains(minimum) else {
            throw RPCError(.invalidArgument, "minimum_confidence must be 0…1 (got \(minimum))")
        }
        let scaling: ClassificationCore.Scaling?
        switch request.scaling {
        case .unspecified: scaling = nil
        case .fit: scaling = .fit
        case .fill: scaling = .fill
        case .centerCrop: scaling = .centerCrop
        case .unrecognized(let value): throw RPCError(.invalidArgument, "scaling: \(value) is not a scaling")
        }
        return Classification(
            image: request.image, model: request.model.isEmpty ? nil : try name(request.model, field: "model"),
            app: try optionalName(request.app, field: "app"), top: top, scaling: scaling, minimumConfidence: minimum)
    }

    struct Detection: Sendable {
        var image: [UInt8]
        var model: String?
        var app: String?
        var labels: Set<String>
        /// Nil: the model's own (`DetectorEvaluation.confidence(for:)`).
        var confidence: Double?
        var iou: Double
        var maximum: Int
    }

    static func detect(_ request: ClassificationV1.DetectRequest) throws -> Detection {
        guard !request.image.isEmpty else { throw RPCError(.invalidArgument, "image: empty; send PNG or JPEG bytes") }
        let confidence = request.confidenceThreshold, iou = request.iouThreshold ?? 0.45
        if let confidence, !confidence.isFinite || !(0...1).contains(confidence) {
            throw RPCError(.invalidArgument, "confidence_threshold must be 0…1 (got \(confidence))")
        }
        guard iou.isFinite, iou > 0, iou <= 1 else {
            throw RPCError(.invalidArgument, "iou_threshold must be above 0 and at most 1 (got \(iou))")
        }
        let maximum = Int(request.maxDetections ?? 100)
        guard (1...1000).contains(maximum) else {
            throw RPCError(.invalidArgument, "max_detections must be 1…1000 (got \(maximum))")
        }
        return Detection(
            image: request.image, model: request.model.isEmpty ? nil : try name(request.model, field: "model"),
            app: try optionalName(request.app, field: "app"),
            labels: Set(try request.labels.map { try name($0, field: "labels") }), confidence: confidence, iou: iou,
            maximum: maximum)
    }

    struct ModelImportPlan: Sendable {
        var name: String
        var format: ClassificationV1.ModelFormat
        var kind: ModelHeader.Kind
        var labels: [String]
        var width: Int
        var height: Int
        var mean: [Float]?
        var std: [Float]?
        var layout: ClassificationV1.DetectorLayout
    }

    /// The format of an export: the container (unspecified or menagerie) or ONNX; TorchScript is written by PyTorch only.
    static func exportFormat(_ format: ClassificationV1.ModelFormat) throws -> ClassificationV1.ModelFormat {
        switch format {
        case .unspecified, .menagerie: return .menagerie
        case .onnx: return .onnx
        case .torchscript:
            throw RPCError(.invalidArgument, "format: models are exported as menagerie or onnx, not torchscript")
        case .unrecognized(let value): throw RPCError(.invalidArgument, "format: \(value) is not a model format")
        }
    }

    static func importModel(_ first: ClassificationV1.ImportModelRequest, size: Int) throws -> ModelImportPlan {
        let modelName = try name(first.name, field: "name")
        guard size > 0 else { throw RPCError(.invalidArgument, "data: the model file is empty") }
        let format: ClassificationV1.ModelFormat = first.format == .unspecified ? .menagerie : first.format
        if case .unrecognized(let value) = format {
            throw RPCError(.invalidArgument, "format: \(value) is not a model format")
        }
        var plan = ModelImportPlan(
            name: modelName, format: format, kind: first.kind == .detector ? .detector : .classifier,
            labels: first.labels, width: Int(first.inputWidth), height: Int(first.inputHeight),
            mean: first.mean.isEmpty ? nil : first.mean, std: first.std.isEmpty ? nil : first.std,
            layout: first.layout)
        guard format != .menagerie else { return plan }
        guard !plan.labels.isEmpty else {
            throw RPCError(
                .invalidArgument,
                "labels: a \(format == .onnx ? "ONNX" : "TorchScript") model needs its labels in output order")
        }
        guard Set(plan.labels).count == plan.labels.count else {
            throw RPCError(.invalidArgument, "labels: a label is given twice")
        }
        for label in plan.labels { _ = try name(label, field: "labels") }
        if plan.width == 0 && plan.height == 0 {
            plan.width = 224
            plan.height = 224
        }
        guard (8...2048).contains(plan.width), (8...2048).contains(plan.height) else {
            throw RPCError(
                .invalidArgument, "input size must be 8…2048 pixels a side (got \(plan.width)×\(plan.height))")
        }
        for (field, values) in [("mean", plan.mean), ("std", plan.std)] {
            if let values, values.count != 3 || !values.allSatisfy({ $0.isFinite }) {
                throw RPCError(.invalidArgument, "\(field): three finite values, one per channel (got \(values.count))")
            }
        }
        if let std = plan.std, std.contains(where: { $0 <= 0 }) {
            throw RPCError(.invalidArgument, "std: every value must be positive")
        }
        guard (plan.mean == nil) == (plan.std == nil) else {
            throw RPCError(.invalidArgument, "mean and std go together")
        }
        return plan
    }
}
