import Torch

/// A network's named tensors in creation order: trainable parameters and buffers (batch-norm statistics). Names
/// and order are what a model file stores, so a network built with the same configuration loads them back.
public final class Parameters {
    public private(set) var names: [String] = []
    public private(set) var tensors: [String: Tensor] = [:]
    private var trainableNames: Set<String> = []
    /// Initial values come from this generator, not torch's process-wide one, so concurrent trainings (or
    /// anything else seeding torch) cannot disturb a seeded start.
    var random: SeededRandom

    public init(seed: UInt64 = 0) { random = SeededRandom(seed: seed) }

    func gaussians(_ count: Int, scale: Double) -> [Float] { (0..<count).map { _ in random.gaussian() * Float(scale) } }
    func uniforms(_ count: Int, bound: Double) -> [Float] {
        (0..<count).map { _ in (random.unit() * 2 - 1) * Float(bound) }
    }

    /// The tensors an optimiser updates.
    public var trainable: [Tensor] { names.filter { trainableNames.contains($0) }.map { tensors[$0]! } }

    @discardableResult
    public func add(_ name: String, _ tensor: Tensor, trainable: Bool) throws -> Tensor {
        precondition(tensors[name] == nil, "parameter \(name) added twice")
        if trainable { try tensor.requiringGradients() }
        names.append(name)
        tensors[name] = tensor
        if trainable { trainableNames.insert(name) }
        return tensor
    }

    public subscript(name: String) -> Tensor { tensors[name]! }

    /// Every tensor's values, for a model file.
    public func export() throws -> [NamedArray] {
        try names.map { NamedArray(name: $0, shape: tensors[$0]!.shape, values: try tensors[$0]!.floats()) }
    }

    /// Overwrites values from a model file; every name must be present with the same shape.
    public func load(_ arrays: [NamedArray]) throws {
        let byName = Dictionary(arrays.map { ($0.name, $0) }, uniquingKeysWith: { a, _ in a })
        guard byName.count == names.count else {
            throw ClassificationError.invalid(
                "the model file has \(byName.count) tensors; this network has \(names.count)")
        }
        for name in names {
            guard let array = byName[name], array.shape == tensors[name]!.shape else {
                throw ClassificationError.invalid("the model file's tensor \(name) is missing or has another shape")
            }
            try tensors[name]!.copy(from: Tensor(array.values, shape: array.shape))
        }
    }
}

extension Parameters {
    /// Overwrites the values of every tensor the arrays have with the same name and shape (transfer learning: a
    /// base model's layers); returns how many were taken.
    @discardableResult
    public func loadMatching(_ arrays: [NamedArray]) throws -> Int {
        var taken = 0
        for array in arrays {
            guard let tensor = tensors[array.name], tensor.shape == array.shape else { continue }
            try tensor.copy(from: Tensor(array.values, shape: array.shape))
            taken += 1
        }
        return taken
    }
}

extension Parameters {
    /// Moves every tensor of `average` (a network of the same configuration) towards this one's:
    /// `average = keeping · average + (1 − keeping) · this`, outside autograd.
    public func blend(into average: Parameters, keeping: Double) throws {
        try Torch.withoutGradients {
            for name in names {
                let target = average[name]
                try target.copy(from: try target * keeping + (try tensors[name]! * (1 - keeping)))
            }
        }
    }
}

/// A tensor's values outside torch (for model files).
public struct NamedArray: Sendable, Equatable {
    public var name: String
    public var shape: [Int]
    public var values: [Float]

    public init(name: String, shape: [Int], values: [Float]) {
        self.name = name
        self.shape = shape
        self.values = values
    }
}

/// Layers as functions over `Parameters`, creating their tensors when the network is built.
enum Layers {
    /// He (Kaiming) normal initialisation for ReLU networks.
    static func conv(_ p: Parameters, _ name: String, in input: Int, out: Int, kernel: Int, bias: Bool = false) throws {
        let scale = (2.0 / Double(input * kernel * kernel)).squareRoot()
        try p.add(
            "\(name).weight",
            try Tensor(p.gaussians(out * input * kernel * kernel, scale: scale), shape: [out, input, kernel, kernel]),
            trainable: true)
        if bias { try p.add("\(name).bias", try Tensor.zeros([out]), trainable: true) }
    }

    static func batchNorm(_ p: Parameters, _ name: String, channels: Int) throws {
        try p.add("\(name).weight", try Tensor.ones([channels]), trainable: true)
        try p.add("\(name).bias", try Tensor.zeros([channels]), trainable: true)
        try p.add("\(name).running_mean", try Tensor.zeros([channels]), trainable: false)
        try p.add("\(name).running_var", try Tensor.ones([channels]), trainable: false)
    }

    static func linear(_ p: Parameters, _ name: String, in input: Int, out: Int) throws {
        let bound = 1 / Double(input).squareRoot()
        try p.add(
            "\(name).weight", try Tensor(p.uniforms(out * input, bound: bound), shape: [out, input]), trainable: true)
        try p.add("\(name).bias", try Tensor.zeros([out]), trainable: true)
    }

    static func applyConv(_ p: Parameters, _ name: String, _ x: Tensor, stride: Int = 1, padding: Int) throws -> Tensor
    {
        try x.conv2d(weight: p["\(name).weight"], bias: p.tensors["\(name).bias"], stride: stride, padding: padding)
    }

    static func applyBatchNorm(_ p: Parameters, _ name: String, _ x: Tensor, training: Bool) throws -> Tensor {
        try x.batchNorm(
            weight: p["\(name).weight"], bias: p["\(name).bias"], runningMean: p["\(name).running_mean"],
            runningVariance: p["\(name).running_var"], training: training)
    }

    static func applyLinear(_ p: Parameters, _ name: String, _ x: Tensor) throws -> Tensor {
        try x.linear(weight: p["\(name).weight"], bias: p["\(name).bias"])
    }
}
