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
        return try ClassifierTrainer.train(try TrainingDefaultsTests.dataset(images, labels: ["red", "green"]), options: options)
    }

    /// Test photos of other sizes than the input, so the service's letterboxing is part of what is compared.
    static let photos = (0..<6).map { tinted(UInt64(100 + $0), red: $0 % 2 == 0, width: 24 + $0, height: 20) }

    static func inputs(_ header: ModelHeader) throws -> [[Float]] {
        try photos.map { try Preprocessing.input($0, width: header.inputWidth, height: header.inputHeight, scaling: header.scaling).pixels }
    }

    @Test func theExportedGraphImportsBackAndGivesTheServicesProbabilities() throws {
        let file = try Self.trained.get()
        let service = try Classifier(file)
        var header = file.header
        header.algorithm = "onnx"
        header.network = nil
        let imported = try Classifier(ModelFile(header: header, tensors: [], script: try ONNXExport.export(file, name: "tint")))
        let ours = try service.probabilities(Self.inputs(file.header)), theirs = try imported.probabilities(Self.inputs(header))
        for (a, b) in zip(ours, theirs) {
            #expect(argmax(a) == argmax(b))
            #expect(zip(a, b).allSatisfy { abs($0 - $1) < 1e-4 }, "\(a) vs \(b)")
        }
        // The network learnt something, so equal top-1s are not two uniform guesses.
        let labels = file.header.labels
        #expect(ours.enumerated().filter { labels[argmax($1)] == ($0 % 2 == 0 ? "red" : "green") }.count >= 5, "\(labels) \(ours)")
        // An imported ONNX model exports as the graph it was imported as.
        #expect(try ONNXExport.export(ModelFile(header: header, tensors: [], script: [1, 2, 3]), name: "x") == [1, 2, 3])
    }

    @Test func modelsWithoutAnONNXGraphAreRefusedNamingWhatIsSupported() throws {
        for (kind, algorithm) in [(ModelHeader.Kind.classifier, "features"), (.classifier, "transfer"), (.classifier, "torchscript")] {
            let file = ModelFile(header: ModelHeader(kind: kind, algorithm: algorithm, labels: ["a"], inputWidth: 8, inputHeight: 8), tensors: [])
            #expect {
                try ONNXExport.export(file, name: "m")
            } throws: { error in
                let error = error as? ClassificationError
                return error?.category == .failedPrecondition && error?.message.contains("supports cnn classifiers, yolo detectors and imported ONNX models") == true
                    && error?.message.contains("is a \(algorithm) \(kind.rawValue)") == true
            }
        }
    }

    /// A yolo detector (fresh weights: its boxes are arbitrary but many) exported as YOLOv5's layout and imported back
    /// with `--layout yolov5` finds the service's boxes: same labels, confidences within 1e-4, boxes within a pixel.
    @Test func anExportedDetectorImportsBackAsYOLOv5AndFindsTheSameBoxes() throws {
        var header = ModelHeader(kind: .detector, algorithm: "yolo", labels: ["a", "b", "c"], inputWidth: 64, inputHeight: 64)
        let configuration = DetectorConfiguration(
            backbone: ResidualNetworkConfiguration(widths: [4, 8], classes: 3, stemStride: 2, firstStageStride: 2),
            anchors: [[10, 12], [30, 20]])
        header.detector = configuration
        let fresh = try Detector(header: header, configuration: configuration, seed: 7)
        let file = ModelFile(header: header, tensors: try fresh.backbone.parameters.export())
        let service = try Detector(file)
        var imported = header
        imported.algorithm = "onnx"
        imported.detector = nil
        imported.layout = "yolov5"
        let onnx = try ImportedDetector(ModelFile(header: imported, tensors: [], script: try ONNXExport.export(file, name: "boxes")))
        var compared = 0
        for photo in [Self.tinted(1, red: true, width: 90, height: 70), Self.tinted(2, red: false, width: 64, height: 64)] {
            let ours = try service.detect(photo, confidenceThreshold: 0.001, iouThreshold: 0.45, maximum: 20, labels: [])
            let theirs = try onnx.detect(photo, confidenceThreshold: 0.001, iouThreshold: 0.45, maximum: 20, labels: [])
            #expect(ours.count == theirs.count)
            for (a, b) in zip(ours, theirs) {
                #expect(a.label == b.label && abs(a.confidence - b.confidence) < 1e-4, "\(a) vs \(b)")
                #expect(abs(a.box.x - b.box.x) < 1 && abs(a.box.y - b.box.y) < 1 && abs(a.box.width - b.box.width) < 1
                        && abs(a.box.height - b.box.height) < 1, "\(a.box) vs \(b.box)")
            }
            compared += ours.count
        }
        #expect(compared > 0, "no boxes to compare: lower the threshold")
    }

    /// The Python of the venv `compose/compose onnxruntime` makes (or MENAGERIE_ONNXRUNTIME_PYTHON).
    static let python: String = ProcessInfo.processInfo.environment["MENAGERIE_ONNXRUNTIME_PYTHON"]
        ?? root.appendingPathComponent("compose/.cache/onnxruntime-venv/bin/python").path
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: python),
                   "skipped: onnxruntime is not installed (compose/compose onnxruntime)"))
    func onnxruntimeGivesTheServicesTopOneAndProbabilities() throws {
        let file = try Self.trained.get()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("onnx-export-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let model = directory.appendingPathComponent("tint.onnx"), inputs = directory.appendingPathComponent("inputs.f32")
        try Data(ONNXExport.export(file, name: "tint")).write(to: model)
        let rows = try Self.inputs(file.header)
        try Data(rows.joined().flatMap { v in withUnsafeBytes(of: v.bitPattern.littleEndian) { Array($0) } }).write(to: inputs)

        let process = Process()
        process.executableURL = URL(fileURLWithPath: Self.python)
        process.arguments = [Self.root.appendingPathComponent("Services/Classification/tools/run_onnx.py").path, model.path, inputs.path, String(rows.count)]
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        let output = out.fileHandleForReading.readDataToEndOfFile(), errors = err.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        try #require(process.terminationStatus == 0, "run_onnx.py: \(String(decoding: errors, as: UTF8.self))")

        struct Run: Decodable { var probabilities: [[Float]]; var metadata: [String: String]; var input: [JSONScalar]; var output: [JSONScalar] }
        let run = try JSONDecoder().decode(Run.self, from: output)
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

/// A shape entry onnxruntime reports: a dimension or the input's name.
enum JSONScalar: Decodable, Equatable {
    case string(String), int(Int)
    init(from decoder: Decoder) throws {
        let container = try decoder.singleValueContainer()
        if let i = try? container.decode(Int.self) { self = .int(i) } else { self = .string(try container.decode(String.self)) }
    }
}
