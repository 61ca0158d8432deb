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
    var lines = ["\(d.name): \(kindName(d.kind)), \(d.images) images, \(d.labels.count) labels"
        + (d.duplicates > 0 ? " (\(d.duplicates) duplicates stored once)" : "")]
    for label in d.labels {
        lines.append("  \(label.label): \(label.images) images" + (d.kind == .detection ? ", \(label.objects) objects" : ""))
    }
    return lines.joined(separator: "\n")
}

func modelKindName(_ kind: ClassificationV1.ModelKind) -> String { kind == .detector ? "detector" : "classifier" }

func modelText(_ m: ClassificationV1.ModelSummary) -> String {
    var figures: [String] = []
    if let a = m.trainingAccuracy { figures.append("training \(percent(a))") }
    if let a = m.validationAccuracy { figures.append("validation \(percent(a))") }
    if let a = m.map50 { figures.append(String(format: "mAP50 %.3f", a)) }
    if let a = m.map5095 { figures.append(String(format: "mAP50:95 %.3f", a)) }
    if let n = m.trainingImages { figures.append("\(n) training images") }
    return "\(m.name): \(m.algorithm) \(modelKindName(m.kind)), \(m.labels.count) labels, input \(m.inputWidth)×\(m.inputHeight)"
        + (figures.isEmpty ? "" : ", " + figures.joined(separator: ", "))
        + (m.trainingSeconds > 0 ? String(format: ", trained in %.1f s", m.trainingSeconds) : "")
        + (m.active ? " (active)" : "")
}
