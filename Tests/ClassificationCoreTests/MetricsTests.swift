import Base
import TLS
import Testing

@testable import ClassificationCore

@Suite struct MetricsTests {
    @Test func softmaxSumsToOneAndIsStableForLargeLogits() {
        let p = Metrics.softmax([1, 2, 3])
        // e^1, e^2, e^3 over their sum: 0.0900, 0.2447, 0.6652.
        #expect(abs(p[0] - 0.09003) < 1e-4 && abs(p[1] - 0.24473) < 1e-4 && abs(p[2] - 0.66524) < 1e-4)
        let large = Metrics.softmax([1000, 1000])
        #expect(large == [0.5, 0.5])
        #expect(abs(Metrics.softmax([3, -7, 0.5, 12]).reduce(0, +) - 1) < 1e-6)
    }

    @Test func iouOfHandComputedBoxes() {
        let a = Box(x: 0, y: 0, width: 2, height: 2)
        // Overlap 1×1 = 1; union 4 + 4 − 1 = 7.
        #expect(abs(Metrics.iou(a, Box(x: 1, y: 1, width: 2, height: 2)) - 1.0 / 7.0) < 1e-12)
        #expect(Metrics.iou(a, a) == 1)
        #expect(Metrics.iou(a, Box(x: 2, y: 0, width: 2, height: 2)) == 0)  // touching edges
        // Contained: 1 / 4.
        #expect(Metrics.iou(a, Box(x: 0.5, y: 0.5, width: 1, height: 1)) == 0.25)
        // Create ML's centre coordinates.
        #expect(Box(centerX: 5, centerY: 5, width: 4, height: 2) == Box(x: 3, y: 4, width: 4, height: 2))
    }

    @Test func nmsKeepsTheMostConfidentPerLabel() {
        let detections = [
            Detection(label: 0, confidence: 0.6, box: Box(x: 0, y: 0, width: 10, height: 10)),
            // IoU with [0] = 81/119 = 0.68
            Detection(label: 0, confidence: 0.9, box: Box(x: 1, y: 1, width: 10, height: 10)),
            Detection(label: 1, confidence: 0.5, box: Box(x: 0, y: 0, width: 10, height: 10)),  // other label: kept
            Detection(label: 0, confidence: 0.7, box: Box(x: 20, y: 20, width: 5, height: 5)),  // far away: kept
        ]
        #expect(Metrics.nonMaximumSuppression(detections, iouThreshold: 0.45) == [1, 3, 2])
        #expect(Metrics.nonMaximumSuppression(detections, iouThreshold: 0.7) == [1, 3, 0, 2])
        #expect(Metrics.nonMaximumSuppression(detections, iouThreshold: 0.45, limit: 2) == [1, 3])
    }

    @Test func averagePrecisionMatchesHandComputedCurves() throws {
        let truth = [
            (image: 0, box: Box(x: 0, y: 0, width: 10, height: 10)),
            (image: 1, box: Box(x: 0, y: 0, width: 10, height: 10)),
        ]
        func det(_ image: Int, _ confidence: Double, _ x: Double) -> (image: Int, detection: Detection) {
            (image, Detection(label: 0, confidence: confidence, box: Box(x: x, y: 0, width: 10, height: 10)))
        }
        // Both found, best first: precision 1 at every recall → AP 1.
        #expect(
            Metrics.averagePrecision(detections: [det(0, 0.9, 0), det(1, 0.8, 0)], truth: truth, iouThreshold: 0.5) == 1
        )
        // A false positive ranked first: ranks give (P, R) = (0, 0), (0.5, 0.5), (2/3, 1); the envelope is 2/3 at
        // every one of the 101 recall points → AP 2/3.
        let ap = try #require(
            Metrics.averagePrecision(
                detections: [det(0, 0.95, 50), det(0, 0.9, 0), det(1, 0.8, 0)], truth: truth, iouThreshold: 0.5))
        #expect(abs(ap - 2.0 / 3.0) < 1e-12)
        // Only one of two found (precision 1 up to recall 0.5): 51 of 101 points → 51/101.
        let half = try #require(Metrics.averagePrecision(detections: [det(0, 0.9, 0)], truth: truth, iouThreshold: 0.5))
        #expect(abs(half - 51.0 / 101.0) < 1e-12)
        // A box shifted by 3 px has IoU 7/13 = 0.54: a hit at 0.5, a miss at 0.55 and above.
        let shifted = [det(0, 0.9, 3), det(1, 0.8, 3)]
        #expect(Metrics.averagePrecision(detections: shifted, truth: truth, iouThreshold: 0.5) == 1)
        #expect(Metrics.averagePrecision(detections: shifted, truth: truth, iouThreshold: 0.55) == 0)
        // A duplicate of a matched box is a false positive.
        let duplicate = try #require(
            Metrics.averagePrecision(
                detections: [det(0, 0.9, 0), det(0, 0.85, 0)], truth: truth, iouThreshold: 0.5))
        #expect(abs(duplicate - 51.0 / 101.0) < 1e-12)
        // No truth for the class: undefined, left out of the mean.
        #expect(Metrics.averagePrecision(detections: [det(0, 0.9, 0)], truth: [], iouThreshold: 0.5) == nil)
        let thresholds = Metrics.cocoThresholds
        #expect(thresholds.count == 10 && thresholds.first == 0.5 && abs(thresholds.last! - 0.95) < 1e-12)
        // mAP@[.5:.95] of the shifted detections: 1 at 0.5 and 0 at the nine others → 0.1.
        let perThreshold = Dictionary(
            uniqueKeysWithValues: thresholds.map { t in
                (t, Metrics.averagePrecision(detections: shifted, truth: truth, iouThreshold: t)!)
            })
        #expect(abs(Metrics.meanAveragePrecision(perClass: [perThreshold]) - 0.1) < 1e-12)
    }

    @Test func perClassScoresFromAConfusionMatrix() {
        let predicted = [0, 0, 1, 1, 1, 2]
        let truth = [0, 1, 1, 1, 2, 2]
        let confusion = Metrics.confusion(predicted: predicted, truth: truth, classes: 3)
        #expect(confusion == [[1, 0, 0], [1, 2, 0], [0, 1, 1]])
        let scores = Metrics.perClass(confusion: confusion)
        // Class 1: precision 2/3, recall 2/3, F1 2/3. Class 0: precision 1/2, recall 1, F1 2/3.
        #expect(abs(scores[1].precision - 2.0 / 3) < 1e-12 && abs(scores[1].recall - 2.0 / 3) < 1e-12)
        #expect(abs(scores[0].precision - 0.5) < 1e-12 && scores[0].recall == 1 && abs(scores[0].f1 - 2.0 / 3) < 1e-12)
        #expect(abs(Metrics.accuracy(predicted: predicted, truth: truth) - 4.0 / 6) < 1e-12)
    }

    @Test func sha256OfKnownVectors() {
        #expect(SHA256.hex([]) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(SHA256.hex(Array("abc".utf8)) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(
            SHA256.hex(Array(String(repeating: "a", count: 1000).utf8))
                == "41edece42d63e8d9bf515a9ba6932e1c20cbc9f5a5d134645adb5db1b9737ea3")
    }
}
