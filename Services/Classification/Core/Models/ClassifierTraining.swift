import Base
import Foundation
import Torch

/// The classifier algorithms.
public enum ClassifierAlgorithm: String, Sendable, Codable, CaseIterable {
    /// A small residual network trained from scratch on libtorch (the default).
    case cnn
    /// HOG and colour-histogram features with a multinomial logistic regression: trains in seconds.
    case features
    /// A linear head on the built-in pretrained feature print (`FeaturePrint`), Create ML's transfer learning: the
    /// default for photos when the feature print is installed.
    case transfer

    /// The algorithm a training that names none gets: `transfer` for photos (a median side above
    /// `photoSide`) when the feature print is installed; the small-image cnn otherwise (the 32-pixel digits, where
    /// it is right 98 % of the time and a 224-pixel network would only blow up each pixel).
    public static func automatic(for dataset: Dataset, featurePrintInstalled: Bool) -> ClassifierAlgorithm {
        guard featurePrintInstalled else { return .cnn }
        let sides = dataset.samples.map { max($0.width, $0.height) }.sorted()
        guard !sides.isEmpty else { return .cnn }
        return sides[sides.count / 2] > photoSide ? .transfer : .cnn
    }

    /// Images whose median side is above this many pixels are photos.
    public static let photoSide = 64
}

public struct ClassifierTrainingOptions: Sendable, Codable, Equatable {
    public var algorithm: ClassifierAlgorithm = .cnn
    /// Passes over the training images; nil picks the algorithm's default (cnn 30, features 300 full-batch steps).
    public var epochs: Int?
    /// The side of the square network input; nil picks it from the images (`ClassifierTrainer.defaultInputSize`).
    public var inputSize: Int?
    public var scaling: Scaling = .fit
    /// Share of each label held out for validation when no validation dataset is given.
    public var validationFraction = 0.1
    /// nil picks the algorithm's default: cnn shifts (crop 10 %) and rotates (10°), features none.
    public var augmentation: Augmentation?
    /// Same seed and data → the same model (with one libtorch thread).
    public var seed: UInt64 = 0
    public var batchSize = 64
    /// cnn: stop after this many epochs without a lower validation loss, keeping the best epoch's weights (nil: run
    /// every epoch). With a refit the pass on every image runs the best epoch's count.
    public var patience: Int?
    public var learningRate: Double?
    /// The residual network's stage widths.
    public var widths = [16, 32, 64]
    /// cnn: the target's share spread over the other labels (nil: 0.1), which keeps a small set from being
    /// fitted with overconfident logits.
    public var labelSmoothing: Double?
    /// cnn with a share held out of the dataset for validation: after measuring the validation accuracy, train
    /// again on every image and keep that model (nil: true). The model's validation accuracy is the first pass's.
    public var refit: Bool?
    /// cnn: the decay of the weights' exponential moving average, which is the model kept (nil: 0.99; 0: off).
    /// Averaging the last few epochs' weights evens out the noise of the final steps, which otherwise moves the
    /// test accuracy by a point between seeds.
    public var averageDecay: Double?

    /// The augmentation used: the given one or the algorithm's default.
    public var resolvedAugmentation: Augmentation {
        augmentation
            ?? {
                switch algorithm {
                case .cnn: ClassifierTrainingOptions.cnnAugmentation
                case .transfer: ClassifierTrainingOptions.transferAugmentation
                case .features: .none
                }
            }()
    }

    public static let cnnAugmentation = Augmentation(crop: 0.1, rotation: 10)
    /// Photos under a frozen pretrained network: mirror images, shifted framing and exposure are the same object;
    /// small turns are not in the default (a photo taken from above could take `rotation` too).
    public static let transferAugmentation = Augmentation(flip: true, crop: 0.1, exposure: 0.2)
    /// transfer: augmented copies of each training image whose features the head also trains on (each copy is one
    /// more pass of the network per image).
    public var augmentedCopies: Int?
    /// transfer: after the head, train the feature print's last block with it for a few epochs (`FineTuning`).
    public var fineTune = false
    /// Fine-tuning's epochs over the training images (nil: `FineTuning.defaultEpochs`).
    public var fineTuneEpochs: Int?

    public init() {}
}

/// One training epoch's figures, for a job's progress. `epoch` counts within its pass: the cnn with a share held out
/// trains twice (`ClassifierTrainingOptions.refit`), `--epochs` each time, and says which pass an epoch is of.
public struct TrainingProgress: Sendable, Equatable, Codable {
    public var epoch: Int
    public var epochs: Int
    public var loss: Double
    public var trainingAccuracy: Double
    public var validationAccuracy: Double?
    public var pass = 1
    public var passes = 1
    /// What the pass does, when passes differ in kind (a fine-tuned transfer: "head", then "fine-tuning"); nil for
    /// the cnn's two passes, which train the same way.
    public var stage: String?

    public init(
        epoch: Int, epochs: Int, loss: Double, trainingAccuracy: Double, validationAccuracy: Double?, pass: Int = 1,
        passes: Int = 1,
        stage: String? = nil
    ) {
        self.epoch = epoch
        self.epochs = epochs
        self.loss = loss
        self.trainingAccuracy = trainingAccuracy
        self.validationAccuracy = validationAccuracy
        self.pass = pass
        self.passes = passes
        self.stage = stage
    }

    /// The share of the whole training done, over every pass.
    public var fraction: Double {
        (Double(pass - 1) * Double(epochs) + Double(epoch)) / Double(max(1, passes * epochs))
    }
}

/// Preprocessed images and labels, ready for a network.
public struct LabelledInputs: Sendable {
    public var inputs: [[Float]]
    public var labels: [Int]
    public var width: Int
    public var height: Int
    /// Each input's image (SHA-256) and scaling, the key of its features in a `FeatureCache`.
    public var keys: [String] = []
    /// The side of square inputs (the networks trained here take square ones).
    public var side: Int { width }

    /// Decodes and scales every sample of a classification dataset.
    public static func make(_ dataset: Dataset, width: Int, height: Int, scaling: Scaling) throws -> LabelledInputs {
        var inputs: [[Float]] = []
        inputs.reserveCapacity(dataset.samples.count)
        for sample in dataset.samples {
            let image = try RGBImage.decode(dataset.images[sample.hash]!, name: sample.name)
            inputs.append(try Preprocessing.input(image, width: width, height: height, scaling: scaling).pixels)
        }
        return LabelledInputs(
            inputs: inputs, labels: dataset.samples.map(\.label), width: width, height: height,
            keys: dataset.samples.map { "\(scaling.rawValue) \(width)x\(height) \($0.hash)" })
    }

    public static func make(_ dataset: Dataset, side: Int, scaling: Scaling) throws -> LabelledInputs {
        try make(dataset, width: side, height: side, scaling: scaling)
    }

    func subset(_ indices: [Int]) -> LabelledInputs {
        LabelledInputs(
            inputs: indices.map { inputs[$0] }, labels: indices.map { labels[$0] }, width: width, height: height,
            keys: keys.isEmpty ? [] : indices.map { keys[$0] })
    }
}

/// Trains classifiers. Synchronous and CPU-bound: the service runs it on its heavy-work lane. `progress` is called
/// after each epoch; throwing from it (a cancelled job) stops training.
public enum ClassifierTrainer {
    /// The input side for a dataset: the images' median side rounded to 8 and clamped to 16…96, then halved (down
    /// to 16) while halving loses almost none of the images' detail — small images scaled up from smaller ones (the
    /// digits are 8×8 scans blown up to 32×32) carry no more detail than their source, and a smaller input is a
    /// quarter of the work per halving. Photos keep their side: halving them loses detail.
    public static func defaultInputSize(_ dataset: Dataset) -> Int {
        let sides = dataset.samples.map { max($0.width, $0.height) }.sorted()
        let median = sides.isEmpty ? 64 : sides[sides.count / 2]
        var side = min(96, max(16, (median + 4) / 8 * 8))
        // Up to 64 images spread over the dataset.
        let step = max(1, dataset.samples.count / 64)
        let probe = stride(from: 0, to: dataset.samples.count, by: step).prefix(64).compactMap { i -> RGBImage? in
            let sample = dataset.samples[i]
            return dataset.images[sample.hash].flatMap { try? RGBImage.decode($0, name: sample.name) }
        }
        while side >= 32, side % 16 == 0, !probe.isEmpty {
            let losses = probe.compactMap { image in
                (try? Preprocessing.input(image, width: side, height: side, scaling: .fit).pixels).map {
                    detailLost(byHalving: $0, side: side)
                }
            }.sorted()
            guard !losses.isEmpty, losses[losses.count / 2] < 0.02 else { break }
            side /= 2
        }
        return side
    }

    /// The share of an image's variation (mean absolute deviation from its mean) that halving it loses: the mean
    /// absolute difference between it and its 2×2 block means. 0 for an image made of 2×2 blocks.
    static func detailLost(byHalving pixels: [Float], side: Int) -> Double {
        let plane = side * side
        let mean = pixels.reduce(0, +) / Float(pixels.count)
        let spread = pixels.reduce(Float(0)) { $0 + abs($1 - mean) } / Float(pixels.count)
        guard spread > 1e-4 else { return 0 }
        var lost: Float = 0
        for c in 0..<3 {
            for y in stride(from: 0, to: side - 1, by: 2) {
                for x in stride(from: 0, to: side - 1, by: 2) {
                    let i = c * plane + y * side + x
                    let block = (pixels[i] + pixels[i + 1] + pixels[i + side] + pixels[i + side + 1]) / 4
                    lost +=
                        abs(pixels[i] - block) + abs(pixels[i + 1] - block) + abs(pixels[i + side] - block)
                        + abs(pixels[i + side + 1] - block)
                }
            }
        }
        return Double(lost / Float(pixels.count) / spread)
    }

    /// Splits indices per label with the seed: `fraction` of each label (at least one when it has 3 or more) for
    /// validation.
    public static func split(labels: [Int], fraction: Double, seed: UInt64) -> (training: [Int], validation: [Int]) {
        var random = SeededRandom(seed: seed ^ 0x5EED_5EED)
        var training: [Int] = [], validation: [Int] = []
        for label in Set(labels).sorted() {
            var indices = labels.indices.filter { labels[$0] == label }
            indices.shuffle(using: &random)
            var held = Int((Double(indices.count) * fraction).rounded())
            if fraction > 0 && held == 0 && indices.count >= 3 { held = 1 }
            validation += indices.prefix(held)
            training += indices.dropFirst(held)
        }
        return (training.sorted(), validation.sorted())
    }

    /// `base` (transfer learning) is a trained cnn classifier or an imported TorchScript classifier (`checkBase`). A
    /// cnn base gives the new network its widths and input size and starts it from its trained layers; only the final
    /// layer, whose shape depends on the labels, starts afresh. A TorchScript base becomes a frozen feature extractor
    /// under a new linear head (`trainScriptHead`).
    ///
    /// `transfer` trains a head on `featurePrint` (`FAILED_PRECONDITION` when it is nil: not installed).
    public static func train(
        _ dataset: Dataset, validation: Dataset? = nil, options: ClassifierTrainingOptions,
        base: ModelFile? = nil, featurePrint: FeaturePrint? = nil, featureCache: FeatureCache? = nil,
        progress: (TrainingProgress) throws -> Void = { _ in }
    ) throws -> ModelFile {
        var options = options
        var base = base
        if options.algorithm == .transfer {
            guard base == nil else {
                throw ClassificationError.invalid(
                    "transfer trains on the built-in feature print; a base model is for cnn (or an imported TorchScript model)"
                )
            }
            guard let featurePrint else {
                throw ClassificationError(
                    .failedPrecondition, "the feature print is not installed; \(FeaturePrint.installHint)")
            }
            base = featurePrint.base
        } else if let base {
            try checkBase(base.header, algorithm: options.algorithm)
            if let network = base.header.network {
                options.widths = network.widths
                options.inputSize = base.header.inputWidth
            }
        }
        guard !options.fineTune || options.algorithm == .transfer else {
            throw ClassificationError.invalid(
                "fine-tuning applies to transfer, whose pretrained network is otherwise frozen; \(options.algorithm.rawValue) is not fine-tuned"
            )
        }
        guard dataset.kind == .classification else {
            throw ClassificationError.invalid("a classifier trains on a classification dataset (label folders)")
        }
        if let validation, validation.labels != dataset.labels {
            throw ClassificationError.invalid("the validation dataset's labels differ from the training dataset's")
        }
        let started = ContinuousClock.now
        let scriptBase = base.flatMap { ["torchscript", "transfer"].contains($0.header.algorithm) ? $0 : nil }
        // A TorchScript base takes its own input size, which need not be square.
        var width = scriptBase?.header.inputWidth ?? 0, height = scriptBase?.header.inputHeight ?? 0
        if scriptBase == nil {
            let side = options.inputSize ?? defaultInputSize(dataset)
            guard (8...512).contains(side) else {
                throw ClassificationError.invalid("input size \(side) is outside 8…512")
            }
            (width, height) = (side, side)
        }
        let all = try LabelledInputs.make(dataset, width: width, height: height, scaling: options.scaling)
        let training: LabelledInputs, held: LabelledInputs?
        if let validation {
            training = all
            held = try LabelledInputs.make(validation, width: width, height: height, scaling: options.scaling)
        } else {
            let parts = split(labels: all.labels, fraction: options.validationFraction, seed: options.seed)
            training = all.subset(parts.training)
            held = parts.validation.isEmpty ? nil : all.subset(parts.validation)
        }
        try Torch.seed(options.seed)
        var file: ModelFile
        var trainedOn = training.inputs.count
        switch (options.algorithm, scriptBase) {
        case (_, let scriptBase?):
            // Fine-tuning is a second pass: the head first learns the labels on the frozen network, then the last
            // block trains with it.
            let fineTuning = options.algorithm == .transfer && options.fineTune
            file = try trainScriptHead(
                training, held, labels: dataset.labels, base: scriptBase, options: options,
                cache: options.algorithm == .transfer ? featureCache.map { ($0, featurePrint!.manifest.sha256) } : nil
            ) { p in
                var p = p
                if fineTuning { (p.passes, p.stage) = (2, "head on the frozen network") }
                try progress(p)
            }
            if fineTuning {
                do {
                    file = try FineTuning.train(file, training, held, options: options) { p in
                        var p = p
                        (p.pass, p.passes, p.stage) = (2, 2, "fine-tuning the last block")
                        try progress(p)
                    }
                } catch var interrupted as TrainingInterrupted {
                    interrupted.partial.header.algorithm = "transfer"
                    interrupted.partial.header.interrupted =
                        "in pass 2/2 " + (interrupted.partial.header.interrupted ?? "")
                    interrupted.partial.header.metrics["training_images"] = Double(training.inputs.count)
                    interrupted.partial.header.seed = options.seed
                    interrupted.partial.header.scaling = options.scaling
                    interrupted.partial.header.trainingSeconds = (ContinuousClock.now - started).seconds
                    throw interrupted
                }
            }
        case (.cnn, nil):
            // The held-out share measures the validation accuracy; the model kept is then trained again, the same
            // way, on every image: on 1,438 digits the 10 % held out cost 0.3–0.8 points of test accuracy.
            let refit = held != nil && validation == nil && (options.refit ?? true)
            let passes = refit ? 2 : 1
            do {
                file = try trainNetwork(training, held, labels: dataset.labels, options: options, base: base) { p in
                    var p = p
                    p.passes = passes
                    try progress(p)
                }
            } catch var interrupted as TrainingInterrupted {
                if passes == 2 {
                    interrupted.partial.header.interrupted =
                        "in pass 1/2 " + (interrupted.partial.header.interrupted ?? "")
                }
                interrupted.partial.header.metrics["training_images"] = Double(training.inputs.count)
                interrupted.partial.header.seed = options.seed
                interrupted.partial.header.scaling = options.scaling
                interrupted.partial.header.trainingSeconds = (ContinuousClock.now - started).seconds
                throw interrupted
            }
            if refit {
                let firstPass = file
                let estimate = file.header.validationAccuracy
                let best = file.header.metrics["best_epoch"]
                var options = options
                // Stopped early: the pass on every image trains as long as the best epoch of the first.
                if let best, options.patience != nil {
                    options.epochs = Int(best)
                    options.patience = nil
                }
                try Torch.seed(options.seed)
                do {
                    file = try trainNetwork(all, nil, labels: dataset.labels, options: options, base: base) { p in
                        try progress(
                            TrainingProgress(
                                epoch: p.epoch, epochs: p.epochs, loss: p.loss, trainingAccuracy: p.trainingAccuracy,
                                validationAccuracy: estimate, pass: 2, passes: 2))
                    }
                } catch let interrupted as TrainingInterrupted {
                    // Half a pass on every image is not better than the whole first pass: that one is kept.
                    var kept = firstPass
                    kept.header.interrupted =
                        "in pass 2/2 (every image) \(interrupted.partial.header.interrupted?.components(separatedBy: ";").first ?? ""); kept pass 1's model (trained without the held-out images)"
                    kept.header.metrics["training_images"] = Double(training.inputs.count)
                    kept.header.seed = options.seed
                    kept.header.scaling = options.scaling
                    kept.header.trainingSeconds = (ContinuousClock.now - started).seconds
                    throw TrainingInterrupted(cause: interrupted.cause, partial: kept)
                }
                file.header.validationAccuracy = estimate
                if let best { file.header.metrics["best_epoch"] = best }
                trainedOn = all.inputs.count
            }
        case (.features, nil):
            file = try trainFeatures(training, held, labels: dataset.labels, options: options, progress: progress)
        case (.transfer, nil): preconditionFailure("transfer has its feature print as base")
        }
        if options.algorithm == .transfer { file.header.algorithm = "transfer" }
        file.header.trainingSeconds = (ContinuousClock.now - started).seconds
        file.header.metrics["training_images"] = Double(trainedOn)
        file.header.scaling = options.scaling
        file.header.seed = options.seed
        return file
    }

    /// Throws `INVALID_ARGUMENT` unless the model can be a classifier's base: a cnn classifier trained here, or an
    /// imported TorchScript classifier (or one fine-tuned from such, whatever the algorithm). An ONNX model cannot:
    /// OpenCV's DNN module runs it but gives no way to train or take features from it.
    public static func checkBase(_ header: ModelHeader, algorithm: ClassifierAlgorithm) throws {
        switch (header.kind, header.algorithm) {
        case (.classifier, "cnn"):
            guard header.network != nil else {
                throw ClassificationError.invalid("the base cnn has no network configuration")
            }
            guard algorithm == .cnn else {
                throw ClassificationError.invalid(
                    "a cnn base fine-tunes with the cnn algorithm, not \(algorithm.rawValue)")
            }
        case (.classifier, "torchscript"), (.classifier, "transfer"):
            break
        default:
            throw ClassificationError.invalid(
                "a classifier's base model must be a cnn classifier or an imported TorchScript classifier (this one is a \(header.algorithm) \(header.kind.rawValue))"
            )
        }
    }

    // MARK: cnn

    static func trainNetwork(
        _ training: LabelledInputs, _ held: LabelledInputs?, labels: [String],
        options: ClassifierTrainingOptions, base: ModelFile? = nil,
        progress: (TrainingProgress) throws -> Void
    ) throws -> ModelFile {
        let configuration = ResidualNetworkConfiguration(widths: options.widths, classes: labels.count)
        let network = try ResidualNetwork(configuration, seed: options.seed)
        if let base { try network.parameters.loadMatching(base.tensors) }
        let epochs = options.epochs ?? 30
        let rate = options.learningRate ?? 0.003
        let augmentation = options.resolvedAugmentation
        let smoothing = options.labelSmoothing ?? 0.1
        let optimizer = try Optimizer(
            .adamW, parameters: network.parameters.trainable, learningRate: rate, weightDecay: 5e-4)
        // The moving average of the weights (and batch-norm statistics), the network kept and validated.
        let decay = options.averageDecay ?? 0.99
        let average = decay > 0 ? try ResidualNetwork(configuration, seed: options.seed) : nil
        if let average { try average.parameters.loadMatching(network.parameters.export()) }
        var random = SeededRandom(seed: options.seed)
        let side = training.side, plane = 3 * side * side
        let batchSize = max(1, options.batchSize)
        let steps = epochs * ((training.inputs.count + batchSize - 1) / batchSize)
        var step = 0
        var trainingAccuracy = 0.0, validationAccuracy: Double?
        // Early stopping: the best validation loss so far, its epoch, accuracy and weights.
        var best: (loss: Double, epoch: Int, accuracy: Double, weights: [NamedArray])?
        epochs: for epoch in 1...max(1, epochs) {
            var order = Array(training.inputs.indices)
            order.shuffle(using: &random)
            var totalLoss = 0.0, correct = 0
            for start in stride(from: 0, to: order.count, by: batchSize) {
                let batch = order[start..<min(order.count, start + batchSize)]
                var values: [Float] = []
                values.reserveCapacity(batch.count * plane)
                for i in batch {
                    values += augmentation.apply(
                        training.inputs[i], channels: 3, height: side, width: side, using: &random)
                }
                // One-cycle-like schedule: cosine decay from the peak rate after a short warm-up.
                let progressShare = Double(step) / Double(max(1, steps))
                let warm = min(1, Double(step + 1) / Double(max(1, steps / 20)))
                try optimizer.setLearningRate(rate * warm * 0.5 * (1 + cos(.pi * progressShare)))
                let x = try Tensor(values, shape: [batch.count, 3, side, side])
                let y = try Tensor(int64s: batch.map { Int64(training.labels[$0]) }, shape: [batch.count])
                let logits = try network.forward(x, training: true)
                let loss = try logits.crossEntropy(targets: y, labelSmoothing: smoothing)
                try optimizer.zeroGradients()
                try loss.backward()
                try optimizer.step()
                step += 1
                if let average {
                    // Early on the average follows the weights closely (the decay warms up as in TensorFlow's EMA).
                    let d = min(decay, Double(1 + step) / Double(10 + step))
                    try network.parameters.blend(into: average.parameters, keeping: d)
                }
                totalLoss += Double(try loss.item()) * Double(batch.count)
                let predicted = try logits.argmax(dim: 1).int64s()
                correct += zip(predicted, batch).filter { Int($0) == training.labels[$1] }.count
            }
            trainingAccuracy = Double(correct) / Double(order.count)
            var validationLoss: Double?
            if let held {
                let probabilities = try predictNetwork(average ?? network, held.inputs, side: side)
                validationAccuracy = Metrics.accuracy(predicted: probabilities.map { argmax($0) }, truth: held.labels)
                validationLoss =
                    zip(probabilities, held.labels).map { -log(max(1e-7, Double($0[$1]))) }.reduce(0, +)
                    / Double(held.labels.count)
            }
            do {
                try progress(
                    TrainingProgress(
                        epoch: epoch, epochs: epochs, loss: totalLoss / Double(order.count),
                        trainingAccuracy: trainingAccuracy, validationAccuracy: validationAccuracy))
            } catch {
                // Cancelled: the weights so far are still a model — the best epoch's when validation picked one.
                if options.patience != nil, let validationLoss, let validationAccuracy,
                    best.map({ validationLoss < $0.loss }) ?? true
                {
                    best = (validationLoss, epoch, validationAccuracy, try (average ?? network).parameters.export())
                }
                if let best { try (average ?? network).parameters.load(best.weights) }
                var header = ModelHeader(
                    kind: .classifier, algorithm: "cnn", labels: labels, inputWidth: side, inputHeight: side)
                header.network = configuration
                header.trainingAccuracy = trainingAccuracy
                header.validationAccuracy = best?.accuracy ?? validationAccuracy
                if let best { header.metrics["best_epoch"] = Double(best.epoch) }
                header.interrupted =
                    best.map {
                        "after epoch \(epoch)/\(epochs); kept epoch \($0.epoch), the best on the held-out images"
                    }
                    ?? "after epoch \(epoch)/\(epochs); kept its weights"
                throw TrainingInterrupted(
                    cause: error,
                    partial: ModelFile(header: header, tensors: try (average ?? network).parameters.export()))
            }
            if let patience = options.patience, let validationLoss, let validationAccuracy {
                if best.map({ validationLoss < $0.loss }) ?? true {
                    best = (validationLoss, epoch, validationAccuracy, try (average ?? network).parameters.export())
                } else if epoch - best!.epoch >= patience {
                    break epochs
                }
            }
        }
        if let best {
            try (average ?? network).parameters.load(best.weights)
            validationAccuracy = best.accuracy
        }
        // Training accuracy as evaluated after training (eval-mode batch norm, no augmentation), as Create ML reports it.
        let kept = average ?? network
        let finalTraining = Metrics.accuracy(
            predicted: try predictNetwork(kept, training.inputs, side: side).map { argmax($0) }, truth: training.labels)
        var header = ModelHeader(
            kind: .classifier, algorithm: "cnn", labels: labels, inputWidth: side, inputHeight: side)
        header.network = configuration
        header.trainingAccuracy = finalTraining
        header.validationAccuracy = validationAccuracy
        if let best { header.metrics["best_epoch"] = Double(best.epoch) }
        return ModelFile(header: header, tensors: try kept.parameters.export())
    }

    static func predictNetwork(_ network: ResidualNetwork, _ inputs: [[Float]], side: Int) throws -> [[Float]] {
        try Torch.withoutGradients {
            var out: [[Float]] = []
            for start in stride(from: 0, to: inputs.count, by: 256) {
                let chunk = inputs[start..<min(inputs.count, start + 256)]
                let x = try Tensor(Array(chunk.joined()), shape: [chunk.count, 3, side, side])
                let probabilities = try network.forward(x, training: false).softmax(dim: 1).floats()
                let classes = probabilities.count / chunk.count
                for i in 0..<chunk.count { out.append(Array(probabilities[i * classes..<(i + 1) * classes])) }
            }
            return out
        }
    }

    // MARK: features

    static func trainFeatures(
        _ training: LabelledInputs, _ held: LabelledInputs?, labels: [String],
        options: ClassifierTrainingOptions, progress: (TrainingProgress) throws -> Void
    ) throws -> ModelFile {
        let side = training.side
        let (inputs, targets) = withAugmentedCopies(training, options: options)
        let fit = try LinearHead.fit(
            rows: inputs.map { Features.extract($0, side: side) }, targets: targets,
            held: held.map { ($0.inputs.map { Features.extract($0, side: side) }, $0.labels) },
            classes: labels.count, options: options, progress: progress)
        var header = ModelHeader(
            kind: .classifier, algorithm: "features", labels: labels, inputWidth: side, inputHeight: side)
        header.trainingAccuracy = fit.trainingAccuracy
        header.validationAccuracy = fit.validationAccuracy
        return ModelFile(header: header, tensors: try fit.head.tensors())
    }

    /// The training inputs, plus one augmented copy of each when augmentation is on: a linear model sees the whole
    /// set at once, so the copies are made up front.
    static func withAugmentedCopies(_ training: LabelledInputs, options: ClassifierTrainingOptions, copies: Int = 1)
        -> (inputs: [[Float]], targets: [Int])
    {
        var inputs = training.inputs, targets = training.labels
        let augmentation = options.resolvedAugmentation
        guard !augmentation.isNone else { return (inputs, targets) }
        var random = SeededRandom(seed: options.seed)
        for _ in 0..<max(0, copies) {
            for (input, label) in zip(training.inputs, training.labels) {
                inputs.append(
                    augmentation.apply(
                        input, channels: 3, height: training.height, width: training.width, using: &random))
                targets.append(label)
            }
        }
        return (inputs, targets)
    }

    // MARK: an imported TorchScript classifier as the base

    /// Fine-tunes an imported TorchScript classifier (or a model fine-tuned from one) as Create ML does: the module is
    /// a frozen feature extractor (`ScriptFeatures`) and a linear head is trained on its features for the new
    /// labels. The model keeps the module's bytes, input size and normalisation, and stores the head beside them.
    /// `cache` (the feature print's: a cache and the module's checksum) keeps the features of the unaltered images.
    static func trainScriptHead(
        _ training: LabelledInputs, _ held: LabelledInputs?, labels: [String], base: ModelFile,
        options: ClassifierTrainingOptions, cache: (FeatureCache, String)? = nil,
        progress: (TrainingProgress) throws -> Void
    ) throws -> ModelFile {
        let extractor = try ScriptFeatures(model: base, method: base.header.featureMethod)
        // An imported module: no augmentation unless asked for (its inputs may be anything). The feature print:
        // photos, augmented (`transferAugmentation`), twice over.
        var options = options
        if options.algorithm != .transfer { options.augmentation = options.augmentation ?? Augmentation.none }
        let copies = options.algorithm == .transfer ? options.augmentedCopies ?? 2 : 1
        let (inputs, targets) = withAugmentedCopies(training, options: options, copies: copies)
        // withAugmentedCopies puts the unaltered images first: those are the ones a cache may know.
        func extract(_ inputs: [[Float]], unaltered: LabelledInputs) throws -> [[Float]] {
            guard let (cache, module) = cache, unaltered.keys.count == unaltered.inputs.count else {
                return try extractor.extract(inputs)
            }
            let keys = inputs.indices.map { $0 < unaltered.keys.count ? "\(module) \(unaltered.keys[$0])" : nil }
            return try cache.rows(keys, inputs: inputs, extract: extractor.extract)
        }
        let extracting = ContinuousClock.now
        let rows = try extract(inputs, unaltered: training)
        let extractionSeconds = (ContinuousClock.now - extracting).seconds
        let fit = try LinearHead.fit(
            rows: rows, targets: targets,
            held: try held.map { (try extract($0.inputs, unaltered: $0), $0.labels) },
            classes: labels.count, options: options, progress: progress)
        var header = ModelHeader(
            kind: .classifier, algorithm: "torchscript", labels: labels,
            inputWidth: base.header.inputWidth, inputHeight: base.header.inputHeight)
        header.mean = base.header.mean
        header.std = base.header.std
        header.featureMethod = extractor.method
        header.metrics["feature_ms_per_image"] = extractionSeconds * 1000 / Double(max(1, inputs.count))
        header.trainingAccuracy = fit.trainingAccuracy
        header.validationAccuracy = fit.validationAccuracy
        return ModelFile(header: header, tensors: try fit.head.tensors(), script: base.script)
    }
}

func argmax(_ values: [Float]) -> Int { values.indices.max { values[$0] < values[$1] } ?? 0 }

/// A training stopped by its progress callback (a cancel request) with the best model it had so far: the cnn keeps
/// the best epoch's weights (validated on the held-out images) or the last epoch's, and when cancelled in its pass
/// on every image, the whole first pass. `partial.header.interrupted` says which. `cause` is what stopped it.
public struct TrainingInterrupted: Error {
    public var cause: any Error
    public var partial: ModelFile
    public init(cause: any Error, partial: ModelFile) {
        self.cause = cause
        self.partial = partial
    }
}
