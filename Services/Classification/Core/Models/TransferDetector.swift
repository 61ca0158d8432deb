import Base
import Foundation
import Torch

/// `--kind detector --algorithm transfer`: the built-in feature print (ImageNet-pretrained EfficientNet-Lite0),
/// frozen, as the backbone of a yolo-style head — a 3×3 convolution and ReLU, then the detection layer — trained
/// with the yolo detector's target assignment and loss (`DetectorTrainer.fit`) and decoded like it
/// (`GridDetector`). Its input is the feature print's: letterboxed, (p − 127) / 128.
///
/// The backbone's tensors are stored in the model (EfficientNet-Lite0's own names, `_blocks.3._bn1.weight`), so a
/// saved detector needs no installed feature print to run, and ONNX export writes them as it does a transfer
/// classifier's.
public final class TransferDetector: GridDetector, @unchecked Sendable {
    /// Stride 16 (blocks 0–10): digits of 13–40 px in a 224-pixel letterbox fill a 14×14 grid's cells as the yolo
    /// detector's 10×10 grid at 160 px does, where stride 32's 7×7 cells of 32 px often hold two digits. Measured on
    /// digit-detection in Services/Classification/README.md.
    public static let defaultFeatureStride = 16
    /// The strides a transfer detector is offered at. Stride 8 is blocks 0–4 (40 channels, too shallow alone to tell
    /// shapes apart) joined by blocks 5–10's stride-16 map enlarged twice: for objects of a cell or two at stride 16.
    public static let featureStrides = [8, 16, 32]
    /// The block after which stride 8's fine map is taken.
    static let fineBlocks = 5
    /// Channels of the head's 3×3 convolution.
    static let neckWidth = 128

    public let header: ModelHeader
    let configuration: TransferDetectorConfiguration
    let backbone: LiteBackbone
    let head: Parameters
    private let mean: Tensor, deviation: Tensor

    var anchors: [[Double]] { configuration.anchors }
    var cellSize: Int { backbone.stride }

    /// A new detector on `featurePrint`'s network up to `featureStride`, its head drawn from `seed`.
    convenience init(
        header: ModelHeader, featurePrint: FeaturePrint, featureStride: Int, anchors: [[Double]], seed: UInt64
    ) throws {
        guard Self.featureStrides.contains(featureStride),
            let blocks = LiteBackbone.blocks(forStride: max(16, featureStride))
        else {
            throw ClassificationError.invalid(
                "a transfer detector's feature stride is 8, 16 or 32 (got \(featureStride))")
        }
        let fineBlocks = featureStride == 8 ? Self.fineBlocks : nil
        let network: [NamedArray]
        do {
            network = try ONNXExport.liteTensors(try ScriptModule(bytes: featurePrint.module))
        } catch let error as TorchError {
            throw ClassificationError.invalid("the feature print does not load: \(error.message)")
        }
        var header = header
        header.mean = featurePrint.manifest.mean
        header.std = featurePrint.manifest.std
        header.transferDetector = TransferDetectorConfiguration(
            anchors: anchors, blocks: blocks, neckWidth: Self.neckWidth, fineBlocks: fineBlocks)
        try self.init(header: header, backbone: LiteBackbone.kept(network, blocks: blocks), seed: seed)
    }

    /// A saved transfer detector.
    public convenience init(_ file: ModelFile) throws {
        guard file.header.kind == .detector, file.header.algorithm == "transfer", file.header.transferDetector != nil
        else {
            throw ClassificationError.invalid("the model is not a transfer detector")
        }
        try self.init(header: file.header, backbone: file.tensors.filter { !Self.isHead($0.name) }, seed: 0)
        try head.load(file.tensors.filter { Self.isHead($0.name) })
    }

    private init(header: ModelHeader, backbone tensors: [NamedArray], seed: UInt64) throws {
        guard let configuration = header.transferDetector, let mean = header.mean, let std = header.std,
            mean.count == 3, std.count == 3
        else {
            throw ClassificationError.invalid("the transfer detector lacks its configuration or normalisation")
        }
        self.header = header
        self.configuration = configuration
        backbone = try LiteBackbone(
            tensors: tensors, blocks: configuration.blocks, fineBlocks: configuration.fineBlocks)
        guard header.inputWidth == header.inputHeight, header.inputWidth % backbone.deepestStride == 0 else {
            throw ClassificationError.invalid(
                "input size \(header.inputWidth) is not a multiple of the feature map's stride \(backbone.deepestStride)"
            )
        }
        self.mean = try Tensor(mean, shape: [1, 3, 1, 1])
        deviation = try Tensor(std, shape: [1, 3, 1, 1])
        head = Parameters(seed: seed)
        try Layers.conv(head, "neck", in: backbone.channels, out: configuration.neckWidth, kernel: 3, bias: true)
        let outputs = configuration.anchors.count * (5 + header.labels.count)
        try Layers.conv(head, "detect", in: configuration.neckWidth, out: outputs, kernel: 1, bias: true)
        try Self.startObjectnessLow(head, outputs: outputs, classes: header.labels.count)
    }

    static func isHead(_ name: String) -> Bool { name.hasPrefix("neck.") || name.hasPrefix("detect.") }

    /// The frozen backbone's feature maps [N, channels, g, g] of letterboxed inputs [N, 3, side, side] in [0, 1].
    func featureMap(_ x: Tensor) throws -> Tensor {
        try backbone.module.forward(try (x - mean) / deviation)
    }

    /// The feature maps of CHW inputs in [0, 1] at the input size, in batches of 8.
    func featureMaps(_ inputs: [[Float]]) throws -> Tensor {
        let side = header.inputWidth
        var maps: [Tensor] = []
        for start in stride(from: 0, to: inputs.count, by: 8) {
            let chunk = inputs[start..<min(inputs.count, start + 8)]
            maps.append(try featureMap(Tensor(Array(chunk.joined()), shape: [chunk.count, 3, side, side])))
        }
        return maps.count == 1 ? maps[0] : try Tensor.cat(maps, dim: 0)
    }

    /// The head's raw outputs [N, anchors, g, g, 5 + classes] on feature maps.
    func predict(_ map: Tensor) throws -> Tensor {
        let neck = try Layers.applyConv(head, "neck", map, padding: 1).relu()
        return try cells(try Layers.applyConv(head, "detect", neck, padding: 0))
    }

    func forward(_ x: Tensor, training: Bool) throws -> Tensor { try predict(try featureMap(x)) }

    /// Labelled boxes in the image's pixels (origin top-left), after the threshold, the label filter and NMS.
    public func detect(
        _ image: RGBImage, confidenceThreshold: Double = 0.25, iouThreshold: Double = 0.45,
        maximum: Int = 100, labels only: Set<String> = []
    ) throws -> [Detection] {
        try gridDetections(
            image, confidenceThreshold: confidenceThreshold, iouThreshold: iouThreshold, maximum: maximum, labels: only)
    }

    /// What the model file stores: the backbone's tensors, then the head's.
    func tensors() throws -> [NamedArray] { backbone.tensors + (try head.export()) }
}

/// EfficientNet-Lite0 from its stem to a block, run by libtorch as a TorchScript module compiled from source over
/// the network's own tensors: the traced feature print answers only its pooled features, and a detector needs a
/// feature map from inside the network. Layer for layer what `efficientnet-lite-pytorch` computes (TensorFlow's
/// "same" padding, batch norm with epsilon 1e-3 on its running statistics, ReLU6, the skip of stride-1 blocks
/// whose channels do not change), as `ONNXExport`'s writer of the same network does. With `fineBlocks` its output
/// is the map after that many blocks and the last block's map enlarged to it (nearest, as YOLOv3's and FPN's
/// upsampling), side by side in channels.
struct LiteBackbone {
    let module: ScriptModule
    let tensors: [NamedArray]
    let channels: Int
    /// The output map's stride.
    let stride: Int
    /// The last block's stride: what the input must be a multiple of.
    let deepestStride: Int

    /// How many blocks end at `stride` (the stem halves; `liteBlockStrides` the rest), the last such block counted.
    static func blocks(forStride target: Int) -> Int? {
        var stride = 2, last: Int?
        for (index, step) in ONNXExport.liteBlockStrides.enumerated() {
            stride *= step
            if stride == target { last = index + 1 }
        }
        return last
    }

    /// The network's tensors that run up to `blocks`: the stem, its batch norm and blocks 0..<blocks.
    static func kept(_ network: [NamedArray], blocks: Int) -> [NamedArray] {
        network.filter { entry in
            if entry.name.hasPrefix("_conv_stem.") || entry.name.hasPrefix("_bn0.") { return true }
            let parts = entry.name.split(separator: ".")
            guard parts.count > 2, parts[0] == "_blocks", let block = Int(parts[1]) else { return false }
            return block < blocks
        }
    }

    static let helpers = """
        def same(self, x, w, stride: int, groups: int):
            k = w.size(2)
            h = x.size(2)
            v = x.size(3)
            ph = max(((h + stride - 1) // stride - 1) * stride + k - h, 0)
            pw = max(((v + stride - 1) // stride - 1) * stride + k - v, 0)
            x = torch.constant_pad_nd(x, [pw // 2, pw - pw // 2, ph // 2, ph - ph // 2], 0.0)
            return torch.conv2d(x, w, None, [stride, stride], [0, 0], [1, 1], groups)

        def bn(self, x, w, b, m, v):
            return torch.batch_norm(x, w, b, m, v, False, 0.0, \(ONNXExport.liteBatchNormEpsilon), False)

        """

    init(tensors: [NamedArray], blocks: Int, fineBlocks: Int? = nil) throws {
        guard (1...ONNXExport.liteBlockStrides.count).contains(blocks) else {
            throw ClassificationError.invalid(
                "EfficientNet-Lite0 has \(ONNXExport.liteBlockStrides.count) blocks (asked for \(blocks))")
        }
        if let fineBlocks, !(1..<blocks).contains(fineBlocks) {
            throw ClassificationError.invalid(
                "the fine map's block (\(fineBlocks)) must come before the last (\(blocks))")
        }
        let byName = Dictionary(tensors.map { ($0.name, $0) }, uniquingKeysWith: { a, _ in a })
        var parameters: [(name: String, value: Tensor)] = []
        /// The parameter holding a tensor, as the source names it.
        func use(_ name: String) throws -> String {
            guard let array = byName[name] else {
                throw ClassificationError.invalid("the transfer detector's backbone has no tensor \(name)")
            }
            parameters.append(("t\(parameters.count)", try Tensor(array.values, shape: array.shape)))
            return "self.t\(parameters.count - 1)"
        }
        func outputs(_ name: String) throws -> Int {
            guard let shape = byName[name]?.shape, shape.count == 4 else {
                throw ClassificationError.invalid("the transfer detector's backbone has no convolution \(name)")
            }
            return shape[0]
        }
        func conv(_ x: String, _ layer: String, _ bn: String, stride: Int, depthwise: Bool = false, relu6: Bool = true)
            throws -> String
        {
            let groups = depthwise ? try outputs("\(layer).weight") : 1
            let normed =
                "self.bn(self.same(\(x), \(try use("\(layer).weight")), \(stride), \(groups)), "
                + (try ["weight", "bias", "running_mean", "running_var"].map { try use("\(bn).\($0)") }).joined(
                    separator: ", ") + ")"
            return relu6 ? "torch.clamp(\(normed), 0.0, 6.0)" : normed
        }
        var lines = ["def forward(self, x):", "    x = \(try conv("x", "_conv_stem", "_bn0", stride: 2))"]
        var channels = try outputs("_conv_stem.weight"), stride = 2
        var fine: (channels: Int, stride: Int)?
        for (index, blockStride) in ONNXExport.liteBlockStrides.prefix(blocks).enumerated() {
            if index == fineBlocks {
                lines.append("    fine = x")
                fine = (channels, stride)
            }
            let block = "_blocks.\(index)"
            var y = "x"
            if byName["\(block)._expand_conv.weight"] != nil {
                lines.append("    y = \(try conv(y, "\(block)._expand_conv", "\(block)._bn0", stride: 1))")
                y = "y"
            }
            lines.append(
                "    y = \(try conv(y, "\(block)._depthwise_conv", "\(block)._bn1", stride: blockStride, depthwise: true))"
            )
            lines.append("    y = \(try conv("y", "\(block)._project_conv", "\(block)._bn2", stride: 1, relu6: false))")
            let out = try outputs("\(block)._project_conv.weight")
            lines.append(blockStride == 1 && out == channels ? "    x = y + x" : "    x = y")
            channels = out
            stride *= blockStride
        }
        if let fine {
            let factor = stride / fine.stride
            lines.append(
                "    return torch.cat([fine, x.repeat_interleave(\(factor), 2).repeat_interleave(\(factor), 3)], 1)")
        } else {
            lines.append("    return x")
        }
        guard parameters.count == tensors.count else {
            throw ClassificationError.invalid(
                "the transfer detector's backbone has \(tensors.count) tensors; its \(blocks) blocks use \(parameters.count)"
            )
        }
        do {
            module = try ScriptModule(
                bytes: try ScriptModule.compile(
                    source: Self.helpers + lines.joined(separator: "\n") + "\n",
                    parameters: parameters))
        } catch let error as TorchError {
            throw ClassificationError.invalid("the transfer detector's backbone does not compile: \(error.message)")
        }
        self.tensors = tensors
        self.channels = channels + (fine?.channels ?? 0)
        self.stride = fine?.stride ?? stride
        deepestStride = stride
    }
}
