import Foundation
import OCRPolicy
import OpenCVDNN
import Testing
import TextRecognition

@testable import PPOCR
@testable import SevenSegment

/// The seven-segment reader: the cutter on hand-drawn segments, and values read off Tests/SevenSegmentPhotos (segment
/// shapes and conditions the training renderer never made) by PP-OCR alone and with the reader.
@Suite(.serialized) struct SevenSegmentTests {
    /// The folder `compose/compose sevenseg` installs (or MENAGERIE_SEVENSEG).
    static let folder =
        ProcessInfo.processInfo.environment["MENAGERIE_SEVENSEG"]
        ?? DisplayReadingTests.root.appendingPathComponent("compose/.cache/sevenseg").path
    static let installed =
        (FileManager.default.fileExists(atPath: folder + "/" + SevenSegmentModel.manifestName)
            && DisplayReadingTests.installed) || ProcessInfo.processInfo.environment["CI"] == "true"
    static let missing: Comment =
        "skipped: PP-OCR or the seven-segment reader is not installed (compose/compose ppocr, compose/compose sevenseg; set CI=true to require them)"

    /// Segments a–g of a `w` × `h` digit at x as rectangles, stroke t, a gap of 2 between segments.
    static func draw(_ text: String, into pixels: inout [UInt8], width: Int, x: Int, y: Int, w: Int, h: Int, t: Int) {
        let lit: [Character: String] = ["1": "bc", "8": "abcdefg", "-": "g", "7": "abc", "4": "bcfg"]
        func fill(_ x0: Int, _ y0: Int, _ x1: Int, _ y1: Int) {
            for yy in y0..<y1 { for xx in x0..<x1 { pixels[yy * width + xx] = 20 } }
        }
        var x = x
        for character in text {
            if character == "." {
                fill(x - t - 3, y + h - t, x - 3, y + h)
                continue
            }
            let mid = y + h / 2
            for segment in lit[character]! {
                switch segment {
                case "a": fill(x + t + 2, y, x + w - t - 2, y + t)
                case "g": fill(x + t + 2, mid - t / 2, x + w - t - 2, mid + t - t / 2)
                case "d": fill(x + t + 2, y + h - t, x + w - t - 2, y + h)
                case "f": fill(x, y + t / 2 + 2, x + t, mid - 2)
                case "b": fill(x + w - t, y + t / 2 + 2, x + w, mid - 2)
                case "e": fill(x, mid + 2, x + t, y + h - t / 2 - 2)
                default: fill(x + w - t, mid + 2, x + w, y + h - t / 2 - 2)
                }
            }
            x += w + 2 * t + 4
        }
    }

    @Test func theCutterFindsGlyphsPointsAndStrokes() throws {
        let (width, height) = (220, 80)
        var bytes = [UInt8](repeating: 230, count: width * height)
        Self.draw("-1.8", into: &bytes, width: width, x: 14, y: 12, w: 30, h: 56, t: 7)
        let cells = try #require(SegmentCutter.cut(GreyPixels(width: width, height: height, bytes: bytes)))
        let pattern = cells.map { cell -> String in
            switch cell {
            case .point: "."
            case .glyph(_, _, let strokes): "g\(strokes)"
            }
        }
        // The minus is one stroke, the 1 two, the 8 seven; the point stands between them.
        #expect(pattern == ["g1", "g2", ".", "g7"])
        // Light on dark is cut the same.
        let inverted = GreyPixels(width: width, height: height, bytes: bytes.map { 255 - $0 })
        #expect(SegmentCutter.cut(inverted)?.count == 4)
        // A blank picture has nothing to cut.
        #expect(
            SegmentCutter.cut(
                GreyPixels(width: width, height: height, bytes: [UInt8](repeating: 128, count: width * height))) == nil)
    }

    /// A decimal point in the columns of the digit before it (set close, or leaning on it in a perspective:
    /// perspective-2's 34.3 was read `343` at 0.89) is a point of its own, not a stroke of the digit.
    @Test func aPointInsideADigitsColumnsIsAPoint() throws {
        let (width, height) = (220, 80)
        var bytes = [UInt8](repeating: 230, count: width * height)
        Self.draw("48", into: &bytes, width: width, x: 14, y: 12, w: 30, h: 56, t: 7)
        // Left of the 4's right segment, on the baseline, two columns from it.
        for y in (12 + 56 - 7)..<(12 + 56) {
            for x in (14 + 30 - 7 - 8)..<(14 + 30 - 7 - 2) { bytes[y * width + x] = 20 }
        }
        let cells = try #require(SegmentCutter.cut(GreyPixels(width: width, height: height, bytes: bytes)))
        let pattern = cells.map { cell -> String in
            switch cell {
            case .point: "."
            case .glyph(_, _, let strokes): "g\(strokes)"
            }
        }
        #expect(pattern == ["g4", ".", "g7"])
    }

    static func photos() throws -> [(name: String, condition: String, values: [String])] {
        let lines = try String(
            contentsOf: DisplayReadingTests.root.appendingPathComponent("Tests/SevenSegmentPhotos/truth.tsv"),
            encoding: .utf8
        )
        .split(separator: "\n").dropFirst()
        return lines.map { line in
            let fields = line.split(separator: "\t").map(String.init)
            return (fields[0], fields[1], Array(fields[4...]))
        }
    }

    /// Values read right (a word of the reading is the value, a unit glued after it allowed) per condition, PP-OCR
    /// alone against PP-OCR with the reader; and every number of the reading with the reader sorted: right, right but
    /// flagged (confidence under `RecordPolicy.minimumConfidence`, where a template flags it), wrong but flagged, wrong
    /// and not flagged (a value a template would store as if right: none allowed). Prints the tables the README quotes.
    @Test func segmentDisplaysAreReadWithTheReader() throws {
        try #require(Self.installed, Self.missing)
        let models = try DisplayReadingTests.models.get()
        let plain = try PPOCREngine(models: models)
        let withReader = try PPOCREngine(models: models, segments: try SevenSegmentModel.load(directory: Self.folder))
        var right: [String: (plain: Int, reader: Int, total: Int)] = [:]
        var conditions: [String] = []
        var sorted: [String: [Int]] = [:], silentlyWrong: [String] = []
        for photo in try Self.photos() {
            let data = try Data(
                contentsOf: DisplayReadingTests.root.appendingPathComponent("Tests/SevenSegmentPhotos/\(photo.name)"))
            let image = try ImageDecoder().decode(data).pages[0]
            let pixels = RGBPixels(width: image.width, height: image.height, bytes: try image.rgbBytes())
            let plainWords = try plain.read(pixels).flatMap(\.words).map(\.text)
            let read = try withReader.read(pixels).flatMap(\.words)
            let readerWords = read.map(\.text)
            if !conditions.contains(photo.condition) { conditions.append(photo.condition) }
            var row = right[photo.condition] ?? (0, 0, 0)
            for value in photo.values {
                let found = { (words: [String]) in words.contains { Self.isValue($0, value) } }
                row.plain += found(plainWords) ? 1 : 0
                row.reader += found(readerWords) ? 1 : 0
                row.total += 1
                // The reader never costs a value PP-OCR read right.
                #expect(
                    !found(plainWords) || found(readerWords),
                    "\(photo.name): \(value) lost with the reader (\(readerWords))")
            }
            for word in read where word.text.contains(where: \.isNumber) {
                let isRight = photo.values.contains { Self.isValue(word.text, $0) }
                let flagged = word.confidence < RecordPolicy.minimumConfidence
                sorted[photo.condition, default: [0, 0, 0, 0]][isRight ? (flagged ? 1 : 0) : (flagged ? 2 : 3)] += 1
                if !isRight, !flagged { silentlyWrong.append("\(photo.name): \(word.text) at \(word.confidence)") }
            }
            print(
                "\(photo.name) \(photo.values): PP-OCR \(plainWords), with the reader \(read.map { "\($0.text) \(String(format: "%.2f", $0.confidence))\($0.doubt.map { " (\($0))" } ?? "")" })"
            )
            right[photo.condition] = row
        }
        let all = right.values.reduce((0, 0, 0)) { ($0.0 + $1.plain, $0.1 + $1.reader, $0.2 + $1.total) }
        print("| reader | " + conditions.joined(separator: " | ") + " | all |")
        print(
            "| PP-OCR alone | " + conditions.map { "\(right[$0]!.plain)/\(right[$0]!.total)" }.joined(separator: " | ")
                + " | \(all.0)/\(all.2) |")
        print(
            "| with the seven-segment reader | "
                + conditions.map { "\(right[$0]!.reader)/\(right[$0]!.total)" }.joined(separator: " | ")
                + " | \(all.1)/\(all.2) |")
        print("| numbers read | right | right, flagged | wrong, flagged | wrong, not flagged |")
        for condition in conditions + ["all"] {
            let counts =
                condition == "all"
                ? (0..<4).map { column in sorted.values.map { $0[column] }.reduce(0, +) }
                : sorted[condition] ?? [0, 0, 0, 0]
            print("| \(condition) | " + counts.map(String.init).joined(separator: " | ") + " |")
        }
        // The issue's goal is 90 % of seven-segment values right; the reader does not reach it yet (README, "Seven
        // segments"): it must add values, never lose one. 32 since an unsure value stands, flagged, where PP-OCR read
        // no number (27 before with the same model); 30 leaves room for a retrained model's small differences.
        #expect(all.1 > all.0, "\(all.1) of \(all.2) values right with the reader, \(all.0) without")
        #expect(all.1 >= 30, "\(all.1) of \(all.2) values right with the reader")
        // No number wrong without a flag, the reader's or PP-OCR's (before: `343` for 34.3 and `01.` for 60.1 at 0.90,
        // PP-OCR's `7.9.5`, `1.4.5`, `60.`, and `8` and `2` of 82, all unflagged).
        #expect(silentlyWrong.isEmpty, "read wrong without a flag: \(silentlyWrong)")
    }

    /// Whether a word read is `value`, with a unit or sign glued after it (`25.3°C`, `67%`).
    static func isValue(_ word: String, _ value: String) -> Bool {
        guard word.hasPrefix(value) else { return false }
        return word.dropFirst(value.count).first.map { !$0.isNumber && $0 != "." } ?? true
    }
}
