import Foundation
import Testing

@testable import ClassificationCore

/// Issue 26, models that run elsewhere: a trained cnn written as an ONNX graph gives the service's own probabilities
/// in onnxruntime (PyPI, installed by `compose/compose onnxruntime`) and through OpenCV's DNN module when imported back.
@Suite struct ONNXExportTests {
    /// Noise with one channel lifted: "red" or "green", learnable in a few epochs by a tiny network.
    static func tinted(_ seed: UInt64, red: Bool, width: Int = 16, height: Int = 16) -> RGBImage {
        var random = SeededRandom(seed: seed)
        var pixels = (0..<width * height * 3).map { _ in UInt8(random.next() % 128) }
        for i in 0..<width * height { pixels[3 * i + (red ? 0 : 1)] &+= 120 }
        return RGBImage(width: width, height: height, pixels: pixels)
    }

    static let trained: Result<ModelFile, Error> = Result {
        let images = (0..<24).map { tinted(UInt64($0), red: $0 % 2 == 0) }
        var options = ClassifierTrainingOptions()
        options.epochs = 10
        options.widths = [4, 8]
        options.validationFraction = 0
        return try ClassifierTrainer.train(
            try TrainingDefaultsTests.dataset(images, labels: ["red", "green"]), options: options)
    }

    /// Test photos of other sizes than the input, so the service's letterboxing is part of what is compared.
    static let photos = (0..<6).map { tinted(UInt64(100 + $0), red: $0 % 2 == 0, width: 24 + $0, height: 20) }

    static func inputs(_ header: ModelHeader) throws -> [[Float]] {
        try photos.map {
            try Preprocessing.input($0, width: header.inputWidth, height: header.inputHeight, scaling: header.scaling)
                .pixels
        }
    }

    @Test func theExportedGraphImportsBackAndGivesTheServicesProbabilities() throws {
        let file = try Self.trained.get()
        let service = try Classifier(file)
        var header = file.header
        header.algorithm = "onnx"
        header.network = nil
        let imported = try Classifier(
            ModelFile(header: header, tensors: [], script: try ONNXExport.export(file, name: "tint")))
        let ours = try service.probabilities(Self.inputs(file.header)),
            theirs = try imported.probabilities(Self.inputs(header))
        for (a, b) in zip(ours, theirs) {
            #expect(argmax(a) == argmax(b))
            #expect(zip(a, b).allSatisfy { abs($0 - $1) < 1e-4 }, "\(a) vs \(b)")
        }
        // The network learnt something, so equal top-1s are not two uniform guesses.
        let labels = file.header.labels
        #expect(
            ours.enumerated().filter { labels[argmax($1)] == ($0 % 2 == 0 ? "red" : "green") }.count >= 5,
            "\(labels) \(ours)")
        // The file describes itself for its import; a graph without our metadata (or no protobuf) does not.
        let described = try #require(ONNXExport.described(try ONNXExport.export(file, name: "tint")))
        #expect(described == ONNXExport.Described(labels: ["green", "red"], width: 16, height: 16, kind: .classifier))
        #expect(ONNXExport.described(ONNXBuilder.channelClassifier(side: 8, weights: [[1, 0, 0]], bias: [0])) == nil)
        #expect(
            ONNXExport.described(Array("not a protobuf at all".utf8)) == nil
                && ONNXExport.described([0x72, 0xFF]) == nil)
        // An imported ONNX model exports as the graph it was imported as.
        #expect(
            try ONNXExport.export(ModelFile(header: header, tensors: [], script: [1, 2, 3]), name: "x") == [1, 2, 3])
    }

    @Test func modelsWithoutAnONNXGraphAreRefusedNamingWhatIsSupported() throws {
        for (kind, algorithm) in [(ModelHeader.Kind.classifier, "features"), (.classifier, "torchscript")] {
            let file = ModelFile(
                header: ModelHeader(kind: kind, algorithm: algorithm, labels: ["a"], inputWidth: 8, inputHeight: 8),
                tensors: [])
            #expect {
                try ONNXExport.export(file, name: "m")
            } throws: { error in
                let error = error as? ClassificationError
                return error?.category == .failedPrecondition
                    && error?.message.contains(
                        "supports cnn classifiers, yolo and transfer detectors, transfer classifiers and imported ONNX models"
                    ) == true
                    && error?.message.contains("is a \(algorithm) \(kind.rawValue)") == true
            }
        }
    }

    /// A yolo detector with fresh weights (64×64 input, stride 8, two anchors: 128 boxes of 3 labels) and its file.
    static func freshDetector() throws -> (ModelFile, Detector) {
        var header = ModelHeader(
            kind: .detector, algorithm: "yolo", labels: ["a", "b", "c"], inputWidth: 64, inputHeight: 64)
        let configuration = DetectorConfiguration(
            backbone: ResidualNetworkConfiguration(widths: [4, 8], classes: 3, stemStride: 2, firstStageStride: 2),
            anchors: [[10, 12], [30, 20]])
        header.detector = configuration
        let fresh = try Detector(header: header, configuration: configuration, seed: 7)
        let file = ModelFile(header: header, tensors: try fresh.backbone.parameters.export())
        return (file, try Detector(file))
    }

    /// A yolo detector (fresh weights: its boxes are arbitrary but many) exported as YOLOv5's layout and imported back
    /// with `--layout yolov5` finds the service's boxes: same labels, confidences within 1e-4, boxes within a pixel.
    @Test func anExportedDetectorImportsBackAsYOLOv5AndFindsTheSameBoxes() throws {
        let (file, service) = try Self.freshDetector()
        let header = file.header
        var imported = header
        imported.algorithm = "onnx"
        imported.detector = nil
        imported.layout = "yolov5"
        let exported = try ONNXExport.export(file, name: "boxes")
        #expect(
            ONNXExport.described(exported)
                == ONNXExport.Described(
                    labels: ["a", "b", "c"], width: 64, height: 64, kind: .detector, layout: "yolov5"))
        let onnx = try ImportedDetector(ModelFile(header: imported, tensors: [], script: exported))
        var compared = 0
        for photo in [
            Self.tinted(1, red: true, width: 90, height: 70), Self.tinted(2, red: false, width: 64, height: 64),
        ] {
            let ours = try service.detect(
                photo, confidenceThreshold: 0.001, iouThreshold: 0.45, maximum: 20, labels: [])
            let theirs = try onnx.detect(photo, confidenceThreshold: 0.001, iouThreshold: 0.45, maximum: 20, labels: [])
            #expect(ours.count == theirs.count)
            for (a, b) in zip(ours, theirs) {
                #expect(a.label == b.label && abs(a.confidence - b.confidence) < 1e-4, "\(a) vs \(b)")
                #expect(
                    abs(a.box.x - b.box.x) < 1 && abs(a.box.y - b.box.y) < 1 && abs(a.box.width - b.box.width) < 1
                        && abs(a.box.height - b.box.height) < 1, "\(a.box) vs \(b.box)")
            }
            compared += ours.count
        }
        #expect(compared > 0, "no boxes to compare: lower the threshold")
    }

    /// The Python of the venv `compose/compose onnxruntime` makes (or MENAGERIE_ONNXRUNTIME_PYTHON).
    static let python: String =
        ProcessInfo.processInfo.environment["MENAGERIE_ONNXRUNTIME_PYTHON"]
        ?? root.appendingPathComponent("compose/.cache/onnxruntime-venv/bin/python").path
    /// Under CI=true the tests run (and fail) without it, as `compose test` installs it there.
    static let onnxruntimeInstalled =
        FileManager.default.isExecutableFile(atPath: python) || ProcessInfo.processInfo.environment["CI"] == "true"
    static let onnxruntimeMissing: Comment =
        "skipped: onnxruntime is not installed (compose/compose onnxruntime; set CI=true to require it)"
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    struct Run: Decodable {
        var probabilities: [[Float]]
        var metadata: [String: String]
        var input: [JSONScalar]
        var output: [JSONScalar]
    }

    /// `model` run by onnxruntime (Services/Classification/tools/run_onnx.py) on `rows` (CHW inputs).
    static func onnxruntime(_ model: [UInt8], _ rows: [[Float]]) throws -> Run {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "onnx-export-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("model.onnx"),
            inputs = directory.appendingPathComponent("inputs.f32")
        try Data(model).write(to: file)
        try Data(rows.joined().flatMap { v in withUnsafeBytes(of: v.bitPattern.littleEndian) { Array($0) } }).write(
            to: inputs)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: python)
        process.arguments = [
            root.appendingPathComponent("Services/Classification/tools/run_onnx.py").path, file.path, inputs.path,
            String(rows.count),
        ]
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        let output = out.fileHandleForReading.readDataToEndOfFile(),
            errors = err.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        try #require(process.terminationStatus == 0, "run_onnx.py: \(String(decoding: errors, as: UTF8.self))")
        return try JSONDecoder().decode(Run.self, from: output)
    }

    @Test(.enabled(if: onnxruntimeInstalled, onnxruntimeMissing))
    func onnxruntimeGivesTheServicesTopOneAndProbabilities() throws {
        let file = try Self.trained.get()
        let run = try Self.onnxruntime(try ONNXExport.export(file, name: "tint"), try Self.inputs(file.header))
        // The service's own Classify of the same photos.
        let service = try Classifier(file)
        #expect(run.probabilities.count == Self.photos.count)
        for (photo, theirs) in zip(Self.photos, run.probabilities) {
            let ours = try service.classify(photo, top: 2)
            #expect(ours[0].label == file.header.labels[argmax(theirs)])
            for prediction in ours {
                let index = try #require(file.header.labels.firstIndex(of: prediction.label))
                #expect(abs(prediction.confidence - Double(theirs[index])) < 1e-4, "\(ours) vs \(theirs)")
            }
        }
        #expect(run.metadata["labels"] == "[\"green\",\"red\"]" && file.header.labels == ["green", "red"])
        #expect(run.metadata["input_width"] == "16" && run.metadata["input_height"] == "16")
        #expect(run.metadata["input_scale"] == "1/255" && run.metadata["input_resize"] == "fit")
        #expect(run.input == [.string("image"), .int(1), .int(3), .int(16), .int(16)])
        #expect(run.output == [.string("probabilities"), .int(1), .int(2)])
    }
}

extension ONNXExportTests {
    /// The exported detector in onnxruntime, its rows decoded as any YOLOv5 app would (threshold, NMS, back to the
    /// photo), finds the service's boxes: same labels, confidences within 1e-4, boxes within a pixel.
    @Test(.enabled(if: onnxruntimeInstalled, onnxruntimeMissing))
    func onnxruntimeFindsTheDetectorsBoxes() throws {
        let (file, service) = try Self.freshDetector()
        let photos = [
            Self.tinted(1, red: true, width: 90, height: 70), Self.tinted(2, red: false, width: 64, height: 64),
        ]
        let prepared = try photos.map { try Preprocessing.input($0, width: 64, height: 64, scaling: .fit) }
        let run = try Self.onnxruntime(try ONNXExport.export(file, name: "boxes"), prepared.map(\.pixels))
        #expect(
            run.output == [.string("boxes"), .int(1), .int(128), .int(8)] && run.metadata["layout"] == "yolov5",
            "\(run.output)")
        // The threshold Detect answers at by default, for an app to answer alike.
        #expect(run.metadata["confidence_threshold"] == String(DetectorEvaluation.confidence(for: file.header)))
        try Self.expectTheServicesBoxes(
            service, on: photos, placed: prepared.map(\.placement), rows: run.probabilities, shape: [1, 128, 8],
            classes: 3, threshold: 0.001)
    }

    /// Expects onnxruntime's `rows` for each photo, decoded as any YOLOv5 app would (threshold, NMS, back to the photo
    /// through its placement in the input and clipped to it, as the service answers), to be `service`'s boxes: same
    /// labels, confidences within 1e-4, boxes within a pixel; and some boxes to have been compared.
    static func expectTheServicesBoxes(
        _ service: some ObjectDetector, on photos: [RGBImage], placed placements: [Placement], rows: [[Float]],
        shape: [Int], classes: Int,
        threshold: Double, sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        var compared = 0
        for ((photo, placement), rows) in zip(zip(photos, placements), rows) {
            let ours = try service.detect(
                photo, confidenceThreshold: threshold, iouThreshold: 0.45, maximum: 20, labels: [])
            let found = try ImportedDetector.decode(
                rows, shape: shape, classes: classes, v8: false, threshold: threshold)
            let theirs = Metrics.nonMaximumSuppression(found, iouThreshold: 0.45, limit: 20).map { found[$0] }
            #expect(ours.count == theirs.count, sourceLocation: sourceLocation)
            for (a, b) in zip(ours, theirs) {
                let mapped = placement.toSource(b.box)
                let x0 = max(0, mapped.minX), y0 = max(0, mapped.minY)
                let box = Box(
                    x: x0, y: y0, width: max(0, min(Double(photo.width), mapped.maxX) - x0),
                    height: max(0, min(Double(photo.height), mapped.maxY) - y0))
                #expect(
                    a.label == b.label && abs(a.confidence - b.confidence) < 1e-4, "\(a) vs \(b)",
                    sourceLocation: sourceLocation)
                #expect(
                    abs(a.box.x - box.x) < 1 && abs(a.box.y - box.y) < 1 && abs(a.box.width - box.width) < 1
                        && abs(a.box.height - box.height) < 1, "\(a.box) vs \(box)", sourceLocation: sourceLocation)
            }
            compared += ours.count
        }
        #expect(compared > 0, sourceLocation: sourceLocation)
    }
}

/// A shape entry onnxruntime reports: a dimension or the input's name.
enum JSONScalar: Decodable, Equatable {
    case string(String), int(Int)
    init(from decoder: Decoder) throws {
        let container = try decoder.singleValueContainer()
        if let i = try? container.decode(Int.self) {
            self = .int(i)
        } else {
            self = .string(try container.decode(String.self))
        }
    }

}

extension ONNXExportTests {
    /// An ONNX tensor may keep its data in a file beside the model, named by a path: imported, that path would be read
    /// on the server (`../../etc/passwd`, a multi-GB file). Found wherever a tensor can be — a graph's initializers, a
    /// Constant node's attribute, a subgraph's — and absent from a model that holds its own weights.
    @Test func aTensorKeepingItsDataInAnExternalFileIsFound() throws {
        func external(_ location: String) -> ONNXWire.Message {
            var tensor = ONNXWire.tensor("w", shape: [1], values: [0])
            var entry = ONNXWire.Message()
            entry.string(1, "location")
            entry.string(2, location)
            tensor.message(13, entry)
            tensor.varint(14, 1)
            return tensor
        }
        let own = ONNXWire.model(
            name: "g", doc: "", nodes: [], initializers: [ONNXWire.tensor("w", shape: [1], values: [0])], inputs: [],
            outputs: [], metadata: [])
        #expect(ONNXExport.externalDataLocation(own) == nil)
        let initializer = ONNXWire.model(
            name: "g", doc: "", nodes: [], initializers: [external("../../etc/passwd")], inputs: [],
            outputs: [], metadata: [])
        #expect(ONNXExport.externalDataLocation(initializer) == "../../etc/passwd")
        // A Constant node whose value attribute (AttributeProto.t = 5) is an external tensor, inside an If's subgraph (g = 6).
        var attribute = ONNXWire.Message()
        attribute.string(1, "value")
        attribute.message(5, external("weights.bin"))
        var constant = ONNXWire.Message()
        constant.string(1, "c")
        constant.message(5, attribute)
        var subgraph = ONNXWire.Message()
        subgraph.message(1, constant)
        var branch = ONNXWire.Message()
        branch.string(1, "then_branch")
        branch.message(6, subgraph)
        var ifNode = ONNXWire.Message()
        ifNode.string(1, "x")
        ifNode.message(5, branch)
        let nested = ONNXWire.model(
            name: "g", doc: "", nodes: [ifNode], initializers: [], inputs: [], outputs: [], metadata: [])
        #expect(ONNXExport.externalDataLocation(nested) == "weights.bin")
        // Bytes that are no protobuf hold no tensor (loading them says what is wrong).
        #expect(ONNXExport.externalDataLocation(Array("not a protobuf at all".utf8)) == nil)
    }
}

/// An exported model says every step from a photo's bytes to its input, the transparency rule among them (issue 41:
/// it did not, and PIL's default, dropping the alpha, flips a 16×16 palette PNG's answer).
@Suite struct ONNXPreprocessingMetadataTests {
    @Test func metadataNamesTheTransparencyRuleAndEveryStep() throws {
        var header = ModelHeader(
            kind: .classifier, algorithm: "transfer", labels: ["a", "b"], inputWidth: 224, inputHeight: 224)
        header.mean = [127 / 255, 127 / 255, 127 / 255]
        header.std = [128 / 255, 128 / 255, 128 / 255]
        let metadata = Dictionary(try ONNXExport.metadata(header, name: "m"), uniquingKeysWith: { a, _ in a })
        let alpha = try #require(metadata["input_alpha"])
        #expect(alpha.contains("composited onto black") && alpha.contains("white at alpha 128 becomes 186"))
        let steps = try JSONDecoder().decode([String].self, from: Data(try #require(metadata["input_steps"]).utf8))
        #expect(steps.count == 7, "\(steps)")
        for (index, word) in ["decode", "EXIF", "transparency", "resize", "pixel / 255", "input_mean", "[1, 3"]
            .enumerated()
        {
            #expect(steps[index].hasPrefix("\(index + 1). ") && steps[index].contains(word), "\(steps[index])")
        }
        #expect(metadata["input_orientation"]?.contains("EXIF") == true)
    }

    /// A detector's steps say its JPEG is decoded reduced as a classifier's is (Detect does it too, `PhotoDetection`),
    /// and by what rule: twice what the resize keeps, not twice the input (they said "a classifier only").
    @Test func aDetectorsStepsSayItsPhotoIsDecodedReducedToo() throws {
        let header = ModelHeader(kind: .detector, algorithm: "yolo", labels: ["a"], inputWidth: 160, inputHeight: 160)
        let metadata = Dictionary(try ONNXExport.metadata(header, name: "d"), uniquingKeysWith: { a, _ in a })
        let steps = try JSONDecoder().decode([String].self, from: Data(try #require(metadata["input_steps"]).utf8))
        #expect(
            !steps[0].contains("classifier only") && steps[0].contains("what the resize below keeps of it"),
            "\(steps[0])")
        #expect(steps[0].contains("boxes are mapped back"), "\(steps[0])")
        #expect(Preprocessing.decodeSize(of: (4000, 3000), input: (224, 224), scaling: .fit) == (448, 336))
    }

    /// What input_alpha says is what the decoder does: white at alpha 128 and (200, 100, 50) at alpha 64 over black.
    @Test func theDecoderCompositesAsTheMetadataSays() throws {
        let png = TestPNG.encode(width: 2, height: 1, raw: [0, 255, 255, 255, 128, 200, 100, 50, 64], colourType: 6)
        let image = try RGBImage.decode(png)
        // Composited in sRGB values these would be 128 and (50, 25, 12).
        #expect(image.pixels == [186, 186, 186, 106, 53, 28], "\(image.pixels)")
    }
}
