import Base
import Foundation
import OpenCVDNN
import TLS

/// Why the seven-segment model could not be used: absent, damaged, or refused by OpenCV. PP-OCR then reads segment
/// displays alone.
public struct SevenSegmentError: CategorizedError, CustomStringConvertible {
    public let category: ErrorCategory
    public let message: String

    public init(_ category: ErrorCategory, _ message: String) {
        self.category = category
        self.message = message
    }
}

/// The glyph classifier as `compose/compose sevenseg` installs it: trained by the classification service's own trainer
/// (`sevenseg-train`) on renderings of segment displays, exported as ONNX, with `sevenseg.json` naming its labels and
/// the file's SHA-256, checked here.
public struct SevenSegmentModel: Sendable {
    public static let manifestName = "sevenseg.json"
    public static let fileName = "sevenseg.onnx"
    public static let installHint = "install it with compose/compose sevenseg"
    /// The class of what is no glyph (a label's letter, a fragment of a digit, a frame's corner): refused, not read
    /// as the digit it looks most like.
    public static let rejectLabel = "none"

    public let network: [UInt8]
    /// The class of each output: "0"…"9", "-" and (models trained since it was added) `rejectLabel`.
    public let labels: [String]

    public init(network: [UInt8], labels: [String]) {
        self.network = network
        self.labels = labels
    }

    /// FAILED_PRECONDITION without a manifest; DATA_LOSS for a manifest or network that is not whole.
    public static func load(directory: String) throws -> SevenSegmentModel {
        let folder = URL(fileURLWithPath: directory)
        guard let data = FileManager.default.contents(atPath: folder.appendingPathComponent(manifestName).path) else {
            throw SevenSegmentError(
                .failedPrecondition,
                "the seven-segment reader is not installed in \(directory) (no \(manifestName)); \(installHint)")
        }
        struct Manifest: Decodable {
            var files: [String: String]
            var labels: [String]
        }
        guard let manifest = try? JSONDecoder().decode(Manifest.self, from: data), let sum = manifest.files[fileName],
            !manifest.labels.isEmpty
        else {
            throw SevenSegmentError(
                .dataLoss, "\(directory)/\(manifestName) is not a seven-segment manifest; \(installHint)")
        }
        guard
            let bytes = FileManager.default.contents(atPath: folder.appendingPathComponent(fileName).path).map({
                [UInt8]($0)
            }),
            SHA256.hex(bytes) == sum
        else {
            throw SevenSegmentError(
                .dataLoss, "\(directory)/\(fileName) is missing or does not match its checksum; \(installHint)")
        }
        return SevenSegmentModel(network: bytes, labels: manifest.labels)
    }
}

/// A value read off a segment display: its text (digits, a leading minus, a decimal point), the least confidence
/// of its glyphs, and the mean count of strokes its digits are made of (a segment display's digits have 2–7, a
/// printed font's 1: what tells a segment display from print).
public struct SevenSegmentReading: Sendable, Equatable {
    public var text: String
    public var confidence: Double
    public var strokesPerDigit: Double
    /// Its digits, and the glyphs the whole picture was cut into (the value's and any label's or unit's beside it).
    public var digits: Int
    public var glyphs: Int
    /// Every cell of the picture as read, left to right (`5 0.99`, `.`, `none 0.80`): what a doubt about the value
    /// is judged on, and what a test prints.
    public var cells: [String] = []
}

/// Reads the digits of a line of a segment display: `SegmentCutter` cuts it into glyphs, the network classifies each.
/// One reader per thread that reads (its network's forwards take turns).
public final class SevenSegmentReader: Sendable {
    private let network: ONNXNetwork
    public let labels: [String]

    public init(model: SevenSegmentModel) throws {
        do { network = try ONNXNetwork(bytes: model.network) } catch let error as DNNError {
            throw SevenSegmentError(.failedPrecondition, "OpenCV refused the seven-segment network: \(error.message)")
        }
        labels = model.labels
    }

    /// The value in `grey`: the longest run of glyphs classified with at least `minimumConfidence` and not refused
    /// as no glyph (so a label or unit printed beside the digits is left out), a minus only at its start, points only between digits; nil
    /// when no digit is read.
    public func read(_ grey: GreyPixels, minimumConfidence: Double = 0.6) throws -> SevenSegmentReading? {
        guard let cells = SegmentCutter.cut(grey) else { return nil }
        var best: (reading: SevenSegmentReading, digits: Int)?
        let glyphs = cells.filter { if case .glyph = $0 { true } else { false } }.count
        var text = "", confidence = 1.0, strokes = 0, digits = 0
        var trace: [String] = []
        func close() {
            if text.last == "." { text.removeLast() }
            if digits > 0,
                best.map({ digits > $0.digits || (digits == $0.digits && confidence > $0.reading.confidence) }) ?? true
            {
                best = (
                    SevenSegmentReading(
                        text: text, confidence: confidence, strokesPerDigit: Double(strokes) / Double(digits),
                        digits: digits, glyphs: glyphs), digits
                )
            }
            (text, confidence, strokes, digits) = ("", 1.0, 0, 0)
        }
        for cell in cells {
            switch cell {
            case .point:
                trace.append(".")
                if digits > 0, text.last?.isNumber == true { text += "." }
            case .glyph(let patch, _, let count):
                let (label, probability) = try classify(patch)
                trace.append("\(label) \((probability * 100).rounded() / 100)")
                if probability < minimumConfidence || label == SevenSegmentModel.rejectLabel
                    || (label == "-" && !text.isEmpty)
                {
                    close()
                    continue
                }
                confidence = min(confidence, probability)
                text += label
                if label != "-" {
                    digits += 1
                    strokes += count
                }
            }
        }
        close()
        best?.reading.cells = trace
        return best?.reading
    }

    /// The most probable label of a patch and its probability.
    func classify(_ patch: [Float]) throws -> (String, Double) {
        let side = SegmentCutter.side
        let input = patch + patch + patch
        let output: (values: [Float], shape: [Int])
        do { output = try network.forward(input, shape: [1, 3, side, side]) } catch let error as DNNError {
            throw SevenSegmentError(.internal, "the seven-segment network failed: \(error.message)")
        }
        guard output.values.count == labels.count else {
            throw SevenSegmentError(
                .internal, "the seven-segment network answered \(output.shape) for \(labels.count) labels")
        }
        let best = output.values.indices.max { output.values[$0] < output.values[$1] }!
        return (labels[best], Double(output.values[best]))
    }
}
