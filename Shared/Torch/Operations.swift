import Foundation
import TorchShim

// Tensor operations. Each maps onto one shim entry point with an operation code; the codes are private to this
// file and mirror torch_shim.h.

extension Tensor {
    private func unary(_ op: Int32) throws -> Tensor { try produce { torch_unary(op, handle, $0) } }
    private func binary(_ op: Int32, _ other: Tensor) throws -> Tensor {
        try produce { torch_binary(op, handle, other.handle, $0) }
    }
    private func scalar(_ op: Int32, _ value: Double) throws -> Tensor {
        try produce { torch_scalar(op, handle, value, $0) }
    }
    private func reduce(_ op: Int32, _ dim: Int?, _ keep: Bool) throws -> Tensor {
        try produce { torch_reduce(op, handle, Int64(dim ?? Int(Int32.min)), keep ? 1 : 0, $0) }
    }

    public func relu() throws -> Tensor { try unary(0) }
    public func sigmoid() throws -> Tensor { try unary(1) }
    public func exp() throws -> Tensor { try unary(2) }
    public func log() throws -> Tensor { try unary(3) }
    public func negated() throws -> Tensor { try unary(4) }
    public func sqrt() throws -> Tensor { try unary(5) }
    public func squared() throws -> Tensor { try unary(6) }
    public func abs() throws -> Tensor { try unary(8) }
    /// The same values cut off from the gradient graph.
    public func detached() throws -> Tensor { try unary(9) }
    /// A contiguous copy.
    public func cloned() throws -> Tensor { try unary(10) }

    public static func + (a: Tensor, b: Tensor) throws -> Tensor { try a.binary(0, b) }
    public static func - (a: Tensor, b: Tensor) throws -> Tensor { try a.binary(1, b) }
    public static func * (a: Tensor, b: Tensor) throws -> Tensor { try a.binary(2, b) }
    public static func / (a: Tensor, b: Tensor) throws -> Tensor { try a.binary(3, b) }
    public func matmul(_ other: Tensor) throws -> Tensor { try binary(4, other) }
    public func maximum(_ other: Tensor) throws -> Tensor { try binary(5, other) }
    public func minimum(_ other: Tensor) throws -> Tensor { try binary(6, other) }

    public static func + (a: Tensor, b: Double) throws -> Tensor { try a.scalar(0, b) }
    public static func * (a: Tensor, b: Double) throws -> Tensor { try a.scalar(1, b) }
    public func pow(_ exponent: Double) throws -> Tensor { try scalar(2, exponent) }
    public func clamped(min: Double) throws -> Tensor { try scalar(4, min) }
    public func clamped(max: Double) throws -> Tensor { try scalar(5, max) }

    /// Over all elements when `dim` is nil.
    public func sum(dim: Int? = nil, keepingDimension: Bool = false) throws -> Tensor {
        try reduce(0, dim, keepingDimension)
    }
    public func mean(dim: Int? = nil, keepingDimension: Bool = false) throws -> Tensor {
        try reduce(1, dim, keepingDimension)
    }
    public func max(dim: Int? = nil, keepingDimension: Bool = false) throws -> Tensor {
        try reduce(2, dim, keepingDimension)
    }
    public func argmax(dim: Int? = nil, keepingDimension: Bool = false) throws -> Tensor {
        try reduce(3, dim, keepingDimension)
    }
    public func softmax(dim: Int) throws -> Tensor { try reduce(4, dim, false) }
    public func logSoftmax(dim: Int) throws -> Tensor { try reduce(5, dim, false) }

    public func reshaped(_ shape: [Int]) throws -> Tensor {
        let sizes = shape.map(Int64.init)
        return try produce { torch_reshape(handle, sizes, Int32(sizes.count), $0) }
    }
    public func permuted(_ order: [Int]) throws -> Tensor {
        let dims = order.map(Int64.init)
        return try produce { torch_permute(handle, dims, Int32(dims.count), $0) }
    }
    public func narrowed(dim: Int, start: Int, length: Int) throws -> Tensor {
        try produce { torch_narrow(handle, Int64(dim), Int64(start), Int64(length), $0) }
    }
    public func flipped(_ dims: [Int]) throws -> Tensor {
        let d = dims.map(Int64.init)
        return try produce { torch_flip(handle, d, Int32(d.count), $0) }
    }
    public static func cat(_ tensors: [Tensor], dim: Int) throws -> Tensor {
        let handles: [torch_tensor?] = tensors.map { $0.handle }
        return try withExtendedLifetime(tensors) {
            try handles.withUnsafeBufferPointer { buffer in
                try produce { torch_cat(buffer.baseAddress, Int32(buffer.count), Int64(dim), $0) }
            }
        }
    }

    // MARK: Layers (NCHW)

    public func conv2d(weight: Tensor, bias: Tensor?, stride: Int = 1, padding: Int = 0) throws -> Tensor {
        try produce { torch_conv2d(handle, weight.handle, bias?.handle, Int64(stride), Int64(padding), $0) }
    }
    public func linear(weight: Tensor, bias: Tensor?) throws -> Tensor {
        try produce { torch_linear(handle, weight.handle, bias?.handle, $0) }
    }
    public func batchNorm(
        weight: Tensor?, bias: Tensor?, runningMean: Tensor?, runningVariance: Tensor?,
        training: Bool, momentum: Double = 0.1, epsilon: Double = 1e-5
    ) throws -> Tensor {
        try produce {
            torch_batch_norm(
                handle, weight?.handle, bias?.handle, runningMean?.handle, runningVariance?.handle,
                training ? 1 : 0, momentum, epsilon, $0)
        }
    }
    public func adaptiveAvgPool2d(height: Int, width: Int) throws -> Tensor {
        try produce { torch_adaptive_avg_pool2d(handle, Int64(height), Int64(width), $0) }
    }
    /// Bilinear resize of an NCHW tensor; `antialias` averages over the source when shrinking.
    public func resized(height: Int, width: Int, antialias: Bool = true) throws -> Tensor {
        try produce { torch_resize_bilinear(handle, Int64(height), Int64(width), antialias ? 1 : 0, $0) }
    }

    // MARK: Losses

    /// Mean cross entropy of logits [N, C] against int64 class indices [N].
    public func crossEntropy(targets: Tensor, labelSmoothing: Double = 0) throws -> Tensor {
        try produce { torch_cross_entropy(handle, targets.handle, labelSmoothing, $0) }
    }
    public func binaryCrossEntropyWithLogits(targets: Tensor, weight: Tensor? = nil, summed: Bool = false) throws
        -> Tensor
    {
        try produce { torch_bce_with_logits(handle, targets.handle, weight?.handle, summed ? 1 : 0, $0) }
    }
}

/// A gradient-descent optimiser over a fixed list of parameter tensors.
public final class Optimizer {
    public enum Kind: Int32 { case sgd = 0, adam = 1, adamW = 2 }
    private let handle: torch_optimizer
    private let parameters: [Tensor]

    public init(
        _ kind: Kind, parameters: [Tensor], learningRate: Double, momentum: Double = 0,
        weightDecay: Double = 0
    ) throws {
        let handles: [torch_tensor?] = parameters.map { $0.handle }
        var out: torch_optimizer?
        try handles.withUnsafeBufferPointer { buffer in
            try check(
                torch_optimizer_new(
                    kind.rawValue, buffer.baseAddress, Int32(buffer.count), learningRate,
                    momentum, weightDecay, &out))
        }
        guard let out else { throw TorchError("the shim returned no optimizer") }
        handle = out
        self.parameters = parameters
    }
    deinit { torch_optimizer_free(handle) }

    public func setLearningRate(_ rate: Double) throws { try check(torch_optimizer_set_learning_rate(handle, rate)) }
    public func zeroGradients() throws { try check(torch_optimizer_zero_grad(handle)) }
    public func step() throws { try check(torch_optimizer_step(handle)) }
}

/// A TorchScript module trained elsewhere, run in eval mode without gradients.
public final class ScriptModule: @unchecked Sendable {
    private let handle: torch_script

    public init(bytes: [UInt8]) throws {
        var out: torch_script?
        try bytes.withUnsafeBufferPointer { buffer in
            try check(torch_script_load(buffer.baseAddress, buffer.count, &out))
        }
        guard let out else { throw TorchError("the shim returned no module") }
        handle = out
    }
    private init(handle: torch_script) { self.handle = handle }
    deinit { torch_script_free(handle) }

    /// A copy for inference only, `method` kept beside `forward`: its weights constants and batch norm folded into the
    /// convolutions, so a call does less (`torch.jit.freeze` and `optimize_for_inference`). It cannot be trained or
    /// saved.
    public func frozenForInference(keeping method: String) throws -> ScriptModule {
        var out: torch_script?
        try check(torch_script_frozen(handle, method, &out))
        guard let out else { throw TorchError("the shim returned no module") }
        return ScriptModule(handle: out)
    }

    public func forward(_ input: Tensor) throws -> Tensor { try run("forward", input) }

    /// Runs a method by name: `forward`, or another the module exports (`@torch.jit.export`), such as `features`.
    public func run(_ method: String, _ input: Tensor) throws -> Tensor {
        try produce { torch_script_run(handle, method, input.handle, $0) }
    }

    /// The module's parameters and buffers by dotted name (`net._blocks.0._bn1.running_mean`), parameters first, as
    /// Python's `named_parameters()` and `named_buffers()` list them: what a writer of the module's graph in another
    /// format (ONNX) reads its weights from.
    public func namedTensors() throws -> [(name: String, tensor: Tensor)] {
        var names: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?
        var tensors: UnsafeMutablePointer<torch_tensor?>?
        var count: Int32 = 0
        try check(torch_script_named_tensors(handle, &names, &tensors, &count))
        defer {
            free(names)
            free(tensors)
        }
        // Every entry is taken over (its name freed, its tensor owned) before any is checked, so none leaks.
        let entries = (0..<Int(count)).map { index in
            (
                names?[index].map { pointer in
                    defer { free(pointer) }
                    return String(cString: pointer)
                },
                tensors?[index].map { Tensor(owning: $0) }
            )
        }
        return try entries.map { name, tensor in
            guard let name, let tensor else { throw TorchError("the shim returned an incomplete tensor list") }
            return (name, tensor)
        }
    }

    public func hasMethod(_ name: String) throws -> Bool {
        var found: Int32 = 0
        try check(torch_script_has_method(handle, name, &found))
        return found == 1
    }

    /// The saved archive of a module compiled from TorchScript source (`def forward(self, x): …`), as
    /// `torch.jit.save` writes one: tests build modules with it, nothing is downloaded. `parameters` are registered
    /// first under their dotted names, which make submodules (`blocks.1.weight`, reached in the source as
    /// `getattr(self.blocks, "1").weight`), so a test can build a small network shaped like a pretrained one.
    public static func compile(source: String, parameters: [(name: String, value: Tensor)] = []) throws -> [UInt8] {
        var bytes: UnsafeMutablePointer<UInt8>?
        var length = 0
        let handles: [torch_tensor?] = parameters.map { $0.value.handle }
        let names = parameters.map { strdup($0.name) }
        defer { names.forEach { free($0) } }
        try withExtendedLifetime(parameters.map(\.value)) {
            try names.map { UnsafePointer($0) }.withUnsafeBufferPointer { names in
                try handles.withUnsafeBufferPointer { values in
                    try check(
                        torch_script_compile_with_parameters(
                            source, names.baseAddress, values.baseAddress,
                            Int32(parameters.count), &bytes, &length))
                }
            }
        }
        defer { free(bytes) }
        guard let bytes else { throw TorchError("the shim returned no archive") }
        return Array(UnsafeBufferPointer(start: bytes, count: length))
    }

    // MARK: Training the module (fine-tuning)

    /// The dotted names of every parameter, submodules' included, in registration order
    /// (`net._blocks.15._project_conv.weight`).
    public func parameterNames() throws -> [String] {
        var names: UnsafeMutablePointer<CChar>?
        var length = 0
        try check(torch_script_parameter_names(handle, &names, &length))
        defer { free(names) }
        guard let names else { throw TorchError("the shim returned no names") }
        return String(cString: names).split(separator: "\n").map(String.init)
    }

    /// A parameter by its dotted name, sharing the module's weights: an optimizer stepping it trains the module.
    /// Loaded modules' parameters require gradients; a fine-tuning turns that off for the ones it leaves frozen.
    public func parameter(_ name: String) throws -> Tensor {
        try produce { torch_script_parameter(handle, name, $0) }
    }

    /// Runs a method recording gradients for backward (the parameters that require them get them), whatever this
    /// thread's setting. The graph runs as it was traced: a traced batch norm keeps its running statistics.
    public func runRecordingGradients(_ method: String, _ input: Tensor) throws -> Tensor {
        try produce { torch_script_run_recording(handle, method, input.handle, $0) }
    }

    /// The module with its current (possibly trained) weights as a TorchScript archive, which `init(bytes:)` loads.
    public func saved() throws -> [UInt8] {
        var bytes: UnsafeMutablePointer<UInt8>?
        var length = 0
        try check(torch_script_save(handle, &bytes, &length))
        defer { free(bytes) }
        guard let bytes else { throw TorchError("the shim returned no archive") }
        return Array(UnsafeBufferPointer(start: bytes, count: length))
    }
}
