import Foundation
import OpenCVDNN
import Testing

@testable import ClassificationCore

/// ONNX models (written by hand with ONNXBuilder) run through OpenCV's DNN module: classifiers, detectors in both
/// Ultralytics layouts, and the error paths.
@Suite struct ONNXTests {
    static func classifier() throws -> Classifier {
        var header = ModelHeader(
            kind: .classifier, algorithm: "onnx", labels: ["red", "green"], inputWidth: 16, inputHeight: 16)
        header.scaling = .fill
        let graph = ONNXBuilder.channelClassifier(side: 16, weights: [[4, 0, 0], [0, 4, 0]], bias: [0, 0])
        return try Classifier(ModelFile(header: header, tensors: [], script: graph))
    }

    @Test func anONNXClassifierRunsWithItsLabels() throws {
        let model = try Self.classifier()
        let red = try model.classify(TestPNG.solid(width: 40, height: 30, colour: (255, 0, 0)), top: 2)
        #expect(red.map(\.label) == ["red", "green"])
        #expect(abs(red.map(\.confidence).reduce(0, +) - 1) < 1e-5)
        // Mean red 1 against 0: logits 4 and 0.
        #expect(abs(red[0].confidence - 1 / (1 + exp(-4.0))) < 1e-4, "\(red)")
        #expect(
            try model.classify(TestPNG.solid(width: 20, height: 20, colour: (0, 200, 0)), top: 1)[0].label == "green")
    }

    @Test func garbageIsNoONNXModelAndTheShimKeepsWorking() throws {
        #expect(throws: DNNError.self) { try ONNXNetwork(bytes: Array("not an onnx model".utf8)) }
        let header = ModelHeader(
            kind: .classifier, algorithm: "onnx", labels: ["a", "b"], inputWidth: 16, inputHeight: 16)
        #expect(throws: ClassificationError.self) {
            try Classifier(ModelFile(header: header, tensors: [], script: [0x08, 0x07, 0xFF]))
        }
        // Three labels for a two-score model: refused when run, not a crash.
        var three = header
        three.labels = ["a", "b", "c"]
        let graph = ONNXBuilder.channelClassifier(side: 16, weights: [[1, 0, 0], [0, 1, 0]], bias: [0, 0])
        let mismatched = try Classifier(ModelFile(header: three, tensors: [], script: graph))
        #expect(throws: ClassificationError.self) {
            try mismatched.classify(TestPNG.solid(width: 16, height: 16, colour: (9, 9, 9)))
        }
        // A wrong input shape is OpenCV's exception, caught in the shim.
        let network = try ONNXNetwork(bytes: graph)
        #expect(throws: DNNError.self) { try network.forward([Float](repeating: 0, count: 8), shape: [1, 2, 2, 2]) }
        #expect(try network.forward([Float](repeating: 1, count: 3 * 16 * 16), shape: [1, 3, 16, 16]).shape == [1, 2])
    }

    /// Three candidate boxes in a 32×32 input: two overlapping "a" boxes (0.9 and 0.8) and a faint "b" (0.1).
    static let boxes: [(cx: Float, cy: Float, w: Float, h: Float, scores: [Float])] = [
        (16, 16, 8, 8, [0.9, 0.05]), (17, 16, 8, 8, [0.8, 0.1]), (4, 4, 4, 4, [0.0, 0.1]),
    ]

    static func detector(v8: Bool) throws -> ImportedDetector {
        let classes = 2, n = boxes.count
        var output: [Float]
        let shape: [Int]
        if v8 {
            // [1, 4 + classes, N]: field-major.
            output = [Float](repeating: 0, count: (4 + classes) * n)
            for (b, box) in boxes.enumerated() {
                for (f, v) in ([box.cx, box.cy, box.w, box.h] + box.scores).enumerated() { output[f * n + b] = v }
            }
            shape = [1, 4 + classes, n]
        } else {
            // [1, N, 5 + classes]: box-major, objectness 1.
            output = boxes.flatMap { [$0.cx, $0.cy, $0.w, $0.h, 1] + $0.scores }
            shape = [1, n, 5 + classes]
        }
        var header = ModelHeader(
            kind: .detector, algorithm: "onnx", labels: ["a", "b"], inputWidth: 32, inputHeight: 32)
        header.layout = v8 ? "yolov8" : "yolov5"
        return try ImportedDetector(
            ModelFile(
                header: header, tensors: [],
                script: ONNXBuilder.constantDetector(side: 32, output: output, shape: shape)))
    }

    @Test(arguments: [false, true])
    func anONNXDetectorsBoxesAreDecodedSuppressedAndMappedToTheImage(v8: Bool) throws {
        let detector = try Self.detector(v8: v8)
        // A 64×64 image is the 32×32 input scaled by 2: boxes double.
        let found = try detector.detect(TestPNG.solid(width: 64, height: 64, colour: (10, 10, 10)))
        #expect(found.count == 1, "\(found)")
        #expect(found.first?.label == 0 && abs((found.first?.confidence ?? 0) - 0.9) < 1e-5)
        let box = try #require(found.first?.box)
        #expect(
            abs(box.x - 24) < 1e-3 && abs(box.y - 24) < 1e-3 && abs(box.width - 16) < 1e-3
                && abs(box.height - 16) < 1e-3, "\(box)")
        // A lower threshold lets the faint box through; a label filter keeps only its label.
        let faint = try detector.detect(
            TestPNG.solid(width: 64, height: 64, colour: (10, 10, 10)), confidenceThreshold: 0.05,
            iouThreshold: 0.45, maximum: 10, labels: ["b"])
        #expect(faint.map(\.label) == [1, 1] || faint.map(\.label) == [1], "\(faint)")
    }

    @Test func anOutputThatDoesNotFitTheLayoutIsRefused() throws {
        #expect(throws: ClassificationError.self) {
            try ImportedDetector.decode(
                [Float](repeating: 0, count: 12), shape: [1, 3, 4], classes: 2, v8: false, threshold: 0.25)
        }
        var header = ModelHeader(kind: .detector, algorithm: "onnx", labels: ["a"], inputWidth: 32, inputHeight: 32)
        header.layout = "yolov9"
        #expect(throws: ClassificationError.self) {
            try ImportedDetector(
                ModelFile(
                    header: header, tensors: [],
                    script: ONNXBuilder.channelClassifier(side: 32, weights: [[1, 0, 0]], bias: [0])))
        }
    }
}
