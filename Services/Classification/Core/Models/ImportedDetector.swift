import OpenCVDNN

/// What the service asks of a detector: trained here (`Detector`) or imported (`ImportedDetector`).
public protocol ObjectDetector: AnyObject, Sendable {
    var header: ModelHeader { get }
    /// Labelled boxes in the image's pixels (origin top-left), after the threshold, the label filter and NMS.
    func detect(
        _ image: RGBImage, confidenceThreshold: Double, iouThreshold: Double, maximum: Int,
        labels only: Set<String>
    ) throws -> [Detection]
}

extension ObjectDetector {
    public func detect(
        _ image: RGBImage, confidenceThreshold: Double = 0.25, iouThreshold: Double = 0.45,
        maximum: Int = 100
    ) throws -> [Detection] {
        try detect(
            image, confidenceThreshold: confidenceThreshold, iouThreshold: iouThreshold, maximum: maximum, labels: [])
    }
}

public enum Detectors {
    /// The detector of a model file: a yolo or transfer detector trained here or an imported ONNX model.
    public static func load(_ file: ModelFile) throws -> any ObjectDetector {
        if let configuration = file.header.cropClassifier {
            guard let bytes = file.script, file.header.algorithm != "onnx" else {
                throw ClassificationError.invalid("the detector's crop classifier is missing")
            }
            var plain = file
            plain.script = nil
            plain.header.cropClassifier = nil
            return try ReclassifyingDetector(
                detector: load(plain), classifier: Classifier(ModelFile.decode(bytes)), configuration: configuration)
        }
        return switch file.header.algorithm {
        case "onnx": try ImportedDetector(file)
        case "transfer": try TransferDetector(file)
        default: try Detector(file)
        }
    }
}

/// An ONNX detector in one of Ultralytics' export layouts, run by OpenCV's DNN module on the letterboxed image:
/// YOLOv5 `[1, N, 5 + classes]` (centre x/y, width, height in input pixels, objectness, class scores) or YOLOv8
/// `[1, 4 + classes, N]` (the same without objectness, transposed). Boxes are mapped back to the image and
/// passed through per-class NMS.
public final class ImportedDetector: ObjectDetector, @unchecked Sendable {
    public let header: ModelHeader
    private let network: ONNXNetwork
    private let v8: Bool

    public init(_ file: ModelFile) throws {
        header = file.header
        guard header.kind == .detector, header.algorithm == "onnx", let bytes = file.script else {
            throw ClassificationError.invalid("not an imported ONNX detector")
        }
        switch header.layout {
        case "yolov5": v8 = false
        case "yolov8": v8 = true
        default: throw ClassificationError.invalid("an ONNX detector needs its layout: yolov5 or yolov8")
        }
        do { network = try ONNXNetwork(bytes: bytes) } catch let error as DNNError {
            throw ClassificationError.invalid("the ONNX model does not load: \(error.message)")
        }
    }

    public func detect(
        _ image: RGBImage, confidenceThreshold: Double, iouThreshold: Double, maximum: Int,
        labels only: Set<String>
    ) throws -> [Detection] {
        let (input, placement) = try Preprocessing.input(
            image, width: header.inputWidth, height: header.inputHeight, scaling: .fit)
        let output: (values: [Float], shape: [Int])
        do {
            output = try network.forward(
                header.normalised(input), shape: [1, 3, header.inputHeight, header.inputWidth])
        } catch let error as DNNError {
            throw ClassificationError.invalid("the ONNX model does not run: \(error.message)")
        }
        let found = try Self.decode(
            output.values, shape: output.shape, classes: header.labels.count, v8: v8,
            threshold: confidenceThreshold
        )
        .filter { only.isEmpty || only.contains(header.labels[$0.label]) }
        return Metrics.nonMaximumSuppression(found, iouThreshold: iouThreshold, limit: maximum).map { i in
            var d = found[i]
            let box = placement.toSource(d.box)
            let x0 = max(0, box.minX), y0 = max(0, box.minY)
            let x1 = min(Double(image.width), box.maxX), y1 = min(Double(image.height), box.maxY)
            d.box = Box(x: x0, y: y0, width: max(0, x1 - x0), height: max(0, y1 - y0))
            return d
        }
    }

    /// Candidate boxes (input pixels, top-left origin) at or above `threshold` from a raw Ultralytics output.
    static func decode(_ values: [Float], shape: [Int], classes: Int, v8: Bool, threshold: Double) throws -> [Detection]
    {
        guard shape.count >= 2, shape.dropLast(2).allSatisfy({ $0 == 1 }), values.count == shape.reduce(1, *) else {
            throw ClassificationError.invalid("the detector's output \(shape) is not [1, rows, columns]")
        }
        let rows = shape[shape.count - 2], columns = shape[shape.count - 1]
        let stride = v8 ? 4 + classes : 5 + classes
        let count = v8 ? columns : rows
        guard (v8 ? rows : columns) == stride else {
            throw ClassificationError.invalid(
                "the detector's output \(shape) does not fit the \(v8 ? "yolov8" : "yolov5") layout with \(classes) labels"
            )
        }
        func value(_ box: Int, _ field: Int) -> Double {
            Double(v8 ? values[field * columns + box] : values[box * columns + field])
        }
        var found: [Detection] = []
        for b in 0..<count {
            let objectness = v8 ? 1 : value(b, 4)
            let first = v8 ? 4 : 5
            var best = 0, score = -Double.infinity
            for c in 0..<classes where value(b, first + c) > score {
                score = value(b, first + c)
                best = c
            }
            let confidence = objectness * score
            guard confidence >= threshold, confidence > 0 else { continue }
            let w = value(b, 2), h = value(b, 3)
            guard w > 0, h > 0 else { continue }
            found.append(
                Detection(
                    label: best, confidence: min(1, confidence),
                    box: Box(centerX: value(b, 0), centerY: value(b, 1), width: w, height: h)))
        }
        return found
    }
}
