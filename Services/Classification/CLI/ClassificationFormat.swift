import ClassificationAPI
import Foundation
import GatewayKit
import RPC

// How the classification command group reads files and writes values: the figures and summaries of datasets and
// models the commands share. `--json` prints the responses' JSON mapping (GatewayKit's `render`); nothing here builds JSON.

func readFile(_ path: String) throws -> [UInt8] {
    Array(try InputFile.read(path))
}

func percent(_ value: Double) -> String { String(format: "%.1f%%", value * 100) }

func kindName(_ kind: ClassificationV1.DatasetKind) -> String { kind == .detection ? "detection" : "classification" }

func datasetText(_ d: ClassificationV1.DatasetSummary) -> String {
    var lines = [
        "\(d.name): \(kindName(d.kind)), \(d.images) images, \(d.labels.count) labels"
            + (d.duplicates > 0 ? " (\(d.duplicates) duplicates stored once)" : "")
    ]
    for label in d.labels {
        lines.append(
            "  \(label.label): \(label.images) images" + (d.kind == .detection ? ", \(label.objects) objects" : ""))
    }
    return lines.joined(separator: "\n")
}

func modelKindName(_ kind: ClassificationV1.ModelKind) -> String { kind == .detector ? "detector" : "classifier" }

/// A terminal sparkline of `values` (▁ lowest … █ highest), at most `width` characters: longer series are averaged
/// into that many buckets.
func sparkline(_ values: [Double], width: Int = 60) -> String {
    guard !values.isEmpty else { return "" }
    let buckets = min(width, values.count)
    let points = (0..<buckets).map { b -> Double in
        let slice = values[
            b * values.count / buckets..<max(b * values.count / buckets + 1, (b + 1) * values.count / buckets)]
        return slice.reduce(0, +) / Double(slice.count)
    }
    let low = points.min()!, high = points.max()!
    let bars = Array("▁▂▃▄▅▆▇█")
    return String(points.map { high > low ? bars[min(7, Int(($0 - low) / (high - low) * 7.999))] : bars[0] })
}

/// `model show`'s training curves: loss and, when measured, validation accuracy, per pass.
func historyText(_ history: [ClassificationV1.TrainingEpoch]) -> [String] {
    var lines: [String] = []
    for pass in Array(Set(history.map(\.pass))).sorted() {
        let epochs = history.filter { $0.pass == pass }
        guard let first = epochs.first, let last = epochs.last else { continue }
        let name = Set(history.map(\.pass)).count > 1 ? " (pass \(pass))" : ""
        lines.append(
            String(
                format: "loss%@ %@ %.4f → %.4f over %d points", name, sparkline(epochs.map(\.loss)), first.loss,
                last.loss, epochs.count))
        let validation = epochs.compactMap(\.validationAccuracy)
        if let v0 = validation.first, let v1 = validation.last {
            lines.append(
                String(format: "validation%@ %@ %.1f%% → %.1f%%", name, sparkline(validation), v0 * 100, v1 * 100))
        }
    }
    return lines
}

/// `evaluate`'s heading over a detector's operating points (issue 41: "recall ≥ 0.8 at precision ≥ 0.8").
func operatingPointTitle(_ r: ClassificationV1.EvaluateResponse) -> String {
    String(
        format: "best recall at precision ≥ %.2f (I/U 50%%), the confidence to detect at:", r.operatingPrecision ?? 0.8)
}

/// Per label: the threshold with the best recall at the wanted precision and its figures, "-" where no threshold is
/// that precise (a row all the same, so the label is not lost from the table).
func operatingPointRows(_ r: ClassificationV1.EvaluateResponse) -> [[String]] {
    r.perClass.map { scores in
        guard let point = scores.operatingPoint else { return [scores.label] + Array(repeating: "-", count: 6) }
        return [
            scores.label, String(format: "%.3f", point.confidence), String(format: "%.3f", point.precision),
            String(format: "%.3f", point.recall), String(point.truePositives), String(point.falsePositives),
            String(point.missed),
        ]
    }
}

func modelText(_ m: ClassificationV1.ModelSummary) -> String {
    var figures: [String] = []
    if let a = m.trainingAccuracy { figures.append("training \(percent(a))") }
    if let a = m.validationAccuracy { figures.append("validation \(percent(a))") }
    if let a = m.map50 { figures.append(String(format: "mAP50 %.3f", a)) }
    if let a = m.map5095 { figures.append(String(format: "mAP50:95 %.3f", a)) }
    if let c = m.detectConfidence { figures.append(String(format: "detects at confidence %.2f", c)) }
    if let n = m.trainingImages { figures.append("\(n) training images") }
    return
        "\(m.name): \(m.algorithm)\(m.fineTuned ? " (fine-tuned)" : "")\(m.cropClassifier ? " (crops classified)" : "") \(modelKindName(m.kind)), \(m.labels.count) labels, input \(m.inputWidth)×\(m.inputHeight)"
        + (figures.isEmpty ? "" : ", " + figures.joined(separator: ", "))
        + (m.trainingSeconds > 0 ? String(format: ", trained in %.1f s", m.trainingSeconds) : "")
        + (m.apps.isEmpty ? "" : " (answers for \(m.apps.joined(separator: ", ")))")
        + (m.interrupted.isEmpty ? "" : "; from a cancelled training: \(m.interrupted)")
}
