import Foundation
import Torch

/// A model as an ONNX file, to run where the service does not (a phone, onnxruntime). The graph is written from our
/// own architecture, layer by layer as `ResidualNetwork.forward` computes it, with the trained tensors as float
/// initializers; what the graph cannot say — labels, the input's preprocessing — goes in the model's metadata_props.
///
/// Exported: `cnn` classifiers, `yolo` detectors, `transfer` classifiers (EfficientNet-Lite0's graph written from
/// the feature print module's own tensors, then the head), `transfer` detectors (the same writer up to their
/// feature map, then the yolo head), and imported ONNX models (their own graph, as imported).
/// Refused with FAILED_PRECONDITION, naming these: `features` (the HOG extractor is not written as ONNX operators),
/// TorchScript imports (an arbitrary module's graph is not known here) and transfer models whose network was
/// fine-tuned (their changed layers are not the module's).
public enum ONNXExport {
    /// The graph's input and output names.
    public static let inputName = "image"
    /// A classifier's output; a detector's is "boxes".
    static func outputName(_ kind: ModelHeader.Kind) -> String { kind == .classifier ? "probabilities" : "boxes" }

    public static func export(_ file: ModelFile, name: String) throws -> [UInt8] {
        let header = file.header
        if header.cropClassifier != nil {
            // One graph would give the detector's own labels, not the crop classifier's the service answers with.
            throw ClassificationError(
                .failedPrecondition,
                """
                model \(name) labels its boxes with a classifier of their crops, which one ONNX graph does not hold; \
                a detector trained with --crop-classifier false exports
                """)
        }
        switch (header.kind, header.algorithm) {
        case (_, "onnx"):
            guard let graph = file.script else {
                throw ClassificationError.invalid("the onnx model \(name) has no graph")
            }
            return graph
        case (.classifier, "cnn"):
            return try residualClassifier(file, name: name)
        case (.detector, "yolo"):
            return try yoloDetector(file, name: name)
        case (.classifier, "transfer"):
            return try transferClassifier(file, name: name)
        case (.detector, "transfer"):
            return try transferDetector(file, name: name)
        default:
            throw ClassificationError(
                .failedPrecondition,
                """
                model \(name) is a \(header.algorithm) \(header.kind.rawValue); ONNX export supports cnn classifiers, yolo \
                and transfer detectors, transfer classifiers and imported ONNX models (features and torchscript models are not exported as ONNX)
                """)
        }
    }

    /// What an ONNX model this service exported says about itself, for its import: labels, input size, kind, the
    /// detector's layout and the normalisation; nil for any other ONNX file (its importer gives them).
    public struct Described: Sendable, Equatable {
        public var labels: [String]
        public var width: Int
        public var height: Int
        public var kind: ModelHeader.Kind
        public var layout: String?
        public var mean: [Float]?
        public var std: [Float]?
    }

    /// Where an ONNX model to import says one of its tensors keeps its data outside the file, or nil (`ONNXWire`).
    public static func externalDataLocation(_ bytes: [UInt8]) -> String? { ONNXWire.externalDataLocation(bytes) }

    public static func described(_ bytes: [UInt8]) -> Described? {
        let entries = ONNXWire.metadata(bytes)
        guard entries["menagerie.model"] != nil, let json = entries["labels"],
            let labels = try? JSONDecoder().decode([String].self, from: Data(json.utf8)),
            let width = entries["input_width"].flatMap({ Int($0) }),
            let height = entries["input_height"].flatMap({ Int($0) }),
            let kind = entries["menagerie.kind"].flatMap({ ModelHeader.Kind(rawValue: $0) })
        else { return nil }
        func floats(_ key: String) -> [Float]? {
            entries[key].map { $0.split(separator: ",").compactMap { Float($0) } }
        }
        return Described(
            labels: labels, width: width, height: height, kind: kind, layout: entries["layout"],
            mean: floats("input_mean"), std: floats("input_std"))
    }

    /// What metadata_props says about the input and output, so that a phone app can feed the graph as the service does.
    static func metadata(_ header: ModelHeader, name: String) throws -> [(String, String)] {
        let labels = String(decoding: try JSONEncoder().encode(header.labels), as: UTF8.self)
        // A detector always letterboxes (`Detector.detect`), whatever its header says.
        let scaling = header.kind == .detector ? Scaling.fit : header.scaling
        var entries: [(String, String)] = [
            ("menagerie.model", name),
            ("menagerie.kind", header.kind.rawValue),
            ("menagerie.algorithm", header.algorithm),
            ("labels", labels),
            ("input_width", String(header.inputWidth)),
            ("input_height", String(header.inputHeight)),
            ("input_layout", "NCHW float32, RGB"),
            ("input_scale", "1/255"),
            ("input_resize", scaling.rawValue),
            ("input_resize_doc", resizeDoc(scaling)),
        ]
        if header.kind == .classifier {
            entries.append(
                ("output", "probabilities: [1, \(header.labels.count)] softmax probabilities in labels order"))
        } else {
            entries.append(
                (
                    "output",
                    "boxes: [1, N, 5 + \(header.labels.count)] YOLOv5 layout (centre x, y, width, height in input pixels, objectness, class probabilities); no NMS"
                ))
            entries.append(("layout", "yolov5"))
            // The threshold the service answers at by default, so an app's boxes match Detect's.
            entries.append(
                (
                    "confidence_threshold",
                    String(DetectorEvaluation.confidence(for: header))
                ))
        }
        let normalised = header.mean != nil && header.std != nil
        if let mean = header.mean, let std = header.std {
            entries.append(("input_mean", mean.map { String($0) }.joined(separator: ",")))
            entries.append(("input_std", std.map { String($0) }.joined(separator: ",")))
            entries.append(
                ("input_normalisation", "per channel (x - input_mean) / input_std on x = pixel / 255, after resizing"))
        }
        entries.append(("input_alpha", alphaDoc))
        entries.append(
            (
                "input_orientation",
                "a JPEG is turned upright by its EXIF orientation (1-8) before anything else; other formats are taken as stored"
            ))
        entries.append(("input_steps", steps(header, scaling: scaling, normalised: normalised)))
        return entries
    }

    /// How the service flattens transparency (`RGBImage.decode`), which tools do differently: PIL's convert("RGB")
    /// drops the alpha, a paste onto black composites in sRGB values (white at alpha 128 gives 128, libpng's 186).
    static let alphaDoc =
        "transparency is composited onto black: a PNG with alpha (or a palette's tRNS) as libpng's simplified API "
        + "does, in linear light (colour to linear, times alpha, back to sRGB: white at alpha 128 becomes 186, not 128; "
        + "about 255 * (alpha * (c / 255)^2.2)^(1 / 2.2)); a WebP's or HEIC's alpha is dropped (the stored colour kept); JPEG has none"

    /// Every step from the photo's bytes to the graph's input, in order, as a JSON array of sentences: what an app
    /// must do to be answered as the service answers.
    static func steps(_ header: ModelHeader, scaling: Scaling, normalised: Bool) -> String {
        var steps = [
            // Classify and Detect both decode reduced (`Preprocessing.decodeSize`, `PhotoDetection`).
            "decode to 8-bit RGB (a JPEG may be decoded at 1/2, 1/4 or 1/8 scale by libjpeg's DCT scaling while it stays at least twice, on each side, what the resize below keeps of it: a 4000x3000 photo fitted into 224x224 keeps 224x168, so libjpeg decodes 1/8, 500x375\(header.kind == .detector ? "; boxes are mapped back to the photo's own pixels" : ""); decoding whole then resizing is within rounding of it)",
            "turn upright by EXIF orientation (JPEG; input_orientation)",
            "flatten transparency onto black (input_alpha)",
            "resize to input_width x input_height: \(resizeDoc(scaling)) (libtorch's antialiased bilinear, as PIL's Image.resize with BILINEAR)",
            "x = pixel / 255 (input_scale)",
        ]
        if normalised { steps.append("x = (x - input_mean) / input_std per channel (input_normalisation)") }
        steps.append("lay out as [1, 3, input_height, input_width] float32, channels R, G, B (input_layout)")
        // A JSON array, as `labels` is: the steps' own text has commas and semicolons.
        let encoder = JSONEncoder()
        encoder.outputFormatting = .withoutEscapingSlashes
        return String(
            decoding: (try? encoder.encode(steps.enumerated().map { "\($0.offset + 1). \($0.element)" }))
                ?? Data("[]".utf8), as: UTF8.self)
    }

    static func resizeDoc(_ scaling: Scaling) -> String {
        switch scaling {
        case .fit:
            "scale to fit inside the input keeping the aspect ratio (antialiased bilinear), centred, the rest black"
        case .fill: "stretch to the input size (antialiased bilinear)"
        case .centerCrop: "scale to cover the input keeping the aspect ratio (antialiased bilinear), cut the centre"
        }
    }

    /// A graph being written: its nodes and the model's tensors they have used (every one must be, once).
    struct Graph {
        let name: String
        let tensors: [String: NamedArray]
        var nodes: [ONNXWire.Message] = []
        var used: Set<String> = []
        var constants: [ONNXWire.Message] = []
        /// Whether the constant 6 every ReLU6 shares is written yet.
        var hasReLU6Bounds = false

        init(_ file: ModelFile, name: String) {
            self.name = name
            tensors = Dictionary(file.tensors.map { ($0.name, $0) }, uniquingKeysWith: { a, _ in a })
        }

        mutating func tensor(_ key: String) throws -> String {
            guard tensors[key] != nil else { throw ClassificationError.invalid("model \(name) has no tensor \(key)") }
            used.insert(key)
            return key
        }

        @discardableResult
        mutating func node(
            _ op: String, _ inputs: [String], _ output: String, _ attributes: [(String, ONNXWire.Attribute)] = []
        ) -> String {
            nodes.append(ONNXWire.node(op, inputs, output, attributes))
            return output
        }

        mutating func floatConstant(_ key: String, shape: [Int], _ values: [Float]) -> String {
            constants.append(ONNXWire.tensor(key, shape: shape, values: values))
            return key
        }

        mutating func int64Constant(_ key: String, _ values: [Int]) -> String {
            constants.append(ONNXWire.int64Tensor(key, values))
            return key
        }

        mutating func conv(_ layer: String, _ x: String, stride: Int, kernel: Int, padding: Int) throws -> String {
            var inputs = [x, try tensor("\(layer).weight")]
            if tensors["\(layer).bias"] != nil { inputs.append(try tensor("\(layer).bias")) }
            return node(
                "Conv", inputs, "\(layer).out",
                [
                    ("kernel_shape", .ints([kernel, kernel])), ("strides", .ints([stride, stride])),
                    ("pads", .ints([padding, padding, padding, padding])),
                ])
        }

        mutating func batchNorm(_ layer: String, _ x: String, epsilon: Float = 1e-5) throws -> String {
            var inputs = [x]
            for part in ["weight", "bias", "running_mean", "running_var"] {
                inputs.append(try tensor("\(layer).\(part)"))
            }
            return node("BatchNormalization", inputs, "\(layer).out", [("epsilon", .float(epsilon))])
        }

        mutating func relu(_ x: String) -> String { node("Relu", [x], "\(x).relu") }

        /// `ResidualNetwork.featureMap`, layer for layer.
        mutating func featureMap(_ configuration: ResidualNetworkConfiguration, _ x: String) throws -> String {
            let stem = try conv("stem", x, stride: configuration.stemStride ?? 1, kernel: 3, padding: 1)
            var h = relu(try batchNorm("stem.bn", stem))
            for stage in configuration.widths.indices {
                let layer = "stage\(stage)"
                let stride = stage == 0 ? configuration.firstStageStride ?? 1 : 2
                let conv1 = try conv("\(layer).conv1", h, stride: stride, kernel: 3, padding: 1)
                let y1 = relu(try batchNorm("\(layer).bn1", conv1))
                let conv2 = try conv("\(layer).conv2", y1, stride: 1, kernel: 3, padding: 1)
                let y = try batchNorm("\(layer).bn2", conv2)
                var shortcut = h
                if tensors["\(layer).shortcut.weight"] != nil {
                    let projected = try conv("\(layer).shortcut", h, stride: stride, kernel: 1, padding: 0)
                    shortcut = try batchNorm("\(layer).shortcut.bn", projected)
                }
                let sum = node("Add", [y, shortcut], "\(layer).sum")
                h = relu(sum)
            }
            return h
        }

        /// The model: every stored tensor an initializer (after checking the graph used them all), then the constants.
        func model(
            _ file: ModelFile, channels: Int, output: [Int], outputDoc: String, doc: String,
            inputDoc: String = "RGB pixels / 255, resized as metadata_props input_resize says"
        ) throws -> [UInt8] {
            guard used.count == tensors.count else {
                throw ClassificationError.invalid(
                    "model \(name) has tensors its network does not use: \(Set(tensors.keys).subtracting(used).sorted())"
                )
            }
            let header = file.header
            return ONNXWire.model(
                name: name, doc: doc, nodes: nodes,
                initializers: file.tensors.map { ONNXWire.tensor($0.name, shape: $0.shape, values: $0.values) }
                    + constants,
                inputs: [
                    ONNXWire.valueInfo(
                        inputName, shape: [1, channels, header.inputHeight, header.inputWidth],
                        doc: inputDoc)
                ],
                outputs: [ONNXWire.valueInfo(outputName(header.kind), shape: output, doc: outputDoc)],
                metadata: try metadata(header, name: name))
        }
    }

    /// The `cnn` classifier (`ResidualNetwork.forward`): Conv/BatchNormalization/Relu blocks with residual Adds,
    /// GlobalAveragePool, Gemm and Softmax. Batch normalisation stays a node (epsilon 1e-5, libtorch's), so the
    /// arithmetic is the service's own.
    static func residualClassifier(_ file: ModelFile, name: String) throws -> [UInt8] {
        let header = file.header
        guard let configuration = header.network, configuration.classes == header.labels.count else {
            throw ClassificationError.invalid("the cnn model \(name) has no network configuration matching its labels")
        }
        var graph = Graph(file, name: name)
        let features = try graph.featureMap(configuration, inputName)
        graph.node("GlobalAveragePool", [features], "pooled")
        graph.node("Flatten", ["pooled"], "flat", [("axis", .int(1))])
        let head = [try graph.tensor("head.weight"), try graph.tensor("head.bias")]
        graph.node("Gemm", ["flat"] + head, "logits", [("transB", .int(1))])
        graph.node("Softmax", ["logits"], outputName(.classifier), [("axis", .int(1))])
        return try graph.model(
            file, channels: configuration.channels, output: [1, configuration.classes],
            outputDoc: "probabilities in labels order",
            doc: "Menagerie cnn classifier \(name): labels and preprocessing in metadata_props")
    }

    /// The `yolo` detector (`Detector.forward` and `decode`) ending in Ultralytics' YOLOv5 layout `[1, N, 5 + classes]`:
    /// per cell and anchor the box centre and size in input pixels, the objectness (sigmoid) and the class
    /// probabilities (softmax), so `model import --format onnx --layout yolov5` and YOLOv5 apps read it as it is.
    /// No NMS in the graph: apps run their own, as they do on Ultralytics' exports.
    static func yoloDetector(_ file: ModelFile, name: String) throws -> [UInt8] {
        let header = file.header
        guard let configuration = header.detector, header.inputWidth == header.inputHeight else {
            throw ClassificationError.invalid("the yolo model \(name) has no detector configuration")
        }
        let backbone = configuration.backbone
        let anchors = configuration.anchors.count, classes = header.labels.count, fields = 5 + classes
        let stride = (backbone.stemStride ?? 1) * (backbone.firstStageStride ?? 1) * (1 << (backbone.widths.count - 1))
        let grid = header.inputWidth / stride, boxes = anchors * grid * grid
        var graph = Graph(file, name: name)
        let features = try graph.featureMap(backbone, inputName)
        // The backbone's classifier head is stored with the detector (`ResidualNetwork` makes one) but never runs.
        for unused in ["head.weight", "head.bias"] where graph.tensors[unused] != nil { graph.used.insert(unused) }
        let raw = try graph.conv("detect", features, stride: 1, kernel: 1, padding: 0)
        graph.yoloBoxes(raw, anchors: configuration.anchors, grid: grid, stride: stride, classes: classes)
        return try graph.model(
            file, channels: backbone.channels, output: [1, boxes, fields],
            outputDoc:
                "YOLOv5 layout: per box centre x, y, width, height in input pixels, objectness, class probabilities in labels order",
            doc: "Menagerie yolo detector \(name): labels and preprocessing in metadata_props; no NMS in the graph")
    }
}

extension ONNXExport.Graph {
    /// A grid detector's detection layer output `raw` [1, A·(5+C), g, g] decoded as `GridDetector.decode` does, into
    /// the output "boxes" [1, N, 5 + C] (Ultralytics' YOLOv5 layout).
    mutating func yoloBoxes(_ raw: String, anchors configuration: [[Double]], grid: Int, stride: Int, classes: Int) {
        let anchors = configuration.count, fields = 5 + classes, boxes = anchors * grid * grid
        var graph = self
        defer { self = graph }
        // [1, A·(5+C), g, g] → [1, A, 5+C, g, g] → [1, A, g, g, 5+C] → [1, N, 5+C], N in (anchor, row, column) order.
        let splitShape = graph.int64Constant("split_shape", [1, anchors, fields, grid, grid])
        graph.node("Reshape", [raw, splitShape], "split")
        graph.node("Transpose", ["split"], "cells", [("perm", .ints([0, 1, 3, 4, 2]))])
        let rowsShape = graph.int64Constant("rows_shape", [1, boxes, fields])
        graph.node("Reshape", ["cells", rowsShape], "rows")
        func slice(_ output: String, from: Int, to: Int) -> String {
            let bounds = [
                graph.int64Constant("\(output)_start", [from]), graph.int64Constant("\(output)_end", [to]),
                graph.int64Constant("\(output)_axis", [2]),
            ]
            return graph.node("Slice", ["rows"] + bounds, output)
        }
        // Centre: (cell + sigmoid(offset)) · stride; size: anchor · exp(min(4, log-scale)); as `Detector.decode`.
        var cells: [Float] = [], sizes: [Float] = []
        for anchor in 0..<anchors {
            for gy in 0..<grid {
                for gx in 0..<grid {
                    cells += [Float(gx), Float(gy)]
                    sizes += configuration[anchor].map { Float($0) }
                }
            }
        }
        let offset = slice("offset", from: 0, to: 2), scale = slice("scale", from: 2, to: 4)
        let objectness = slice("objectness_logit", from: 4, to: 5),
            classLogits = slice("class_logits", from: 5, to: fields)
        let cell = graph.floatConstant("cell", shape: [1, boxes, 2], cells),
            anchor = graph.floatConstant("anchor", shape: [1, boxes, 2], sizes)
        let strideConstant = graph.floatConstant("stride", shape: [1], [Float(stride)]),
            limit = graph.floatConstant("scale_limit", shape: [1], [-4])
        graph.node("Sigmoid", [offset], "offset_unit")
        graph.node("Add", ["offset_unit", cell], "centre_cells")
        graph.node("Mul", ["centre_cells", strideConstant], "centre")
        // min(s, 4) as s − relu(s − 4): OpenCV 4.6's DNN module cannot read Min with a constant.
        graph.node("Add", [scale, limit], "scale_over")
        graph.node("Relu", ["scale_over"], "scale_excess")
        graph.node("Sub", [scale, "scale_excess"], "scale_clipped")
        graph.node("Exp", ["scale_clipped"], "scale_exp")
        graph.node("Mul", ["scale_exp", anchor], "size")
        graph.node("Sigmoid", [objectness], "objectness")
        graph.node("Softmax", [classLogits], "class_probabilities", [("axis", .int(2))])
        graph.node(
            "Concat", ["centre", "size", "objectness", "class_probabilities"], ONNXExport.outputName(.detector),
            [("axis", .int(2))])
    }
}

// MARK: - transfer classifiers: EfficientNet-Lite0 and the head

extension ONNXExport {
    /// EfficientNet-Lite0's blocks as `efficientnet-lite-pytorch` builds them (width and depth 1.0, stem and head not
    /// scaled): the stride of each of the 16 MBConv blocks, the one thing about the network its tensors do not say
    /// (kernels, expansion and channels are read from the tensors' shapes).
    static let liteBlockStrides = [1, 2, 1, 2, 1, 2, 1, 1, 1, 1, 1, 2, 1, 1, 1, 1]
    /// The package's batch_norm_epsilon for the Lite models (TensorFlow's 1e-3; traced into the module's code, not its
    /// tensors).
    static let liteBatchNormEpsilon: Float = 1e-3

    /// A `transfer` classifier as one graph: EfficientNet-Lite0 — Conv (TensorFlow's "same" padding, asymmetric
    /// where the size is odd, as the package's Conv2dStaticSamePadding pads), BatchNormalization, ReLU6 as Relu(x) − Relu(x − 6),
    /// depthwise Convs as `group` = channels, residual Adds — from the feature print module's own parameters and
    /// buffers, its head's activations averaged (GlobalAveragePool), then the service's head: (f − mean) / deviation,
    /// Gemm, Softmax. The input is the service's: resized as `scaling` says, x = pixel / 255, (x − 127/255) / (128/255).
    static func transferClassifier(_ file: ModelFile, name: String) throws -> [UInt8] {
        let header = file.header
        // A fine-tuned model's module is its own tuned copy of the network (`FineTuning` saves it whole), so its layers
        // are read from it like the pretrained ones; tensors besides the head would be layers the module does not hold.
        let headNames: Set = ["mean", "deviation", "weight", "bias"]
        guard Set(file.tensors.map(\.name)) == headNames else {
            throw ClassificationError(
                .failedPrecondition,
                """
                model \(name) is a transfer classifier with tensors besides its linear head \
                (\(file.tensors.map(\.name).filter { !headNames.contains($0) }.sorted().joined(separator: ", "))); ONNX export \
                writes the pretrained EfficientNet-Lite0 with a trained head only
                """)
        }
        guard let script = file.script, header.featureMethod == "forward", let mean = header.mean, let std = header.std,
            mean.count == 3, std.count == 3
        else {
            throw ClassificationError.invalid(
                "the transfer model \(name) lacks its feature print module or its normalisation")
        }
        let head = try LinearHead(tensors: file.tensors, classes: header.labels.count, model: "transfer")
        let network: [NamedArray]
        do {
            network = try liteTensors(try ScriptModule(bytes: script))
        } catch let error as TorchError {
            throw ClassificationError.invalid(
                "the transfer model \(name)'s feature print does not load: \(error.message)")
        }
        let tensors =
            network
            + (try head.tensors()).map { NamedArray(name: "head.\($0.name)", shape: $0.shape, values: $0.values) }
        var graph = Graph(ModelFile(header: header, tensors: tensors), name: name)
        let features = try graph.efficientNetLite(inputName, height: header.inputHeight, width: header.inputWidth)
        guard features.channels == head.width else {
            throw ClassificationError.invalid(
                "the transfer model \(name)'s network gives \(features.channels) features; its head takes \(head.width)"
            )
        }
        graph.node("GlobalAveragePool", [features.output], "pooled")
        graph.node("Flatten", ["pooled"], "features", [("axis", .int(1))])
        graph.node("Sub", ["features", try graph.tensor("head.mean")], "centred")
        graph.node("Div", ["centred", try graph.tensor("head.deviation")], "standardised")
        graph.node(
            "Gemm", ["standardised", try graph.tensor("head.weight"), try graph.tensor("head.bias")], "logits",
            [("transB", .int(1))])
        graph.node("Softmax", ["logits"], outputName(.classifier), [("axis", .int(1))])
        return try graph.model(
            ModelFile(header: header, tensors: tensors), channels: 3, output: [1, header.labels.count],
            outputDoc: "probabilities in labels order",
            doc:
                "Menagerie transfer classifier \(name): ImageNet-pretrained EfficientNet-Lite0 (efficientnet-lite-pytorch 0.1.0 weights, Apache-2.0) and a linear head; labels and preprocessing in metadata_props",
            inputDoc:
                "RGB pixels p as (p - 127) / 128 ((p / 255 - input_mean) / input_std), resized as metadata_props input_resize says"
        )
    }

    /// The module's float tensors the network runs on, named without the wrapper's prefix (`_blocks.3._bn1.weight`):
    /// BatchNorm's step counters and the unused 1,000-class layer (`_fc`) are left out.
    static func liteTensors(_ module: ScriptModule) throws -> [NamedArray] {
        let all = try module.namedTensors()
        guard let stem = all.first(where: { $0.name == "_conv_stem.weight" || $0.name.hasSuffix("._conv_stem.weight") })
        else {
            throw ClassificationError(
                .failedPrecondition,
                "the transfer model's feature print is not EfficientNet-Lite0 (its module has no _conv_stem), the one network ONNX export writes"
            )
        }
        let prefix = String(stem.name.dropLast("_conv_stem.weight".count))
        return try all.compactMap { entry in
            guard entry.name.hasPrefix(prefix) else { return nil }
            let name = String(entry.name.dropFirst(prefix.count))
            if name.hasSuffix("num_batches_tracked") || name.hasPrefix("_fc.") { return nil }
            return NamedArray(name: name, shape: entry.tensor.shape, values: try entry.tensor.floats())
        }
    }
}

extension ONNXExport.Graph {
    /// TensorFlow's "same" padding of one axis: the output is ⌈size / stride⌉ and the padding that needs is split
    /// with the smaller half first.
    static func samePadding(size: Int, kernel: Int, stride: Int) -> (begin: Int, end: Int, output: Int) {
        let output = (size + stride - 1) / stride
        let total = max((output - 1) * stride + kernel - size, 0)
        return (total / 2, total - total / 2, output)
    }

    /// A convolution without bias with "same" padding (kernel and channels from its weight's shape); `depthwise`
    /// makes one group per channel.
    mutating func sameConv(
        _ layer: String, _ x: String, height: inout Int, width: inout Int, stride: Int,
        depthwise: Bool = false
    ) throws -> (output: String, channels: Int) {
        let key = try tensor("\(layer).weight")
        let shape = tensors[key]!.shape
        guard shape.count == 4, shape[2] == shape[3] else {
            throw ClassificationError.invalid("\(layer).weight has shape \(shape), not a square convolution's")
        }
        let kernel = shape[2]
        let vertical = Self.samePadding(size: height, kernel: kernel, stride: stride)
        let horizontal = Self.samePadding(size: width, kernel: kernel, stride: stride)
        height = vertical.output
        width = horizontal.output
        var attributes: [(String, ONNXWire.Attribute)] = [
            ("kernel_shape", .ints([kernel, kernel])), ("strides", .ints([stride, stride])),
            ("pads", .ints([vertical.begin, horizontal.begin, vertical.end, horizontal.end])),
        ]
        if depthwise {
            guard shape[1] == 1 else {
                throw ClassificationError.invalid("\(layer).weight has shape \(shape), not a depthwise convolution's")
            }
            attributes.append(("group", .int(shape[0])))
        }
        return (node("Conv", [x, key], "\(layer).out", attributes), shape[0])
    }

    /// ReLU6 as Relu(x) − Relu(x − 6), which equals min(max(x, 0), 6) for every x: opset 13's Clip takes its bounds as
    /// inputs, and OpenCV 4.6's importer (what `model import --format onnx` runs) reads them only as attributes.
    mutating func relu6(_ x: String) -> String {
        if !hasReLU6Bounds {
            hasReLU6Bounds = true
            _ = floatConstant("relu6.six", shape: [1], [6])
        }
        let positive = node("Relu", [x], "\(x).relu")
        node("Sub", [x, "relu6.six"], "\(x).over6")
        let excess = node("Relu", ["\(x).over6"], "\(x).excess")
        return node("Sub", [positive, excess], "\(x).relu6")
    }

    /// EfficientNet-Lite0 up to its head's activations (`extract_features`), layer for layer as the package runs it;
    /// with `blocks`, only the stem and that many blocks (a transfer detector's backbone, `LiteBackbone`); with
    /// `fineBlocks` too, `fine` is the map after that many blocks.
    mutating func efficientNetLite(
        _ x: String, height: Int, width: Int, blocks count: Int? = nil, fineBlocks: Int? = nil
    ) throws
        -> (output: String, channels: Int, fine: (output: String, channels: Int)?)
    {
        var height = height, width = width
        let epsilon = ONNXExport.liteBatchNormEpsilon
        let stem = try sameConv("_conv_stem", x, height: &height, width: &width, stride: 2)
        var h = relu6(try batchNorm("_bn0", stem.output, epsilon: epsilon))
        var channels = stem.channels
        let blocks = Set(
            tensors.keys.compactMap { key -> Int? in
                let parts = key.split(separator: ".")
                return parts.count > 2 && parts[0] == "_blocks" ? Int(parts[1]) : nil
            })
        let expected = count ?? ONNXExport.liteBlockStrides.count
        guard blocks == Set(0..<expected), expected <= ONNXExport.liteBlockStrides.count else {
            throw ClassificationError(
                .failedPrecondition,
                "the transfer model's feature print is not EfficientNet-Lite0: its module has \(blocks.count) blocks, Lite0 \(expected)"
            )
        }
        var fine: (output: String, channels: Int)?
        for (index, stride) in ONNXExport.liteBlockStrides.prefix(expected).enumerated() {
            if index == fineBlocks { fine = (h, channels) }
            let block = "_blocks.\(index)"
            let input = h, inputChannels = channels
            var y = h
            if tensors["\(block)._expand_conv.weight"] != nil {
                let expanded = try sameConv("\(block)._expand_conv", y, height: &height, width: &width, stride: 1)
                y = relu6(try batchNorm("\(block)._bn0", expanded.output, epsilon: epsilon))
            }
            let depthwise = try sameConv(
                "\(block)._depthwise_conv", y, height: &height, width: &width, stride: stride, depthwise: true)
            y = relu6(try batchNorm("\(block)._bn1", depthwise.output, epsilon: epsilon))
            let projected = try sameConv("\(block)._project_conv", y, height: &height, width: &width, stride: 1)
            y = try batchNorm("\(block)._bn2", projected.output, epsilon: epsilon)
            channels = projected.channels
            // The package's skip: stride 1 and as many channels out as in (id_skip is set for every Lite block).
            if stride == 1 && inputChannels == channels { y = node("Add", [y, input], "\(block).sum") }
            h = y
        }
        if count != nil { return (h, channels, fine) }
        let head = try sameConv("_conv_head", h, height: &height, width: &width, stride: 1)
        return (relu6(try batchNorm("_bn1", head.output, epsilon: epsilon)), head.channels, nil)
    }
}

// MARK: - transfer detectors: EfficientNet-Lite0's first blocks and the yolo head

extension ONNXExport {
    /// A `transfer` detector (`TransferDetector`) as one graph: EfficientNet-Lite0's stem and first blocks from the
    /// detector's stored tensors, written as for a transfer classifier, then its head (3×3 Conv, Relu, the detection
    /// Conv) decoded into the YOLOv5 layout as a yolo detector's. The input is letterboxed and (p − 127) / 128.
    static func transferDetector(_ file: ModelFile, name: String) throws -> [UInt8] {
        let header = file.header
        guard let configuration = header.transferDetector, header.inputWidth == header.inputHeight, header.mean != nil,
            header.std != nil
        else {
            throw ClassificationError.invalid("the transfer detector \(name) has no configuration or normalisation")
        }
        var graph = Graph(file, name: name)
        let features = try graph.efficientNetLite(
            inputName, height: header.inputHeight, width: header.inputWidth, blocks: configuration.blocks,
            fineBlocks: configuration.fineBlocks)
        guard let deepest = Self.liteStride(blocks: configuration.blocks), header.inputWidth % deepest == 0 else {
            throw ClassificationError.invalid(
                "the transfer detector \(name)'s input is not a multiple of its feature map's stride")
        }
        var map = features.output, stride = deepest
        if let fineBlocks = configuration.fineBlocks {
            // The fine map beside the last block's, enlarged by repeating each cell (Resize, nearest: the output's
            // pixel i is the input's floor(i / factor), as LiteBackbone's repeat_interleave).
            guard let fineStride = Self.liteStride(blocks: fineBlocks), let fine = features.fine else {
                throw ClassificationError.invalid(
                    "the transfer detector \(name)'s fine map (after block \(fineBlocks)) is not in its backbone")
            }
            let factor = Float(deepest / fineStride)
            let scales = graph.floatConstant("upsample.scales", shape: [4], [1, 1, factor, factor])
            // No roi: an empty name is an optional input left out.
            let enlarged = graph.node(
                "Resize", [map, "", scales], "upsample",
                [
                    ("mode", .string("nearest")), ("coordinate_transformation_mode", .string("asymmetric")),
                    ("nearest_mode", .string("floor")),
                ])
            map = graph.node("Concat", [fine.output, enlarged], "pyramid", [("axis", .int(1))])
            stride = fineStride
        }
        let grid = header.inputWidth / stride, classes = header.labels.count
        let neck = try graph.conv("neck", map, stride: 1, kernel: 3, padding: 1)
        let activated = graph.relu(neck)
        let raw = try graph.conv("detect", activated, stride: 1, kernel: 1, padding: 0)
        graph.yoloBoxes(raw, anchors: configuration.anchors, grid: grid, stride: stride, classes: classes)
        return try graph.model(
            file, channels: 3, output: [1, configuration.anchors.count * grid * grid, 5 + classes],
            outputDoc:
                "YOLOv5 layout: per box centre x, y, width, height in input pixels, objectness, class probabilities in labels order",
            doc:
                "Menagerie transfer detector \(name): ImageNet-pretrained EfficientNet-Lite0's first \(configuration.blocks) blocks (efficientnet-lite-pytorch 0.1.0 weights, Apache-2.0)"
                + (configuration.fineBlocks.map {
                    ", the map after block \($0) joined by the last block's enlarged to it (stride \(stride))"
                } ?? "")
                + " and a yolo head; labels and preprocessing in metadata_props; no NMS in the graph",
            inputDoc:
                "RGB pixels p as (p - 127) / 128 ((p / 255 - input_mean) / input_std), letterboxed as metadata_props input_resize says"
        )
    }

    /// The stride of EfficientNet-Lite0's feature map after `blocks` blocks (the stem halves).
    static func liteStride(blocks: Int) -> Int? {
        guard (1...liteBlockStrides.count).contains(blocks) else { return nil }
        return liteBlockStrides.prefix(blocks).reduce(2, *)
    }
}
