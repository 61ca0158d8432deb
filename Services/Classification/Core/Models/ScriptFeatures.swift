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

    /// Loads the module of a TorchScript model. `method` nil picks the embedding method when the module exports one,
    /// else `forward` (a base for training); a model fine-tuned from one names its method in `featureMethod`.
    init(model: ModelFile, method: String?) throws {
        guard let script = model.script else { throw ClassificationError.invalid("the torchscript model has no module") }
        let module: ScriptModule
        do { module = try ScriptModule(bytes: script) } catch let error as TorchError {
            throw ClassificationError.invalid("the TorchScript module does not load: \(error.message)")
        }
        let method = try method ?? (module.hasMethod(Self.embeddingMethod) ? Self.embeddingMethod : "forward")
        self.init(module: module, method: method, header: model.header)
    }

    init(module: ScriptModule, method: String, header: ModelHeader) {
        self.module = module; self.method = method; self.header = header
    }

    /// The features of one CHW input in [0, 1] at the module's input size, flattened.
    func extract(_ input: [Float]) throws -> [Float] {
        do {
            let x = try Tensor(header.normalised(input), shape: [1, 3, header.inputHeight, header.inputWidth])
            return try module.run(method, x).reshaped([-1]).floats()
        } catch let error as TorchError {
            // The imported module's own failure (a shape it does not take, an op it raises): the model given does
            // not fit — not a fault of this service.
            throw ClassificationError.invalid("the TorchScript model does not run: \(error.message)")
        }
    }

    /// The features of many inputs, each the same length (`INVALID_ARGUMENT` when the module's output varies).
    func extract(_ inputs: [[Float]]) throws -> [[Float]] {
        let rows = try inputs.map(extract)
        if let first = rows.first, first.isEmpty || rows.contains(where: { $0.count != first.count }) {
            throw ClassificationError.invalid("the TorchScript module's \(method) returns no features of one fixed length")
        }
        return rows
    }
}
