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

    /// A glare patch (the background lifted from 150 to 250 across the right half, the ink with it) and a 10° turn:
    /// the line is flattened and levelled before it is cut, so each digit is still one glyph of its strokes (before:
    /// Otsu's one threshold took the glare for ink, and a turned line's glyphs were cut between its rows).
    @Test func aLineUnderGlareOrTurnedIsCutIntoItsDigits() throws {
        let (width, height) = (220, 80)
        var bytes = [UInt8](repeating: 150, count: width * height)
        Self.draw("48", into: &bytes, width: width, x: 40, y: 12, w: 30, h: 56, t: 7)
        var glare = bytes
        for y in 0..<height {
            for x in 0..<width {
                let lift = max(0, min(100, (x - 60) * 3))
                glare[y * width + x] = UInt8(min(255, Int(bytes[y * width + x]) + lift))
            }
        }
        let strokes = { (cells: [SegmentCell]) in
            cells.map { cell -> String in
                switch cell {
                case .point: "."
                case .glyph(_, _, let strokes): "g\(strokes)"
                }
            }
        }
        #expect(
            try strokes(#require(SegmentCutter.cut(GreyPixels(width: width, height: height, bytes: glare)))) == [
                "g4", "g7",
            ])
        // The same digits turned by 10° about the picture's centre.
        let (sine, cosine) = (sin(10 * Double.pi / 180), cos(10 * Double.pi / 180))
        var turned = [UInt8](repeating: 150, count: width * height)
        for y in 0..<height {
            for x in 0..<width {
                let u = Double(x - width / 2), v = Double(y - height / 2)
                let sx = Int((u * cosine - v * sine).rounded()) + width / 2,
                    sy = Int((u * sine + v * cosine).rounded()) + height / 2
                if sx >= 0, sx < width, sy >= 0, sy < height { turned[y * width + x] = bytes[sy * width + sx] }
            }
        }
        #expect(
            try strokes(#require(SegmentCutter.cut(GreyPixels(width: width, height: height, bytes: turned)))) == [
                "g4", "g7",
            ])
    }

    /// A turned display's line climbs blob by blob (a digit 60 high, the next 10 higher): it is one line, not
    /// broken where the line's box grew taller than a digit (Tests/SevenSegmentPhotos angled-3's 37.7 was not found).
    @Test func aTurnedLinesDigitsAreOneLine() {
        let blobs = (0..<4).map { SegmentRegions.Box(x: 100 + $0 * 45, y: 200 - $0 * 10, width: 35, height: 60) }
        #expect(SegmentRegions.lines(blobs) == [SegmentRegions.Box(x: 100, y: 170, width: 170, height: 90)])
    }

    static func photos(_ folder: String) throws -> [(name: String, condition: String, values: [String])] {
        let lines = try String(
            contentsOf: DisplayReadingTests.root.appendingPathComponent("\(folder)/truth.tsv"), encoding: .utf8
        )
        .split(separator: "\n").dropFirst()
        return lines.map { line in
            let fields = line.split(separator: "\t").map(String.init)
            return (fields[0], fields[1], Array(fields[4...]))
        }
    }

    /// What reading a folder of photos gave: values right per condition, PP-OCR alone and with the reader, and
    /// every number of the reading with the reader sorted right, right but flagged, wrong but flagged, wrong and
    /// not flagged.
    struct Figures {
        var conditions: [String] = []
        var right: [String: (plain: Int, reader: Int, total: Int)] = [:]
        var sorted: [String: [Int]] = [:]
        var silentlyWrong: [String] = []
        var lost: [String] = []
        var all: (plain: Int, reader: Int, total: Int) {
            right.values.reduce((0, 0, 0)) { ($0.0 + $1.plain, $0.1 + $1.reader, $0.2 + $1.total) }
        }
    }

    /// Reads every photo of `folder` (its truth.tsv: file, condition, style, device, values) with PP-OCR alone and
    /// with the reader, prints each reading and the tables the README quotes.
    static func read(_ folder: String) throws -> Figures {
        let models = try DisplayReadingTests.models.get()
        let plain = try PPOCREngine(models: models)
        let withReader = try PPOCREngine(models: models, segments: try SevenSegmentModel.load(directory: Self.folder))
        var figures = Figures()
        for photo in try Self.photos(folder) {
            let data = try Data(
                contentsOf: DisplayReadingTests.root.appendingPathComponent("\(folder)/\(photo.name)"))
            let image = try ImageDecoder().decode(data).pages[0]
            let pixels = RGBPixels(width: image.width, height: image.height, bytes: try image.rgbBytes())
            let plainWords = try plain.read(pixels).flatMap(\.words).map(\.text)
            let read = try withReader.read(pixels).flatMap(\.words)
            let readerWords = read.map(\.text)
            if !figures.conditions.contains(photo.condition) { figures.conditions.append(photo.condition) }
            var row = figures.right[photo.condition] ?? (0, 0, 0)
            for value in photo.values {
                let found = { (words: [String]) in words.contains { Self.isValue($0, value) } }
                row.plain += found(plainWords) ? 1 : 0
                row.reader += found(readerWords) ? 1 : 0
                row.total += 1
                if found(plainWords) && !found(readerWords) { figures.lost.append("\(photo.name): \(value)") }
            }
            for word in read where word.text.contains(where: \.isNumber) {
                let isRight = photo.values.contains { Self.isValue(word.text, $0) }
                let flagged = word.confidence < RecordPolicy.minimumConfidence
                figures.sorted[photo.condition, default: [0, 0, 0, 0]][
                    isRight ? (flagged ? 1 : 0) : (flagged ? 2 : 3)] +=
                    1
                if !isRight, !flagged {
                    figures.silentlyWrong.append("\(photo.name): \(word.text) at \(word.confidence)")
                }
            }
            print(
                "\(photo.name) \(photo.values): PP-OCR \(plainWords), with the reader \(read.map { "\($0.text) \(String(format: "%.2f", $0.confidence))\($0.doubt.map { " (\($0))" } ?? "")" })"
            )
            figures.right[photo.condition] = row
        }
        let (conditions, right, all) = (figures.conditions, figures.right, figures.all)
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
                ? (0..<4).map { column in figures.sorted.values.map { $0[column] }.reduce(0, +) }
                : figures.sorted[condition] ?? [0, 0, 0, 0]
            print("| \(condition) | " + counts.map(String.init).joined(separator: " | ") + " |")
        }
        return figures
    }

    /// Values read right (a word of the reading is the value, a unit glued after it allowed) per condition, PP-OCR
    /// alone against PP-OCR with the reader; and every number of the reading with the reader sorted: right, right but
    /// flagged (confidence under `RecordPolicy.minimumConfidence`, where a template flags it), wrong but flagged, wrong
    /// and not flagged (a value a template would store as if right: none allowed). Prints the tables the README quotes.
    @Test func segmentDisplaysAreReadWithTheReader() throws {
        try #require(Self.installed, Self.missing)
        let figures = try Self.read("Tests/SevenSegmentPhotos")
        let all = figures.all
        // The reader never costs a value PP-OCR read right.
        #expect(figures.lost.isEmpty, "lost with the reader: \(figures.lost)")
        // The issue's goal is 90 % of seven-segment values right; the reader does not reach it yet (README, "Seven
        // segments"): it must add values, never lose one. 35 since lines are flattened and levelled before they are
        // cut (32 before), 36 with split numbers read together, 40 with PP-OCR's recogniser on the reader's regions; 38
        // leaves room for a retrained model's small differences.
        #expect(all.1 > all.0, "\(all.1) of \(all.2) values right with the reader, \(all.0) without")
        #expect(all.1 >= 38, "\(all.1) of \(all.2) values right with the reader")
        // No number wrong without a flag, the reader's or PP-OCR's (before: `343` for 34.3 and `01.` for 60.1 at 0.90,
        // PP-OCR's `7.9.5`, `1.4.5`, `60.`, and `8` and `2` of 82, all unflagged).
        #expect(figures.silentlyWrong.isEmpty, "read wrong without a flag: \(figures.silentlyWrong)")
    }

    /// The same on Tests/SevenSegmentHeldOut, a second generator's displays (its own segment geometry, digit forms,
    /// colours, turns up to 12°, glare streaks, shadows, noise): a change tuned to the first set is checked on
    /// displays neither it nor the training renderer drew.
    @Test func heldOutDisplaysAreReadWithTheReader() throws {
        try #require(Self.installed, Self.missing)
        let figures = try Self.read("Tests/SevenSegmentHeldOut")
        #expect(figures.lost.isEmpty, "lost with the reader: \(figures.lost)")
        // 43 of 54 right (31 by PP-OCR alone; 36 before split numbers were read together); 41 leaves room for a
        // retrained model's small differences.
        #expect(figures.all.1 >= 41, "\(figures.all.1) of \(figures.all.2) values right with the reader")
        // No number wrong without a flag: 21 before PP-OCR's split and contradicted numbers were doubted, 3 before its
        // numbers on a segment display were held to the reader's reading (turned-4's `152` for 162, noisy-2's `243`
        // for 24.3, turned-glare-1's `7.9` for 79, where heavy or blurred segments touch and look like print).
        #expect(figures.silentlyWrong.isEmpty, "read wrong without a flag: \(figures.silentlyWrong)")
    }

    /// A label PP-OCR read surely gets no value of the reader's beside it: the accents and joins of `Napětí` cut into
    /// two glyphs the reader took for `88`, which went into the label's line flagged, so the line's confidence fell
    /// under Tesseract's `Napeti` and a plain text display's scan lost its diacritics (`menagerie-bench ocr`'s 12 MP
    /// photo, CER 5 % against RapidOCR's 0 %).
    @Test func aLabelsAccentsAreNotReadAsSegments() throws {
        try #require(Self.installed, Self.missing)
        let engine = try PPOCREngine(
            models: try DisplayReadingTests.models.get(), segments: try SevenSegmentModel.load(directory: Self.folder))
        for (name, factor) in [("clean-1.png", 1.0), ("clean-1.png", 2.5), ("inverted-1.png", 1.0)] {
            let data = try Data(
                contentsOf: DisplayReadingTests.root.appendingPathComponent("Tests/DisplayPhotos/\(name)"))
            let image = try ImageDecoder().decode(data).pages[0].scaled(by: factor)
            let pixels = RGBPixels(width: image.width, height: image.height, bytes: try image.rgbBytes())
            let lines = try engine.read(pixels)
            let label = try #require(
                lines.first { $0.text.contains("Nap") }, "\(name) × \(factor): \(lines.map(\.text))")
            #expect(label.text == "Napětí" && label.confidence > 0.95, "\(name) × \(factor): \(lines.map(\.text))")
            #expect(lines.allSatisfy { $0.words.allSatisfy { $0.doubt == nil } }, "\(name) × \(factor): \(lines)")
        }
    }

    /// Whether a word read is `value`, with a unit or sign glued after it (`25.3°C`, `67%`).
    static func isValue(_ word: String, _ value: String) -> Bool {
        guard word.hasPrefix(value) else { return false }
        return word.dropFirst(value.count).first.map { !$0.isNumber && $0 != "." } ?? true
    }
}
