import Foundation
import Torch

/// `train --algorithm transfer --fine-tune`: after the linear head has learnt the labels from the frozen feature
/// print, the network's last block (and every layer after it) and the head train together for a few epochs at a
/// small learning rate, on images augmented afresh each epoch, so the pretrained features move towards the labels
/// while the earlier blocks — general edges and textures, and most of the weights — stay as ImageNet trained them.
/// Each epoch is measured on the held-out images and the best one's weights are kept, as the cnn keeps its best
/// epoch under `--patience`, stopping once `patience` epochs have not bettered it. The tuned module is saved whole into the model (its TorchScript bytes), so serving,
/// export and import run the tuned network with no code of their own.
///
/// The network runs as it was traced: its batch norms keep the statistics of ImageNet (a traced batch norm is in
/// eval mode for good), which is also what small batches of a few dozen photos want; their scales and shifts train.
enum FineTuning {
    /// Epochs over the training images when the options name none.
    static let defaultEpochs = 6
    /// Adam's rate for the network's tuned layers: a tenth of the head's, so the pretrained weights move, not jump.
    static let networkLearningRate = 1e-4
    static let headLearningRate = 1e-3
    /// The head's L2 penalty, the one `LinearHead.fit` trained it with.
    static let weightDecay = 1e-3
    /// Epochs without a lower held-out loss after which fine-tuning stops (the best epoch is kept either way): on the
    /// faces measured in the README the best epoch was always the first, and the other five only cost time.
    static let patience = 2

    /// The parameters fine-tuned of a network whose blocks are numbered children of a container named `…blocks`
    /// (EfficientNet-Lite0's `net._blocks.0` … `net._blocks.15`): the last block's and every parameter registered
    /// after it (the head convolution and its batch norm; a layer the features never use gets no gradient and stays).
    static func lastBlock(of names: [String]) throws -> [String] {
        var last: (prefix: String, number: Int)?
        for name in names {
            let parts = name.split(separator: ".", omittingEmptySubsequences: false)
            for k in parts.indices.dropFirst() where parts[k - 1].lowercased().hasSuffix("blocks") {
                guard let number = Int(parts[k]), number >= 0 else { continue }
                if last.map({ number > $0.number }) ?? true {
                    last = (parts[...k].joined(separator: "."), number)
                }
            }
        }
        guard let last, let end = names.lastIndex(where: { $0.hasPrefix(last.prefix + ".") }) else {
            throw ClassificationError(
                .failedPrecondition,
                "the feature print has no numbered blocks (a container named …blocks with children 0, 1, …) to fine-tune the last of"
            )
        }
        return names.enumerated().filter { $0.element.hasPrefix(last.prefix + ".") || $0.offset > end }.map(\.element)
    }

    /// The frozen transfer model `frozen` (module and head) fine-tuned on `training`, validated on `held`. Progress
    /// is reported once per epoch; a cancel (thrown by `progress`) ends it with `TrainingInterrupted` carrying the
    /// best model so far.
    static func train(
        _ frozen: ModelFile, _ training: LabelledInputs, _ held: LabelledInputs?, options: ClassifierTrainingOptions,
        progress: (TrainingProgress) throws -> Void
    ) throws -> ModelFile {
        guard let script = frozen.script, let method = frozen.header.featureMethod else {
            throw ClassificationError.invalid("only a transfer model's feature print can be fine-tuned")
        }
        let labels = frozen.header.labels
        let module: ScriptModule
        do { module = try ScriptModule(bytes: script) } catch let error as TorchError {
            throw ClassificationError.invalid("the feature print does not load: \(error.message)")
        }
        let names = try module.parameterNames()
        let tunedNames = Set(try lastBlock(of: names))
        var tuned: [Tensor] = []
        for name in names {
            let parameter = try module.parameter(name)
            // A loaded module's parameters all require gradients: the frozen ones must not, or backward would run
            // through the whole network.
            try parameter.requiringGradients(tunedNames.contains(name))
            if tunedNames.contains(name) { tuned.append(parameter) }
        }
        let extractor = ScriptFeatures(module: module, method: method, header: frozen.header)
        let start = try LinearHead(tensors: frozen.tensors, classes: labels.count, model: "transfer")
        let width = start.width
        let mean = try Tensor(start.mean, shape: [1, width]),
            deviation = try Tensor(start.deviation, shape: [1, width])
        let weight = try Tensor(try start.weight.floats(), shape: [labels.count, width]).requiringGradients()
        let bias = try Tensor(try start.bias.floats(), shape: [labels.count]).requiringGradients()
        let networkOptimizer = try Optimizer(.adam, parameters: tuned, learningRate: networkLearningRate)
        let headOptimizer = try Optimizer(.adam, parameters: [weight, bias], learningRate: headLearningRate)
        let augmentation = options.resolvedAugmentation
        var random = SeededRandom(seed: options.seed ^ 0xF1E7_0E5E)
        let epochs = max(1, options.fineTuneEpochs ?? defaultEpochs)
        let batchSize = ScriptFeatures.batchSize

        func head() throws -> LinearHead {
            try LinearHead(
                mean: start.mean, deviation: start.deviation, weight: weight.detached().cloned(),
                bias: bias.detached().cloned(), classes: labels.count)
        }
        /// The model with the network's and head's current weights.
        func model(bestEpoch: Int?, trainingAccuracy: Double?, validationAccuracy: Double?) throws -> ModelFile {
            var file = ModelFile(header: frozen.header, tensors: try head().tensors(), script: try module.saved())
            file.header.fineTuned = true
            file.header.trainingAccuracy = trainingAccuracy
            file.header.validationAccuracy = validationAccuracy
            file.header.metrics["fine_tune_epochs"] = Double(epochs)
            if let bestEpoch { file.header.metrics["fine_tune_best_epoch"] = Double(bestEpoch) }
            return file
        }

        // The best epoch on the held-out images (lowest cross-entropy, as the cnn's --patience): its figures and weights.
        var best: Snapshot?
        func restore(_ kept: Snapshot?) throws {
            guard let kept else { return }
            for (parameter, value) in zip(tuned, kept.network) { try parameter.copy(from: value) }
            try weight.copy(from: kept.weight)
            try bias.copy(from: kept.bias)
        }
        var trainingAccuracy = 0.0, validationAccuracy: Double?
        for epoch in 1...epochs {
            var order = Array(training.inputs.indices)
            order.shuffle(using: &random)
            var totalLoss = 0.0, correct = 0
            for first in stride(from: 0, to: order.count, by: batchSize) {
                let batch = order[first..<min(order.count, first + batchSize)]
                let inputs = batch.map {
                    augmentation.apply(
                        training.inputs[$0], channels: 3, height: training.height, width: training.width, using: &random
                    )
                }
                let features = try module.runRecordingGradients(method, try extractor.normalised(inputs))
                let logits = try ((features - mean) / deviation).linear(weight: weight, bias: bias)
                let targets = try Tensor(int64s: batch.map { Int64(training.labels[$0]) }, shape: [batch.count])
                let loss = try logits.crossEntropy(targets: targets) + (try weight.squared().sum() * weightDecay)
                try networkOptimizer.zeroGradients()
                try headOptimizer.zeroGradients()
                try loss.backward()
                try networkOptimizer.step()
                try headOptimizer.step()
                totalLoss += Double(try loss.item()) * Double(batch.count)
                correct +=
                    zip(try logits.argmax(dim: 1).int64s(), batch).filter { Int($0) == training.labels[$1] }.count
            }
            trainingAccuracy = Double(correct) / Double(order.count)
            var validationLoss: Double?
            if let held {
                let probabilities = try head().probabilities(try extractor.extract(held.inputs))
                validationAccuracy = Metrics.accuracy(predicted: probabilities.map { argmax($0) }, truth: held.labels)
                validationLoss =
                    zip(probabilities, held.labels).map { -Foundation.log(max(1e-7, Double($0[$1]))) }.reduce(0, +)
                    / Double(held.labels.count)
            }
            if let validationLoss, let validationAccuracy, best.map({ validationLoss < $0.loss }) ?? true {
                best = Snapshot(
                    loss: validationLoss, epoch: epoch, accuracy: validationAccuracy,
                    trainingAccuracy: trainingAccuracy,
                    network: try tuned.map { try $0.detached().cloned() }, weight: try weight.detached().cloned(),
                    bias: try bias.detached().cloned())
            }
            do {
                try progress(
                    TrainingProgress(
                        epoch: epoch, epochs: epochs, loss: totalLoss / Double(order.count),
                        trainingAccuracy: trainingAccuracy, validationAccuracy: validationAccuracy))
            } catch {
                // Cancelled: the best epoch so far (this one counts: it has ended), or the last without validation.
                try restore(best)
                var partial = try model(
                    bestEpoch: best?.epoch, trainingAccuracy: best?.trainingAccuracy ?? trainingAccuracy,
                    validationAccuracy: best?.accuracy ?? validationAccuracy)
                partial.header.interrupted =
                    "while fine-tuning, after epoch \(epoch)/\(epochs); kept "
                    + (best.map { "epoch \($0.epoch), the best on the held-out images" } ?? "its weights")
                throw TrainingInterrupted(cause: error, partial: partial)
            }
            if let best, epoch - best.epoch >= patience { break }
        }
        try restore(best)
        var file = try model(
            bestEpoch: best?.epoch, trainingAccuracy: best?.trainingAccuracy ?? trainingAccuracy,
            validationAccuracy: best?.accuracy ?? validationAccuracy)
        // The weights that moved: the tuned layers the features depend on.
        file.header.metrics["fine_tuned_parameters"] = Double(
            try tuned.filter { try $0.hasGradient }.map(\.count).reduce(0, +))
        return file
    }

    /// An epoch's figures on the held-out images and a copy of the weights it ended with.
    private struct Snapshot {
        var loss: Double
        var epoch: Int
        var accuracy: Double
        var trainingAccuracy: Double
        var network: [Tensor]
        var weight: Tensor
        var bias: Tensor
    }
}
