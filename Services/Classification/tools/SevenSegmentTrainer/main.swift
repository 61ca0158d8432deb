// sevenseg-train RENDERINGS OUTPUT [EPOCHS]: trains the OCR service's seven-segment glyph network.
//
// RENDERINGS is what Services/OCR/tools/sevenseg_render.py wrote (value-<n>.png, labels.tsv). Each rendering is cut
// into glyphs by the OCR service's own `SegmentCutter`; a rendering whose cut does not match its value glyph for
// glyph (digits, minus, point) is left out and counted; every glyph cut from a picture of no value (labelled "#": a
// printed label, a fragment of a digit, a frame's corner) is a non-glyph, the class the reader refuses. The glyphs become a classification dataset (a folder per
// label) that the classification service's trainer learns as a small `cnn` (seeded); `ONNXExport` writes it, and
// OUTPUT gets sevenseg.onnx and sevenseg.json (its SHA-256, labels, and what training measured).
import Base
import ClassificationCore
import Foundation
import SevenSegment
import TLS
import Torch

let arguments = CommandLine.arguments
guard arguments.count >= 3 else {
    FileHandle.standardError.write(Data("usage: sevenseg-train RENDERINGS OUTPUT [EPOCHS]\n".utf8))
    exit(64)
}
let renderings = URL(fileURLWithPath: arguments[1]), output = URL(fileURLWithPath: arguments[2])
let epochs = arguments.count > 3 ? Int(arguments[3]) ?? 14 : 14

/// Prints a line at once (stdout to a file is otherwise buffered until the end).
func say(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("sevenseg-train: \(message)\n".utf8))
    exit(1)
}

guard let table = try? String(contentsOf: renderings.appendingPathComponent("labels.tsv"), encoding: .utf8) else {
    fail("no labels.tsv in \(renderings.path)")
}
var files: [(path: String, bytes: [UInt8])] = []
var used = 0, skipped = 0, junkUsed = 0
let side = SegmentCutter.side
for line in table.split(separator: "\n") {
    let fields = line.split(separator: "\t").map(String.init)
    guard fields.count == 2,
        let data = FileManager.default.contents(atPath: renderings.appendingPathComponent(fields[0]).path)
    else {
        fail("bad labels.tsv line: \(line)")
    }
    let image = try RGBImage.decode([UInt8](data), name: fields[0])
    guard let cells = SegmentCutter.cut(GreyPixels(rgb: image.pixels, width: image.width, height: image.height)) else {
        if fields[1] != "#" { skipped += 1 }
        continue
    }
    let pattern: [Character] = cells.map { cell in
        switch cell {
        case .point: "."
        case .glyph: "?"
        }
    }
    // A picture of no value ("#": a label, a fragment, a frame's corner): every glyph cut from it is a non-glyph.
    let junk = fields[1] == "#"
    let expected = junk ? pattern.filter { $0 == "?" } : fields[1].map { $0 == "." ? Character(".") : Character("?") }
    if junk {
        guard !expected.isEmpty else { continue }
        junkUsed += 1
    } else if pattern != expected {
        if ProcessInfo.processInfo.environment["SEVENSEG_DEBUG"] != nil {
            say("left out \(fields[0]) \(fields[1]): cut \(String(pattern))")
        }
        skipped += 1
        continue
    }
    if !junk { used += 1 }
    let glyphLabels = junk ? cells.map { _ in Character("#") } : Array(fields[1])
    for (cell, character) in zip(cells, glyphLabels) {
        guard case .glyph(let patch, _, _) = cell else { continue }
        var rgb = [UInt8](repeating: 0, count: side * side * 3)
        for (i, value) in patch.enumerated() {
            let byte = UInt8(max(0, min(255, (value * 255).rounded())))
            rgb[3 * i] = byte
            rgb[3 * i + 1] = byte
            rgb[3 * i + 2] = byte
        }
        let label = character == "-" ? "minus" : character == "#" ? SevenSegmentModel.rejectLabel : String(character)
        files.append(
            (
                "\(label)/\(fields[0])-\(files.count).jpg",
                try RGBImage(width: side, height: side, pixels: rgb).jpeg(quality: 100)
            ))
    }
}
say(
    "sevenseg-train: \(used) renderings cut glyph for glyph, \(skipped) left out, \(junkUsed) of no value; \(files.count) glyphs"
)
// Turned 13°, spaced tight, under glare or with a point touching the next digit, a rendering is cut wrong: 40 % of
// them are left out (what the reader cannot cut it need not classify); more than half is a broken cutter.
guard used * 2 >= used + skipped else { fail("the cutter matched only \(used) of \(used + skipped) renderings") }

let dataset = try DatasetBuilder.classification(files: files)
var options = ClassifierTrainingOptions()
options.algorithm = .cnn
options.inputSize = side
options.widths = [8, 16, 32]
options.epochs = epochs
options.seed = 7
// One pass: the held-out tenth measures it, and a second pass on every glyph (the trainer's refit) would double the
// install's minute for no measurable gain (validation accuracy 0.998 either way).
options.refit = false
options.scaling = .fit
// Glyphs are upright once the cutter un-slants them; a little shift and turn, no flips.
options.augmentation = Augmentation(crop: 0.08, rotation: 4)
let model = try ClassifierTrainer.train(dataset, options: options) { progress in
    say(
        String(
            format: "epoch %d/%d (pass %d/%d): loss %.4f, training accuracy %.4f%@", progress.epoch, progress.epochs,
            progress.pass, progress.passes, progress.loss, progress.trainingAccuracy,
            progress.validationAccuracy.map { String(format: ", validation accuracy %.4f", $0) } ?? ""))
}
let onnx = try ONNXExport.export(model, name: "sevenseg")
try FileManager.default.createDirectory(at: output, withIntermediateDirectories: true)
try Data(onnx).write(to: output.appendingPathComponent(SevenSegmentModel.fileName))
struct Manifest: Encodable {
    var files: [String: String]
    var labels: [String]
    var renderings: Int
    var leftOut: Int
    var glyphs: Int
    var validationAccuracy: Double?
    var seconds: Double?
}
let manifest = Manifest(
    files: [SevenSegmentModel.fileName: SHA256.hex(onnx)], labels: model.header.labels.map { $0 == "minus" ? "-" : $0 },
    renderings: used, leftOut: skipped, glyphs: files.count, validationAccuracy: model.header.validationAccuracy,
    seconds: model.header.trainingSeconds)
let encoder = JSONEncoder()
encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
try encoder.encode(manifest).write(to: output.appendingPathComponent(SevenSegmentModel.manifestName))
say(
    "sevenseg-train: wrote \(output.path) (validation accuracy \(model.header.validationAccuracy.map { String($0) } ?? "–"))"
)
