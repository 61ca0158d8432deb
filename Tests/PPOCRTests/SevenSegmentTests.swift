import Foundation
import OpenCVDNN
import Testing
import TextRecognition
@testable import PPOCR
@testable import SevenSegment

/// The seven-segment reader: the cutter on hand-drawn segments, and values read off Tests/SevenSegmentPhotos (segment
/// shapes and conditions the training renderer never made) by PP-OCR alone and with the reader.
@Suite(.serialized) struct SevenSegmentTests {
    /// The folder `compose/compose sevenseg` installs (or MENAGERIE_SEVENSEG).
    static let folder = ProcessInfo.processInfo.environment["MENAGERIE_SEVENSEG"]
        ?? DisplayReadingTests.root.appendingPathComponent("compose/.cache/sevenseg").path
    static let installed = (FileManager.default.fileExists(atPath: folder + "/" + SevenSegmentModel.manifestName)
        && DisplayReadingTests.installed) || ProcessInfo.processInfo.environment["CI"] == "true"
    static let missing: Comment = "skipped: PP-OCR or the seven-segment reader is not installed (compose/compose ppocr, compose/compose sevenseg; set CI=true to require them)"

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
        #expect(SegmentCutter.cut(GreyPixels(width: width, height: height, bytes: [UInt8](repeating: 128, count: width * height))) == nil)
    }

    static func photos() throws -> [(name: String, condition: String, values: [String])] {
        let lines = try String(contentsOf: DisplayReadingTests.root.appendingPathComponent("Tests/SevenSegmentPhotos/truth.tsv"), encoding: .utf8)
            .split(separator: "\n").dropFirst()
        return lines.map { line in
            let fields = line.split(separator: "\t").map(String.init)
            return (fields[0], fields[1], Array(fields[4...]))
        }
    }

    /// Values read right (a word of the reading is the value, a unit glued after it allowed) per condition, PP-OCR
    /// alone against PP-OCR with the reader; prints the table the README quotes.
    @Test func segmentDisplaysAreReadWithTheReader() throws {
        try #require(Self.installed, Self.missing)
        let models = try DisplayReadingTests.models.get()
        let plain = try PPOCREngine(models: models)
        let withReader = try PPOCREngine(models: models, segments: try SevenSegmentModel.load(directory: Self.folder))
        var right: [String: (plain: Int, reader: Int, total: Int)] = [:]
        var conditions: [String] = []
        var wrongs: [String] = []
        for photo in try Self.photos() {
            let data = try Data(contentsOf: DisplayReadingTests.root.appendingPathComponent("Tests/SevenSegmentPhotos/\(photo.name)"))
            let image = try ImageDecoder().decode(data).pages[0]
            let pixels = RGBPixels(width: image.width, height: image.height, bytes: try image.rgbBytes())
            let plainWords = try plain.read(pixels).flatMap(\.words).map(\.text)
            let readerWords = try withReader.read(pixels).flatMap(\.words).map(\.text)
            if !conditions.contains(photo.condition) { conditions.append(photo.condition) }
            var row = right[photo.condition] ?? (0, 0, 0)
            for value in photo.values {
                let found = { (words: [String]) in words.contains { Self.isValue($0, value) } }
                row.plain += found(plainWords) ? 1 : 0
                row.reader += found(readerWords) ? 1 : 0
                row.total += 1
                // The reader never costs a value PP-OCR read right.
                #expect(!found(plainWords) || found(readerWords), "\(photo.name): \(value) lost with the reader (\(readerWords))")
            }
            // A number the reader put there that is none of the photo's values: read wrong.
            let wrong = readerWords.filter { word in
                word.contains(where: \.isNumber) && !plainWords.contains(word) && !photo.values.contains { Self.isValue(word, $0) }
            }
            wrongs += wrong.map { "\(photo.name): \($0)" }
            print("\(photo.name) \(photo.values): PP-OCR \(plainWords), with the reader \(readerWords)")
            right[photo.condition] = row
        }
        let all = right.values.reduce((0, 0, 0)) { ($0.0 + $1.plain, $0.1 + $1.reader, $0.2 + $1.total) }
        print("| reader | " + conditions.joined(separator: " | ") + " | all |")
        print("| PP-OCR alone | " + conditions.map { "\(right[$0]!.plain)/\(right[$0]!.total)" }.joined(separator: " | ") + " | \(all.0)/\(all.2) |")
        print("| with the seven-segment reader | " + conditions.map { "\(right[$0]!.reader)/\(right[$0]!.total)" }.joined(separator: " | ") + " | \(all.1)/\(all.2) |")
        // The issue's goal is 90 % of seven-segment values right; the reader does not reach it yet (README, "Seven
        // segments"): it must add values, never lose one. 29 of 48 since the renderer draws more segment shapes and
        // pictures of no value and a fragment of a longer reading is refused (24 before; 28 leaves room for a retrained
        // model's small differences).
        #expect(all.1 > all.0, "\(all.1) of \(all.2) values right with the reader, \(all.0) without")
        #expect(all.1 >= 28, "\(all.1) of \(all.2) values right with the reader")
        // Values the reader reads wrong (the issue wants none unflagged): 4 before a fragment of a longer, unsure
        // reading was refused (`15` of 15.7, `103` of 103.1), 2 now (`01` of 60.1, `343` for 34.3).
        print("read wrong by the reader: \(wrongs)")
        #expect(wrongs.count <= 2, "read wrong by the reader: \(wrongs)")
    }

    /// Whether a word read is `value`, with a unit or sign glued after it (`25.3°C`, `67%`).
    static func isValue(_ word: String, _ value: String) -> Bool {
        guard word.hasPrefix(value) else { return false }
        return word.dropFirst(value.count).first.map { !$0.isNumber && $0 != "." } ?? true
    }
}
