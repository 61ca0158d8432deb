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
    private enum Engine {
        case network(ResidualNetwork)
        case features(FeatureModel, weight: Tensor, bias: Tensor)
        case script(ScriptModule)
        case onnx(ONNXNetwork)
    }
    private let engine: Engine

    public init(_ file: ModelFile) throws {
        header = file.header
        guard header.kind == .classifier else { throw ClassificationError.invalid("the model is a \(header.kind.rawValue), not a classifier") }
        switch header.algorithm {
        case "cnn":
            guard let configuration = header.network, configuration.classes == header.labels.count else {
                throw ClassificationError.invalid("the cnn model has no network configuration matching its labels")
            }
            let network = try ResidualNetwork(configuration)
            try network.parameters.load(file.tensors)
            engine = .network(network)
        case "features":
            let byName = Dictionary(file.tensors.map { ($0.name, $0) }, uniquingKeysWith: { a, _ in a })
            guard let mean = byName["mean"], let deviation = byName["deviation"], let weight = byName["weight"],
                  let bias = byName["bias"], weight.shape == [header.labels.count, Features.count()],
                  mean.values.count == Features.count(), deviation.values.count == Features.count(),
                  bias.values.count == header.labels.count else {
                throw ClassificationError.invalid("the features model's tensors do not match its labels")
            }
            engine = .features(FeatureModel(mean: mean.values, deviation: deviation.values, classes: header.labels.count),
                               weight: try Tensor(weight.values, shape: weight.shape), bias: try Tensor(bias.values, shape: bias.shape))
        case "torchscript":
            guard let script = file.script else { throw ClassificationError.invalid("the torchscript model has no module") }
            do { engine = .script(try ScriptModule(bytes: script)) } catch let error as TorchError {
                throw ClassificationError.invalid("the TorchScript module does not load: \(error.message)")
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

    /// Probabilities over all labels (summing to 1) for each input (CHW floats in [0, 1] at the model's input size).
    public func probabilities(_ inputs: [[Float]]) throws -> [[Float]] {
        let side = header.inputWidth
        switch engine {
        case .network(let network):
            return try ClassifierTrainer.predictNetwork(network, inputs, side: side)
        case .features(let model, let weight, let bias):
            return try Torch.withoutGradients {
                let rows = inputs.flatMap { model.standardise(Features.extract($0, side: side)) }
                let x = try Tensor(rows, shape: [inputs.count, Features.count()])
                let p = try x.linear(weight: weight, bias: bias).softmax(dim: 1).floats()
                return (0..<inputs.count).map { Array(p[$0 * model.classes..<($0 + 1) * model.classes]) }
            }
        case .script(let module):
            return try inputs.map { input in
                let x = try Tensor(normalised(input), shape: [1, 3, header.inputHeight, header.inputWidth])
                let logits: [Float]
                do {
                    logits = try module.forward(x).reshaped([-1]).floats()
                } catch let error as TorchError {
                    // The imported module's own failure (a shape it does not take, an op it raises): the model given
                    // does not fit, as an ONNX one that does not run — not a fault of this service.
                    throw ClassificationError.invalid("the TorchScript model does not run: \(error.message)")
                }
                guard logits.count == header.labels.count else {
                    throw ClassificationError.invalid("the module returned \(logits.count) scores for \(header.labels.count) labels")
                }
                return Metrics.softmax(logits)
            }
        case .onnx(let network):
            return try inputs.map { input in
                let output: [Float]
                do {
                    output = try network.forward(normalised(input), shape: [1, 3, header.inputHeight, header.inputWidth]).values
                } catch let error as DNNError {
                    throw ClassificationError.invalid("the ONNX model does not run: \(error.message)")
                }
                guard output.count == header.labels.count else {
                    throw ClassificationError.invalid("the model returned \(output.count) scores for \(header.labels.count) labels")
                }
                // An exported model may end in a softmax already; scores that are not probabilities get one.
                let sum = output.reduce(0, +)
                return output.allSatisfy({ $0 >= 0 && $0 <= 1 }) && abs(sum - 1) < 1e-3 ? output : Metrics.softmax(output)
            }
        }
    }

    /// The top `k` labels of one image, most probable first.
    public func classify(_ image: RGBImage, top k: Int = 5, scaling: Scaling? = nil) throws -> [Prediction] {
        let input = try Preprocessing.input(image, width: header.inputWidth, height: header.inputHeight,
                                            scaling: scaling ?? header.scaling).pixels
        let p = try probabilities([input])[0]
        return p.indices.sorted { p[$0] != p[$1] ? p[$0] > p[$1] : $0 < $1 }.prefix(max(1, k))
            .map { Prediction(label: header.labels[$0], confidence: Double(p[$0])) }
    }

    private func normalised(_ input: [Float]) -> [Float] {
        guard let mean = header.mean, let std = header.std, mean.count == 3, std.count == 3 else { return input }
        let plane = input.count / 3
        return input.indices.map { (input[$0] - mean[$0 / plane]) / std[$0 / plane] }
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
        guard dataset.kind == .classification else { throw ClassificationError.invalid("a classifier is evaluated on a classification dataset") }
        let index = Dictionary(uniqueKeysWithValues: labels.enumerated().map { ($1, $0) })
        for label in dataset.labels where index[label] == nil {
            throw ClassificationError.invalid("the dataset's label \(label) is not one of the model's labels")
        }
        let inputs = try LabelledInputs.make(dataset, side: classifier.header.inputWidth, scaling: classifier.header.scaling)
        let truth = inputs.labels.map { index[dataset.labels[$0]]! }
        let predicted = try classifier.probabilities(inputs.inputs).map { argmax($0) }
        let confusion = Metrics.confusion(predicted: predicted, truth: truth, classes: labels.count)
        let scores = Metrics.perClass(confusion: confusion)
        return ClassifierEvaluation(accuracy: Metrics.accuracy(predicted: predicted, truth: truth),
                                    perClass: Dictionary(uniqueKeysWithValues: zip(labels, scores)),
                                    confusion: confusion, labels: labels)
    }
}
