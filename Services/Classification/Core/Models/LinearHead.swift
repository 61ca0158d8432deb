import Torch

/// A multinomial logistic regression over standardised feature rows: the `features` algorithm's model over HOG and
/// colour features, and the head trained on an imported TorchScript module's features. Stored as the tensors
/// `mean`, `deviation` (the training rows' per-feature statistics), `weight` ([classes, width]) and `bias`.
struct LinearHead {
    var mean: [Float]
    var deviation: [Float]
    var weight: Tensor
    var bias: Tensor
    var classes: Int

    var width: Int { mean.count }

    /// The head stored in a model file, checked against its labels (and the feature width, when it is fixed).
    init(tensors: [NamedArray], classes: Int, width expected: Int? = nil, model: String) throws {
        let byName = Dictionary(tensors.map { ($0.name, $0) }, uniquingKeysWith: { a, _ in a })
        guard let mean = byName["mean"], let deviation = byName["deviation"], let weight = byName["weight"],
            let bias = byName["bias"],
            weight.shape == [classes, mean.values.count], expected.map({ $0 == mean.values.count }) ?? true,
            !mean.values.isEmpty, deviation.values.count == mean.values.count, bias.values.count == classes
        else {
            throw ClassificationError.invalid("the \(model) model's head tensors do not match its labels")
        }
        self.init(
            mean: mean.values, deviation: deviation.values,
            weight: try Tensor(weight.values, shape: weight.shape), bias: try Tensor(bias.values, shape: [classes]),
            classes: classes)
    }

    init(mean: [Float], deviation: [Float], weight: Tensor, bias: Tensor, classes: Int) {
        self.mean = mean
        self.deviation = deviation
        self.weight = weight
        self.bias = bias
        self.classes = classes
    }

    func standardise(_ row: [Float]) -> [Float] { (0..<row.count).map { (row[$0] - mean[$0]) / deviation[$0] } }

    /// Probabilities over the classes for each row.
    func probabilities(_ rows: [[Float]]) throws -> [[Float]] {
        guard !rows.isEmpty else { return [] }
        return try Torch.withoutGradients {
            let x = try Tensor(rows.flatMap(standardise), shape: [rows.count, width])
            let p = try x.linear(weight: weight, bias: bias).softmax(dim: 1).floats()
            return (0..<rows.count).map { Array(p[$0 * classes..<($0 + 1) * classes]) }
        }
    }

    func tensors() throws -> [NamedArray] {
        [
            NamedArray(name: "mean", shape: [width], values: mean),
            NamedArray(name: "deviation", shape: [width], values: deviation),
            NamedArray(name: "weight", shape: [classes, width], values: try weight.floats()),
            NamedArray(name: "bias", shape: [classes], values: try bias.floats()),
        ]
    }

    /// The figures of a fitted head.
    struct Fit {
        var head: LinearHead
        var trainingAccuracy: Double
        var validationAccuracy: Double?
    }

    /// Fits a head full-batch with Adam and an L2 penalty (`options.epochs` steps, 300 by default), reporting every
    /// 25 steps. `held` measures the validation accuracy. With `balanced` each label weighs about as much in the loss
    /// whatever its count (`balancingRepeats`): 70 three-leaf clovers beside 30 four-leaf ones no longer pull the
    /// head towards "three-leaf" where the features do not say.
    static func fit(
        rows: [[Float]], targets: [Int], held: (rows: [[Float]], labels: [Int])?, classes: Int,
        options: ClassifierTrainingOptions, balanced: Bool = true, progress: (TrainingProgress) throws -> Void
    ) throws -> Fit {
        guard let width = rows.first?.count, width > 0 else {
            throw ClassificationError.invalid("there are no features to train on")
        }
        var mean = [Float](repeating: 0, count: width), deviation = [Float](repeating: 0, count: width)
        for row in rows { for j in 0..<width { mean[j] += row[j] } }
        for j in 0..<width { mean[j] /= Float(rows.count) }
        for row in rows { for j in 0..<width { deviation[j] += (row[j] - mean[j]) * (row[j] - mean[j]) } }
        for j in 0..<width { deviation[j] = max(1e-3, (deviation[j] / Float(rows.count)).squareRoot()) }
        var head = LinearHead(
            mean: mean, deviation: deviation, weight: try Tensor.zeros([classes, width]).requiringGradients(),
            bias: try Tensor.zeros([classes]).requiringGradients(), classes: classes)
        // Standardised on the rows as they are; a label's rows repeated for the loss (full batch: a repeat is a weight).
        let repeats = balanced ? Self.balancingRepeats(targets, classes: classes) : [Int](repeating: 1, count: classes)
        var order: [Int] = []
        for (index, target) in targets.enumerated() { order += [Int](repeating: index, count: repeats[target]) }
        let x = try Tensor(order.flatMap { head.standardise(rows[$0]) }, shape: [order.count, width])
        let y = try Tensor(int64s: order.map { Int64(targets[$0]) }, shape: [order.count])
        var firstRepeat = [Int](repeating: 0, count: targets.count)
        for (position, index) in order.enumerated().reversed() { firstRepeat[index] = position }
        let heldX = try held.map { try Tensor($0.rows.flatMap(head.standardise), shape: [$0.rows.count, width]) }
        let optimizer = try Optimizer(
            .adam, parameters: [head.weight, head.bias], learningRate: options.learningRate ?? 0.01)
        let epochs = max(1, options.epochs ?? 300)
        let decay = 1e-3
        var trainingAccuracy = 0.0, validationAccuracy: Double?
        for epoch in 1...epochs {
            let logits = try x.linear(weight: head.weight, bias: head.bias)
            let loss = try logits.crossEntropy(targets: y) + (try head.weight.squared().sum() * decay)
            try optimizer.zeroGradients()
            try loss.backward()
            try optimizer.step()
            if epoch % 25 == 0 || epoch == epochs {
                // Over the rows as they are, each once (not as repeated for the loss).
                let predicted = try logits.argmax(dim: 1).int64s()
                trainingAccuracy = Metrics.accuracy(predicted: firstRepeat.map { Int(predicted[$0]) }, truth: targets)
                if let held, let heldX {
                    let predicted = try Torch.withoutGradients {
                        try heldX.linear(weight: head.weight, bias: head.bias).argmax(dim: 1).int64s()
                    }
                    validationAccuracy = Metrics.accuracy(predicted: predicted.map(Int.init), truth: held.labels)
                }
                try progress(
                    TrainingProgress(
                        epoch: epoch, epochs: epochs, loss: Double(try loss.item()),
                        trainingAccuracy: trainingAccuracy, validationAccuracy: validationAccuracy))
            }
        }
        head.weight = try head.weight.detached()
        head.bias = try head.bias.detached()
        return Fit(head: head, trainingAccuracy: trainingAccuracy, validationAccuracy: validationAccuracy)
    }

    /// How many times each label's rows count so that every label weighs about as much as the most frequent one: the
    /// largest count over the label's, rounded (1 for labels within 1.5× of it, inclusive, so nearly balanced sets train as they
    /// did). A label without rows counts once.
    static func balancingRepeats(_ targets: [Int], classes: Int) -> [Int] {
        var counts = [Int](repeating: 0, count: classes)
        for target in targets where counts.indices.contains(target) { counts[target] += 1 }
        let largest = counts.max() ?? 0
        return counts.map { count in
            guard count > 0 else { return 1 }
            let ratio = Double(largest) / Double(count)
            return ratio <= 1.5 ? 1 : Int(ratio.rounded())
        }
    }
}
