import OpenCVDNN
import Torch

/// A label with its probability.
public struct Prediction: Sendable, Equatable {
    public var label: String
    public var confidence: Double
}

/// A trained or imported classifier, ready to predict. Built once per model and shared by requests: inference reads
/// its tensors only.
public final class Classifier: @unchecked Sendable {
    public let header: ModelHeader
    /// Why its TorchScript module runs as loaded rather than frozen for inference (slower), when it does.
    public var notFrozen: String? {
        switch engine {
        case .script(let features), .scriptHead(let features, _): features.notFrozen
        case .network, .features, .onnx: nil
        }
    }
    private enum Engine {
        case network(ResidualNetwork)
        case features(LinearHead)
        /// An imported module whose `forward` gives the class scores.
        case script(ScriptFeatures)
        /// An imported module under a head trained here (`ClassifierTrainer.trainScriptHead`).
        case scriptHead(ScriptFeatures, LinearHead)
        case onnx(ONNXNetwork)
    }
    private let engine: Engine

    public init(_ file: ModelFile) throws {
        header = file.header
        guard header.kind == .classifier else {
            throw ClassificationError.invalid("the model is a \(header.kind.rawValue), not a classifier")
        }
        for view in header.testTimeAugmentation ?? [] where !TestTimeAugmentation.views.contains(view) {
            throw ClassificationError.invalid(
                "unknown test-time view \(view) (known: \(TestTimeAugmentation.views.joined(separator: ", ")))")
        }
        switch header.algorithm {
        case "cnn":
            guard let configuration = header.network, configuration.classes == header.labels.count else {
                throw ClassificationError.invalid("the cnn model has no network configuration matching its labels")
            }
            let network = try ResidualNetwork(configuration)
            try network.parameters.load(file.tensors)
            engine = .network(network)
        case "features":
            engine = .features(
                try LinearHead(
                    tensors: file.tensors, classes: header.labels.count, width: Features.count(), model: "features"))
        case "torchscript", "transfer":
            let module = try ScriptFeatures(model: file, method: header.featureMethod ?? "forward")
                .frozenForInference()
            if header.featureMethod != nil {
                engine = .scriptHead(
                    module,
                    try LinearHead(tensors: file.tensors, classes: header.labels.count, model: "fine-tuned TorchScript")
                )
            } else {
                engine = .script(module)
            }
        case "onnx":
            guard let bytes = file.script else { throw ClassificationError.invalid("the onnx model has no graph") }
            do { engine = .onnx(try ONNXNetwork(bytes: bytes)) } catch let error as DNNError {
                throw ClassificationError.invalid("the ONNX model does not load: \(error.message)")
            }
        default:
            throw ClassificationError.invalid("unknown classifier algorithm \(header.algorithm)")
        }
    }

    /// Probabilities over all labels (summing to 1) for each input (CHW floats in [0, 1] at the model's input size),
    /// averaged over the model's test-time views when it has them.
    public func probabilities(_ inputs: [[Float]]) throws -> [[Float]] {
        let views = header.testTimeAugmentation ?? []
        guard !views.isEmpty, !inputs.isEmpty else { return try engineProbabilities(inputs) }
        var all = inputs
        for view in views {
            all += try inputs.map {
                try TestTimeAugmentation.view($0, view, width: header.inputWidth, height: header.inputHeight)
            }
        }
        let p = try engineProbabilities(all)
        return inputs.indices.map { i in
            var sum = p[i]
            for k in 1...views.count { for c in sum.indices { sum[c] += p[k * inputs.count + i][c] } }
            return sum.map { $0 / Float(views.count + 1) }
        }
    }

    private func engineProbabilities(_ inputs: [[Float]]) throws -> [[Float]] {
        let side = header.inputWidth
        switch engine {
        case .network(let network):
            return try ClassifierTrainer.predictNetwork(network, inputs, side: side)
        case .features(let head):
            return try head.probabilities(inputs.map { Features.extract($0, side: side) })
        case .scriptHead(let extractor, let head):
            let rows = try extractor.extract(inputs)
            if let row = rows.first, row.count != head.width {
                throw ClassificationError.invalid(
                    "the TorchScript module's \(extractor.method) returned \(row.count) features; the head takes \(head.width)"
                )
            }
            return try head.probabilities(rows)
        case .script(let module):
            return try inputs.map { input in
                let logits = try module.extract(input)
                guard logits.count == header.labels.count else {
                    throw ClassificationError.invalid(
                        "the module returned \(logits.count) scores for \(header.labels.count) labels")
                }
                return Metrics.softmax(logits)
            }
        case .onnx(let network):
            return try inputs.map { input in
                let output: [Float]
                do {
                    output = try network.forward(
                        header.normalised(input), shape: [1, 3, header.inputHeight, header.inputWidth]
                    ).values
                } catch let error as DNNError {
                    throw ClassificationError.invalid("the ONNX model does not run: \(error.message)")
                }
                guard output.count == header.labels.count else {
                    throw ClassificationError.invalid(
                        "the model returned \(output.count) scores for \(header.labels.count) labels")
                }
                // An exported model may end in a softmax already; scores that are not probabilities get one.
                let sum = output.reduce(0, +)
                return output.allSatisfy({ $0 >= 0 && $0 <= 1 }) && abs(sum - 1) < 1e-3
                    ? output : Metrics.softmax(output)
            }
        }
    }

    /// The smallest decoded photo `classify` needs (`RGBImage.decode(atLeast:)`): twice the input, so that the
    /// resize to the input still averages several pixels into each.
    public var decodeSize: (width: Int, height: Int) { (2 * header.inputWidth, 2 * header.inputHeight) }

    /// The smallest decoded size of an upright photo of `size` that `classify` with `scaling` needs
    /// (`Preprocessing.decodeSize`): what its resize keeps, twice over.
    public func decodeSize(for size: (width: Int, height: Int), scaling: Scaling? = nil) -> (width: Int, height: Int) {
        Preprocessing.decodeSize(
            of: size, input: (header.inputWidth, header.inputHeight), scaling: scaling ?? header.scaling)
    }

    /// The top `k` labels of one image, most probable first.
    public func classify(_ image: RGBImage, top k: Int = 5, scaling: Scaling? = nil) throws -> [Prediction] {
        let input = try Preprocessing.input(
            image, width: header.inputWidth, height: header.inputHeight,
            scaling: scaling ?? header.scaling
        ).pixels
        let p = try probabilities([input])[0]
        return p.indices.sorted { p[$0] != p[$1] ? p[$0] > p[$1] : $0 < $1 }.prefix(max(1, k))
            .map { Prediction(label: header.labels[$0], confidence: Double(p[$0])) }
    }

}

/// Test-time augmentation: besides an input, views of it whose probabilities are averaged with its own — what a
/// small training set left the model unsure of in one framing it may be sure of in another.
public enum TestTimeAugmentation {
    /// "flip": the mirror image; "zoom": the middle 1/1.15 of the input, enlarged to fill it.
    public static let views = ["flip", "zoom"]

    static func view(_ input: [Float], _ name: String, width: Int, height: Int) throws -> [Float] {
        switch name {
        case "flip": Augmentation.warped(input, channels: 3, height: height, width: width, flip: true)
        case "zoom": Augmentation.warped(input, channels: 3, height: height, width: width, zoom: 1.15)
        default:
            throw ClassificationError.invalid(
                "unknown test-time view \(name) (known: \(views.joined(separator: ", ")))")
        }
    }
}

/// Evaluation of a classifier on a labelled dataset.
public struct ClassifierEvaluation: Sendable, Equatable {
    public var accuracy: Double
    public var perClass: [String: Metrics.ClassScores]
    public var confusion: [[Int]]
    public var labels: [String]

    public static func run(_ classifier: Classifier, on dataset: Dataset) throws -> ClassifierEvaluation {
        let labels = classifier.header.labels
        guard dataset.kind == .classification else {
            throw ClassificationError.invalid("a classifier is evaluated on a classification dataset")
        }
        let index = Dictionary(uniqueKeysWithValues: labels.enumerated().map { ($1, $0) })
        for label in dataset.labels where index[label] == nil {
            throw ClassificationError.invalid("the dataset's label \(label) is not one of the model's labels")
        }
        let header = classifier.header
        let inputs = try LabelledInputs.make(
            dataset, width: header.inputWidth, height: header.inputHeight, scaling: header.scaling)
        let truth = inputs.labels.map { index[dataset.labels[$0]]! }
        let predicted = try classifier.probabilities(inputs.inputs).map { argmax($0) }
        let confusion = Metrics.confusion(predicted: predicted, truth: truth, classes: labels.count)
        let scores = Metrics.perClass(confusion: confusion)
        return ClassifierEvaluation(
            accuracy: Metrics.accuracy(predicted: predicted, truth: truth),
            perClass: Dictionary(uniqueKeysWithValues: zip(labels, scores)),
            confusion: confusion, labels: labels)
    }
}
