import Foundation

/// Pure-Swift metrics: what the service reports after training and evaluation, computed as Create ML and COCO
/// define them, independent of the network library.
public enum Metrics {
    /// Numerically stable softmax: probabilities summing to 1.
    public static func softmax(_ logits: [Float]) -> [Float] {
        guard let top = logits.max() else { return [] }
        let exps = logits.map { Float(exp(Double($0 - top))) }
        let total = exps.reduce(0, +)
        return exps.map { $0 / total }
    }

    /// Share of predictions equal to the truth (0 for no samples).
    public static func accuracy(predicted: [Int], truth: [Int]) -> Double {
        precondition(predicted.count == truth.count)
        guard !truth.isEmpty else { return 0 }
        return Double(zip(predicted, truth).filter { $0 == $1 }.count) / Double(truth.count)
    }

    /// confusion[truth][predicted] counts.
    public static func confusion(predicted: [Int], truth: [Int], classes: Int) -> [[Int]] {
        var matrix = [[Int]](repeating: [Int](repeating: 0, count: classes), count: classes)
        for (p, t) in zip(predicted, truth) { matrix[t][p] += 1 }
        return matrix
    }

    public struct ClassScores: Sendable, Equatable {
        public var precision: Double
        public var recall: Double
        public var f1: Double
    }

    /// Per-class precision, recall and F1 from a confusion matrix (0 where undefined, as scikit-learn reports).
    public static func perClass(confusion: [[Int]]) -> [ClassScores] {
        let n = confusion.count
        return (0..<n).map { c in
            let tp = Double(confusion[c][c])
            let predicted = Double((0..<n).reduce(0) { $0 + confusion[$1][c] })
            let actual = Double(confusion[c].reduce(0, +))
            let precision = predicted > 0 ? tp / predicted : 0
            let recall = actual > 0 ? tp / actual : 0
            let f1 = precision + recall > 0 ? 2 * precision * recall / (precision + recall) : 0
            return ClassScores(precision: precision, recall: recall, f1: f1)
        }
    }

    // MARK: Boxes

    /// Intersection over union of two boxes (0 when either is empty).
    public static func iou(_ a: Box, _ b: Box) -> Double {
        let w = min(a.maxX, b.maxX) - max(a.minX, b.minX)
        let h = min(a.maxY, b.maxY) - max(a.minY, b.minY)
        guard w > 0, h > 0 else { return 0 }
        let inter = w * h
        let union = a.area + b.area - inter
        return union > 0 ? inter / union : 0
    }

    /// Greedy non-maximum suppression per label: keeps the most confident box and drops any other of the same
    /// label overlapping it by more than `iouThreshold`. Returns indices into `detections`, most confident first.
    public static func nonMaximumSuppression(_ detections: [Detection], iouThreshold: Double, limit: Int = .max)
        -> [Int]
    {
        let order = detections.indices.sorted {
            detections[$0].confidence != detections[$1].confidence
                ? detections[$0].confidence > detections[$1].confidence : $0 < $1
        }
        var kept: [Int] = []
        for i in order where kept.count < limit {
            let suppressed = kept.contains {
                detections[$0].label == detections[i].label && iou(detections[$0].box, detections[i].box) > iouThreshold
            }
            if !suppressed { kept.append(i) }
        }
        return kept
    }

    /// COCO-style average precision of one class at one IoU threshold: detections over all images sorted by
    /// confidence, each matched greedily to the unmatched truth box of its image with the highest IoU ≥ the
    /// threshold; precision made monotone and sampled at 101 recall points. `nil` when the class has no truth.
    public static func averagePrecision(
        detections: [(image: Int, detection: Detection)],
        truth: [(image: Int, box: Box)], iouThreshold: Double
    ) -> Double? {
        guard !truth.isEmpty else { return nil }
        let matched = greedyMatches(detections: detections, truth: truth, iouThreshold: iouThreshold)
        let tp = matched.map { $0 ? 1.0 : 0 }, fp = matched.map { $0 ? 0 : 1.0 }
        var cumTP = 0.0, cumFP = 0.0
        var recall: [Double] = [], precision: [Double] = []
        for k in tp.indices {
            cumTP += tp[k]
            cumFP += fp[k]
            recall.append(cumTP / Double(truth.count))
            precision.append(cumTP / (cumTP + cumFP))
        }
        // Monotone envelope, right to left.
        if precision.count > 1 {
            for k in stride(from: precision.count - 2, through: 0, by: -1) {
                precision[k] = max(precision[k], precision[k + 1])
            }
        }
        var total = 0.0
        for r in 0...100 {
            let level = Double(r) / 100
            if let k = recall.firstIndex(where: { $0 >= level - 1e-12 }) { total += precision[k] }
        }
        return total / 101
    }

    /// What a detector found of one class at one confidence threshold, matched as `averagePrecision` matches
    /// (by confidence, each detection to the unmatched truth box of its image with the highest IoU ≥
    /// `iouThreshold`): true positives, false positives (a box matching nothing) and the objects missed.
    public struct MatchCounts: Sendable, Equatable {
        public var truePositives = 0, falsePositives = 0, missed = 0
        public init(truePositives: Int = 0, falsePositives: Int = 0, missed: Int = 0) {
            self.truePositives = truePositives
            self.falsePositives = falsePositives
            self.missed = missed
        }
        /// Share of the boxes found that are right; 0 when nothing was found.
        public var precision: Double {
            truePositives + falsePositives == 0 ? 0 : Double(truePositives) / Double(truePositives + falsePositives)
        }
        /// Share of the objects that were found; 0 when there were none.
        public var recall: Double {
            truePositives + missed == 0 ? 0 : Double(truePositives) / Double(truePositives + missed)
        }
        public var f1: Double { precision + recall == 0 ? 0 : 2 * precision * recall / (precision + recall) }
        public static func + (a: MatchCounts, b: MatchCounts) -> MatchCounts {
            MatchCounts(
                truePositives: a.truePositives + b.truePositives, falsePositives: a.falsePositives + b.falsePositives,
                missed: a.missed + b.missed)
        }
    }

    /// Counts of `detections` with confidence ≥ `confidence` against `truth` (see `MatchCounts`).
    public static func matchCounts(
        detections: [(image: Int, detection: Detection)], truth: [(image: Int, box: Box)],
        confidence: Double, iouThreshold: Double
    ) -> MatchCounts {
        let kept = detections.filter { $0.detection.confidence >= confidence }
        let matched = greedyMatches(detections: kept, truth: truth, iouThreshold: iouThreshold)
        let hits = matched.filter { $0 }.count
        return MatchCounts(truePositives: hits, falsePositives: matched.count - hits, missed: truth.count - hits)
    }

    /// A confidence threshold and what `matchCounts` counts at it.
    public struct OperatingPoint: Sendable, Equatable {
        public var confidence: Double
        public var counts: MatchCounts
        public init(confidence: Double, counts: MatchCounts) {
            self.confidence = confidence
            self.counts = counts
        }
    }

    /// The confidence threshold with the best recall whose precision is at least `minimumPrecision` (ties: the
    /// higher precision, then the higher threshold) — the point to run a detector at when wrong boxes cost, as "recall
    /// ≥ 0.8 at precision ≥ 0.8" asks. Only the detections' own confidences are candidates: between two of them the
    /// counts do not change. `nil` when the class has no truth or no threshold reaches the precision.
    public static func operatingPoint(
        detections: [(image: Int, detection: Detection)], truth: [(image: Int, box: Box)],
        minimumPrecision: Double, iouThreshold: Double
    ) -> OperatingPoint? {
        guard !truth.isEmpty else { return nil }
        // Matching is greedy by confidence, so the boxes kept at a threshold match as they do among all boxes.
        let confidences = detections.map(\.detection.confidence).sorted(by: >)
        let matched = greedyMatches(detections: detections, truth: truth, iouThreshold: iouThreshold)
        var best: OperatingPoint?
        var hits = 0
        for k in matched.indices {
            if matched[k] { hits += 1 }
            // A threshold keeps every box of its confidence: only the last of equal confidences is a point.
            guard k == matched.count - 1 || confidences[k + 1] < confidences[k] else { continue }
            let counts = MatchCounts(truePositives: hits, falsePositives: k + 1 - hits, missed: truth.count - hits)
            guard counts.precision >= minimumPrecision else { continue }
            if let current = best,
                counts.recall < current.counts.recall
                    || (counts.recall == current.counts.recall && counts.precision <= current.counts.precision)
            {
                continue
            }
            best = OperatingPoint(confidence: confidences[k], counts: counts)
        }
        return best
    }

    /// For each detection in order of confidence (ties in given order), whether it matched a truth box.
    static func greedyMatches(
        detections: [(image: Int, detection: Detection)], truth: [(image: Int, box: Box)],
        iouThreshold: Double
    ) -> [Bool] {
        var truthByImage: [Int: [Box]] = [:]
        for t in truth { truthByImage[t.image, default: []].append(t.box) }
        var used: [Int: [Bool]] = truthByImage.mapValues { [Bool](repeating: false, count: $0.count) }
        let sorted = detections.enumerated().sorted {
            $0.element.detection.confidence != $1.element.detection.confidence
                ? $0.element.detection.confidence > $1.element.detection.confidence : $0.offset < $1.offset
        }
        return sorted.map { _, d in
            var best = -1
            var bestIoU = iouThreshold
            for (j, box) in (truthByImage[d.image] ?? []).enumerated() where !used[d.image]![j] {
                let overlap = iou(box, d.detection.box)
                if overlap >= bestIoU {
                    bestIoU = overlap
                    best = j
                }
            }
            guard best >= 0 else { return false }
            used[d.image]![best] = true
            return true
        }
    }

    /// Mean over classes (those with truth) of AP averaged over IoU 0.5, 0.55 … 0.95 — COCO's mAP@[.5:.95].
    public static func meanAveragePrecision(perClass: [[Double: Double]]) -> Double {
        let values = perClass.compactMap { byThreshold -> Double? in
            byThreshold.isEmpty ? nil : byThreshold.values.reduce(0, +) / Double(byThreshold.count)
        }
        return values.isEmpty ? 0 : values.reduce(0, +) / Double(values.count)
    }

    /// The IoU thresholds COCO averages over.
    public static let cocoThresholds: [Double] = (0..<10).map { 0.5 + Double($0) * 0.05 }
}

/// An axis-aligned box, origin top-left, in any consistent unit (pixels or normalised).
public struct Box: Sendable, Equatable, Codable {
    public var x: Double  // left
    public var y: Double  // top
    public var width: Double
    public var height: Double

    public init(x: Double, y: Double, width: Double, height: Double) {
        self.x = x
        self.y = y
        self.width = width
        self.height = height
    }

    /// From Create ML's centre coordinates.
    public init(centerX: Double, centerY: Double, width: Double, height: Double) {
        self.init(x: centerX - width / 2, y: centerY - height / 2, width: width, height: height)
    }

    public var minX: Double { x }
    public var minY: Double { y }
    public var maxX: Double { x + width }
    public var maxY: Double { y + height }
    public var area: Double { max(0, width) * max(0, height) }
}

/// A labelled box with a confidence.
public struct Detection: Sendable, Equatable {
    public var label: Int
    public var confidence: Double
    public var box: Box

    public init(label: Int, confidence: Double, box: Box) {
        self.label = label
        self.confidence = confidence
        self.box = box
    }
}
