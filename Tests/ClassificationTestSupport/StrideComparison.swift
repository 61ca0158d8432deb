import ClassificationCore
import Foundation

/// Transfer detectors at several feature strides trained on the same scenes with the same options and seed, each
/// evaluated on the same test scenes as `gateway classify evaluate` does: per label precision and recall at Detect's
/// confidence (a box right at IoU ≥ 0.5) and AP50. Shared by `SmallObjectDetectionTests` and `menagerie-bench
/// small-objects`, so the suite and the benchmark measure the same thing.
public struct StrideComparison {
    public struct Row: Sendable {
        public var stride: Int
        /// Whether a crop classifier labelled the boxes (`--crop-classifier true`).
        public var crops: Bool
        public var trainingSeconds: Double
        public var evaluateMillisecondsPerScene: Double
        public var evaluation: DetectorEvaluation
        public var file: ModelFile
    }

    public var options: DetectorTrainingOptions
    /// Each (stride, crops) pair to train: crops true adds the crop classifier.
    public var runs: [(stride: Int, crops: Bool)]

    public init(options: DetectorTrainingOptions, runs: [(stride: Int, crops: Bool)]) {
        self.options = options
        self.runs = runs
    }

    public func run(train: Dataset, test: Dataset, featurePrint: FeaturePrint) throws -> [Row] {
        try runs.map { stride, crops in
            var options = options
            options.featureStride = stride
            let started = ContinuousClock.now
            let file = try DetectorTrainer.train(
                train, options: options, featurePrint: featurePrint, cropClassifier: crops ? featurePrint : nil)
            let trained = ContinuousClock.now
            // At the threshold Detect answers at by default: the detector's own, calibrated on the scenes its
            // training held out.
            let evaluation = try DetectorEvaluation.run(
                try Detectors.load(file), on: test, confidence: DetectorEvaluation.confidence(for: file.header))
            let evaluated = ContinuousClock.now
            return Row(
                stride: stride, crops: crops, trainingSeconds: Self.seconds(trained - started),
                evaluateMillisecondsPerScene: Self.seconds(evaluated - trained) * 1000
                    / Double(max(1, test.samples.count)),
                evaluation: evaluation, file: file)
        }
    }

    /// One line per stride: each label's precision, recall and AP50, then mAP50 and the times.
    public static func describe(_ rows: [Row], labels: [String]) -> [String] {
        rows.map { row in
            let perLabel = labels.map { label in
                let counts = row.evaluation.counts[label] ?? Metrics.MatchCounts()
                return
                    "\(label) P \(f(counts.precision)) R \(f(counts.recall)) AP50 \(f(row.evaluation.ap50[label] ?? 0))"
                    + " (\(counts.truePositives) right, \(counts.falsePositives) wrong, \(counts.missed) missed)"
            }
            return "stride \(row.stride)\(row.crops ? " + crop classifier" : ""): " + perLabel.joined(separator: "; ")
                + "; mAP50 \(f(row.evaluation.map50))"
                + String(
                    format: "; training %.1f s, evaluate %.0f ms/scene", row.trainingSeconds,
                    row.evaluateMillisecondsPerScene)
        }
    }

    static func f(_ value: Double) -> String { String(format: "%.3f", value) }

    static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }
}
