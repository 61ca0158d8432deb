import Torch

/// An imported TorchScript classifier used as a frozen feature extractor, the way Create ML fine-tunes on its
/// built-in feature print: a linear head trained on the module's features makes the new classifier, and the
/// module's own weights stay as they came. The features are the output of the module's exported `features`
/// method when it has one (`@torch.jit.export`, the embedding before its last layer, which carries far more than
/// the scores of its old classes), otherwise of `forward`.
struct ScriptFeatures {
    /// The method a module exports for its embedding.
    static let embeddingMethod = "features"

    let module: ScriptModule
    let method: String
    let header: ModelHeader
    /// Why TorchScript could not freeze the module for inference, when it could not (`frozenForInference`): it then
    /// runs as loaded, slower, and whoever loads it says so.
    private(set) var notFrozen: String?

    /// Loads the module of a TorchScript model. `method` nil picks the embedding method when the module exports one,
    /// else `forward` (a base for training); a model fine-tuned from one names its method in `featureMethod`.
    init(model: ModelFile, method: String?) throws {
        guard let script = model.script else {
            throw ClassificationError.invalid("the torchscript model has no module")
        }
        let module: ScriptModule
        do { module = try ScriptModule(bytes: script) } catch let error as TorchError {
            throw ClassificationError.invalid("the TorchScript module does not load: \(error.message)")
        }
        let method = try method ?? (module.hasMethod(Self.embeddingMethod) ? Self.embeddingMethod : "forward")
        self.init(module: module, method: method, header: model.header)
    }

    init(module: ScriptModule, method: String, header: ModelHeader) {
        self.module = module
        self.method = method
        self.header = header
    }

    /// The same extractor on a copy of the module frozen for inference (batch norm folded in: the feature print's
    /// features to 1e-5, in less time), or this one with `notFrozen` saying why when TorchScript cannot freeze the
    /// module. For classifying only: training and fine-tuning need the module as loaded.
    func frozenForInference() -> ScriptFeatures {
        do {
            return ScriptFeatures(
                module: try module.frozenForInference(keeping: method), method: method, header: header)
        } catch {
            var unfrozen = self
            unfrozen.notFrozen = (error as? TorchError)?.message ?? "\(error)"
            return unfrozen
        }
    }

    /// CHW inputs in [0, 1] as one batch, normalised by the header's mean and std (in libtorch: a 224-pixel photo
    /// is 150,528 values).
    func normalised(_ inputs: [[Float]]) throws -> Tensor {
        let x = try Tensor(Array(inputs.joined()), shape: [inputs.count, 3, header.inputHeight, header.inputWidth])
        guard let mean = header.mean, let std = header.std, mean.count == 3, std.count == 3 else { return x }
        return try (x - Tensor(mean, shape: [1, 3, 1, 1])) / Tensor(std, shape: [1, 3, 1, 1])
    }

    /// The features of one CHW input in [0, 1] at the module's input size, flattened.
    func extract(_ input: [Float]) throws -> [Float] {
        do {
            return try module.run(method, try normalised([input])).reshaped([-1]).floats()
        } catch let error as TorchError {
            // The imported module's own failure (a shape it does not take, an op it raises): the model given does
            // not fit — not a fault of this service.
            throw ClassificationError.invalid("the TorchScript model does not run: \(error.message)")
        }
    }

    /// Inputs run through the module together: a batch of 16 takes the feature print about a third less time per
    /// image than one at a time.
    static let batchSize = 16

    /// One batch's features, or nil when the module's output does not split into one row per input.
    private func extractBatch(_ inputs: [[Float]]) throws -> [[Float]]? {
        guard inputs.count > 1 else { return nil }
        let x = try normalised(inputs)
        let output = try Torch.withoutGradients { try module.run(method, x) }
        // One row per input: a first dimension of the batch's size (a module may flatten its batch away).
        guard output.shape.first == inputs.count, output.count > 0 else { return nil }
        let values = try output.reshaped([-1]).floats()
        let width = values.count / inputs.count
        return (0..<inputs.count).map { Array(values[$0 * width..<($0 + 1) * width]) }
    }

    /// The features of many inputs, each the same length (`INVALID_ARGUMENT` when the module's output varies). Runs
    /// them in batches; a module that does not take a batch (traced with a fixed one) runs them one at a time.
    func extract(_ inputs: [[Float]]) throws -> [[Float]] {
        var rows: [[Float]] = []
        rows.reserveCapacity(inputs.count)
        for start in stride(from: 0, to: inputs.count, by: Self.batchSize) {
            let chunk = Array(inputs[start..<min(inputs.count, start + Self.batchSize)])
            if let batch = try? extractBatch(chunk) { rows += batch } else { rows += try chunk.map(extract) }
        }
        if let first = rows.first, first.isEmpty || rows.contains(where: { $0.count != first.count }) {
            throw ClassificationError.invalid(
                "the TorchScript module's \(method) returns no features of one fixed length")
        }
        return rows
    }
}
