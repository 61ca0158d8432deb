import ClassificationCore
import ClassificationTestSupport
import Foundation
import Torch

/// Issue 41's small parts of a picture: four-leaf clovers among three-leaf ones on seeded lawn scenes
/// (`CloverScenes`: 448-pixel scenes, clovers of 20–30 px, 10–15 px once letterboxed to 224; a quarter of them
/// four-leaf), transfer detectors at each stride asked for — with the crop classifier for a stride written `8c` —
/// trained on the same scenes with the same seed and evaluated on other scenes as `gateway classify evaluate` does:
/// per label precision and recall at the detector's own confidence (calibrated on the scenes its training held out,
/// as Detect answers by default; a box right at IoU ≥ 0.5) and AP50. The goal: four-leaf recall
/// ≥ 0.8 at precision ≥ 0.8.
struct SmallObjectBenchmark {
    var epochs: Int?
    /// Training scenes (test scenes: a third as many).
    var trainingScenes: Int
    /// Strides, each optionally suffixed `c` for the crop classifier.
    var runs: [(stride: Int, crops: Bool)]
    var inputSize: Int?
    let cores = ProcessInfo.processInfo.activeProcessorCount

    static func runs(_ text: String?) -> [(stride: Int, crops: Bool)] {
        (text ?? "8,16").split(separator: ",").compactMap { item in
            Int(item.filter(\.isNumber)).map { ($0, item.hasSuffix("c")) }
        }
    }

    func run() async throws {
        let featurePrint: FeaturePrint
        do { featurePrint = try FeaturePrint.load(directory: DetectorBenchmark.featurePrintFolder) } catch {
            print("Small-object benchmark skipped: \(error)")
            return
        }
        try Torch.setThreads(cores)
        let train = try CloverScenes(seed: 11).dataset(count: trainingScenes, prefix: "train")
        let test = try CloverScenes(seed: 12).dataset(count: max(1, trainingScenes / 3), prefix: "test")
        var options = DetectorTrainingOptions()
        options.inputSize = inputSize ?? featurePrint.manifest.inputWidth
        if let epochs { options.epochs = epochs }
        let objects = test.samples.flatMap(\.objects)
        let four = objects.filter { test.labels[$0.label] == "four-leaf" }.count
        print(
            "Small-object benchmark: \(cores) cores, libtorch on \(Torch.threads) threads, \(options.epochs) epochs, seed 0, input \(options.inputSize) px, "
                + "\(train.samples.count) training scenes → \(test.samples.count) test scenes (\(four) four-leaf among \(objects.count) clovers)"
        )
        let rows = try StrideComparison(options: options, runs: runs).run(
            train: train, test: test, featurePrint: featurePrint)
        let f = { (value: Double) in String(format: "%.3f", value) }
        printTable(
            [
                "detector", "confidence", "four-leaf P / R / AP50", "three-leaf P / R / AP50", "mAP50", "training s",
                "evaluate ms/scene",
            ],
            rows.map { row in
                let cells = CloverScenes.labels.map { label in
                    let counts = row.evaluation.counts[label] ?? Metrics.MatchCounts()
                    return "\(f(counts.precision)) / \(f(counts.recall)) / \(f(row.evaluation.ap50[label] ?? 0))"
                }
                return [
                    "transfer, stride \(row.stride)\(row.crops ? " + crop classifier" : "")",
                    String(format: "%.2f", row.evaluation.confidence),
                ] + cells
                    + [
                        f(row.evaluation.map50), String(format: "%.1f", row.trainingSeconds),
                        String(format: "%.0f", row.evaluateMillisecondsPerScene),
                    ]
            })
        print("  goal: four-leaf recall ≥ 0.8 at precision ≥ 0.8 (IoU > 0.5)")
    }
}
