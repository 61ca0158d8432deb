import Base
import Foundation
import PPOCR
import SevenSegment
import Testing
import TextRecognition

@testable import OCRCore

/// Tesseract and PP-OCR combined per region by confidence (issue 40).
struct EngineCombinationTests {
    static func observation(
        _ level: ObservationLevel, _ text: String, _ confidence: Double, _ x: Int, _ y: Int, _ w: Int, _ h: Int
    ) -> Observation {
        let box = PixelRect(x: x, y: y, width: w, height: h)
        return Observation(
            level: level, text: text, confidence: confidence, box: box,
            normalizedBox: NormalizedRect(box, imageWidth: 400, imageHeight: 300))
    }

    static func line(_ text: String, _ confidence: Double, _ x: Int, _ y: Int, _ w: Int, _ h: Int) -> PPOCRLine {
        let box = TextBox(x: x, y: y, width: w, height: h, score: 0.9)
        return PPOCRLine(
            text: text, confidence: confidence, box: box,
            words: [PPOCRWord(text: text, confidence: confidence, box: box)])
    }

    /// Tesseract read one row "Napětí 9.8v" unsure, and "Proud 2.10 A" surely; PP-OCR read the first row's label and
    /// value as two lines surely, the second row unsure, and a third row Tesseract missed.
    static let page = PageResult(
        width: 400, height: 300, orientationDegrees: 0, deskewDegrees: 0, inverted: false,
        text: "Napětí 9.8v\n\nProud 2.10 A",
        observations: [
            observation(.block, "Napětí 9.8v", 0.6, 10, 10, 300, 30),
            observation(.line, "Napětí 9.8v", 0.6, 10, 10, 300, 30),
            observation(.word, "Napětí", 0.7, 10, 10, 100, 30), observation(.word, "9.8v", 0.5, 200, 10, 110, 30),
            observation(.block, "Proud 2.10 A", 0.95, 10, 60, 300, 30),
            observation(.line, "Proud 2.10 A", 0.95, 10, 60, 300, 30),
            observation(.word, "Proud", 0.95, 10, 60, 100, 30), observation(.word, "2.10", 0.95, 200, 60, 80, 30),
            observation(.word, "A", 0.95, 290, 60, 20, 30),
        ])

    @Test func theSurerEngineKeepsEachRegionAndEachObservationSaysWhichReadIt() {
        let lines = [
            Self.line("Napětí", 0.99, 8, 8, 104, 34), Self.line("239.8 V", 0.98, 180, 8, 135, 34),
            Self.line("Pr0ud 2.1O A", 0.7, 8, 58, 305, 34), Self.line("Nabito 45 %", 0.97, 8, 110, 300, 34),
        ]
        let combined = EngineCombination.combine(
            Self.page, lines: lines, minimumTextHeight: 0, customWords: CustomWordCorrector([]), index: 0)
        #expect(combined.text == "Napětí\n\n239.8 V\n\nProud 2.10 A\n\nNabito 45 %")
        let words = combined.observations.filter { $0.level == .word }
        #expect(words.map(\.text) == ["Napětí", "239.8 V", "Proud", "2.10", "A", "Nabito 45 %"])
        #expect(combined.observations.filter { $0.text.hasPrefix("Proud") }.allSatisfy { $0.engine == .tesseract })
        #expect(
            combined.observations.filter { $0.text.hasPrefix("239.8") || $0.text.hasPrefix("Nabito") }.allSatisfy {
                $0.engine == .ppocr
            })
        #expect(!combined.observations.contains { $0.text.contains("9.8v") })
    }

    @Test func withoutPPOCRLinesThePageIsAsTesseractReadIt() {
        #expect(
            EngineCombination.combine(
                Self.page, lines: [], minimumTextHeight: 0, customWords: CustomWordCorrector([]), index: 0) == Self.page
        )
        // A PP-OCR line less sure than Tesseract's over the same region changes nothing.
        let unsure = [Self.line("Proud 2.1O A", 0.5, 10, 60, 300, 30)]
        let combined = EngineCombination.combine(
            Self.page, lines: unsure, minimumTextHeight: 0, customWords: CustomWordCorrector([]), index: 0)
        #expect(combined.observations.filter { $0.engine == .ppocr }.isEmpty)
        #expect(combined.text == Self.page.text)
    }
}

/// The display photos read by Tesseract alone and with PP-OCR beside it, per condition, with the time per photo.
@Suite(.serialized) struct DisplayPhotoPPOCRTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    static let folder =
        ProcessInfo.processInfo.environment["MENAGERIE_PPOCR"]
        ?? root.appendingPathComponent("compose/.cache/ppocr").path
    /// Under CI=true the test runs (and fails) without it, as `compose test` installs it.
    static let installed =
        FileManager.default.fileExists(atPath: folder + "/" + PPOCRModels.manifestName)
        || ProcessInfo.processInfo.environment["CI"] == "true"
    static let missing: Comment = "skipped: PP-OCR is not installed (compose/compose ppocr; set CI=true to require it)"
    /// The seven-segment reader as `compose/compose sevenseg` installs it (or MENAGERIE_SEVENSEG): part of the default
    /// reading when installed (and under CI=true, which installs it).
    static let sevenSegmentFolder =
        ProcessInfo.processInfo.environment["MENAGERIE_SEVENSEG"]
        ?? root.appendingPathComponent("compose/.cache/sevenseg").path

    /// PP-OCR as the service runs it by default: with the seven-segment reader when it is installed.
    static func defaultPool() throws -> PPOCRPool {
        let segments =
            FileManager.default.fileExists(atPath: sevenSegmentFolder + "/" + SevenSegmentModel.manifestName)
            || ProcessInfo.processInfo.environment["CI"] == "true"
        return PPOCRPool(
            models: try PPOCRModels.load(directory: folder),
            segments: segments ? try SevenSegmentModel.load(directory: sevenSegmentFolder) : nil)
    }

    /// A 12-megapixel JPEG is decoded reduced (`PhotoSizing`); PP-OCR reads it as it reads a small photo, its boxes in
    /// the file's pixels. Before, a reduced photo never reached PP-OCR: Tesseract alone read `Napeti` and 2.07 for 5.07.
    @Test func aPhoneSizeJPEGIsReadByPPOCRToo() async throws {
        try #require(Self.installed, Self.missing)
        let recognizer = TextRecognizer(
            engines: sharedRecognizer.engines, ppocr: PPOCRPool(models: try PPOCRModels.load(directory: Self.folder)))
        let photo = try DisplayPhotoFixture.photo("clean-1.png")
        let image = try ImageDecoder().decode(try photo.data()).pages[0].scaled(by: 7.715)
        let page = try #require(try await recognizer.recognize(try image.encoded(as: .jpeg)).pages.first)
        let words = page.observations.filter { $0.level == .word }
        #expect(words.contains { $0.engine == .ppocr }, "\(words.map { "\($0.text) \($0.engine)" })")
        for value in photo.values + ["Napětí"] {
            #expect(words.contains { $0.text == value }, "\(value) not among \(words.map(\.text))")
        }
        for word in words {
            #expect(
                word.box.x >= 0 && word.box.y >= 0 && word.box.x + word.box.width <= page.width
                    && word.box.y + word.box.height <= page.height)
        }
        // The voltage's box is where the display shows it (Tesseract's and PP-OCR's boxes agree within a few pixels).
        let voltage = try #require(words.first { $0.text == photo.values[0] })
        #expect(voltage.box.x > page.width / 2 && voltage.box.y > page.height / 4 && voltage.box.y < page.height / 2)
    }

    @Test func ppocrReadsTheDisplaysAndSaysSo() async throws {
        try #require(Self.installed, Self.missing)
        let pool = try Self.defaultPool()
        let combined = TextRecognizer(engines: sharedRecognizer.engines, ppocr: pool)
        let photos = try DisplayPhotoFixture.photos().filter {
            !DisplayPhotoFixture.templatePhotos.contains($0.condition) && $0.condition != "czech"
        }
        let conditions = DisplayPhotoFixture.conditions(photos)
        var read: [String: [String: Int]] = [:], shown: [String: Int] = [:], seconds: [String: Double] = [:]
        var ppocrObservations = 0
        let clock = ContinuousClock()
        for photo in photos {
            shown[photo.condition, default: 0] += photo.values.filter { !$0.isEmpty }.count
            for (name, recognizer) in [("Tesseract alone", sharedRecognizer), ("with PP-OCR", combined)] {
                let start = clock.now
                let result = try await recognizer.recognize(try photo.data())
                seconds[name, default: 0] += (clock.now - start).seconds
                read[name, default: [:]][photo.condition, default: 0] += DisplayPhotoFixture.valuesRead(
                    result.text, photo: photo)
                if name == "with PP-OCR" {
                    ppocrObservations += result.observations.filter { $0.engine == .ppocr }.count
                }
            }
        }
        var table =
            "| reader | " + conditions.joined(separator: " | ") + " | all | s per photo (debug) |\n|---|"
            + String(repeating: "---|", count: conditions.count + 2) + "\n"
        let total = shown.values.reduce(0, +)
        for name in ["Tesseract alone", "with PP-OCR"] {
            let counts = conditions.map { read[name]?[$0] ?? 0 }
            table +=
                "| \(name) | " + zip(conditions, counts).map { "\($1)/\(shown[$0]!)" }.joined(separator: " | ")
                + " | \(counts.reduce(0, +))/\(total) | \(String(format: "%.2f", seconds[name]! / Double(photos.count))) |\n"
        }
        print("Display photos, Tesseract alone and with PP-OCR (default level):\n" + table)
        let alone = read["Tesseract alone"]!.values.reduce(0, +), both = read["with PP-OCR"]!.values.reduce(0, +)
        #expect(ppocrObservations > 0)
        #expect(both >= alone)
        let textConditions = conditions.filter { $0 != "seven-segment" }
        let textValuesRead: Int = textConditions.map { read["with PP-OCR"]![$0] ?? 0 }.reduce(0, +)
        let textValuesShown: Int = textConditions.map { shown[$0]! }.reduce(0, +)
        #expect(textValuesRead >= textValuesShown - 2)
    }

    /// Templates with PP-OCR beside Tesseract, as DisplayPhotoMatchingTests does with Tesseract alone: a template from
    /// `template.png`, every other photo matched to it; no value silently wrong.
    @Test func templatesWithPPOCRLeaveNoValueSilentlyWrong() async throws {
        try #require(Self.installed, Self.missing)
        let recognizer = TextRecognizer(engines: sharedRecognizer.engines, ppocr: try Self.defaultPool())
        let templatePhoto = try DisplayPhotoFixture.photo("template.png")
        let first = try await recognizer.recognize(try templatePhoto.data())
        let template = try zip(DisplayPhotoFixture.valueNames, templatePhoto.values).map { name, value in
            let picked = try #require(
                first.observations.first { $0.level == .word && DisplayPhotoMatchingTests.number($0.text) == value },
                "\(value) in \(first.text)")
            return ValueDefinition(name: name, observation: picked, among: first.observations)
        }
        var table: [String: [Int]] = [:], order: [String] = [], failures: [String] = []
        var textRight = 0, textShown = 0
        for photo in try DisplayPhotoFixture.photos() where photo.file != "template.png" && photo.condition != "czech" {
            if !order.contains(photo.condition) { order.append(photo.condition) }
            let result = try await recognizer.recognize(try photo.data())
            for (value, truth) in zip(TemplateMatcher.match(template, in: result.observations), photo.values) {
                let right = !truth.isEmpty && DisplayPhotoMatchingTests.number(value.text) == truth
                let column = right ? (value.isUncertain ? 1 : 0) : (value.isUncertain ? 2 : 3)
                table[photo.condition, default: [0, 0, 0, 0]][column] += 1
                if column == 3 { failures.append("\(photo.file) \(value.name): \"\(value.text)\" for \(truth)") }
                if photo.condition != "seven-segment", !truth.isEmpty {
                    textShown += 1
                    textRight += right ? 1 : 0
                }
            }
        }
        var text =
            "| condition | right | right, flagged | wrong, flagged | wrong, not flagged |\n|---|---|---|---|---|\n"
        for condition in order {
            text += "| \(condition) | " + table[condition]!.map(String.init).joined(separator: " | ") + " |\n"
        }
        print("Template values with PP-OCR on Tests/DisplayPhotos (template from template.png):\n" + text)
        #expect(failures.isEmpty, "silently wrong: \(failures)")
        // The issue's goal for text displays: 95 % of the values they show right (flagged or not).
        print("text displays: \(textRight) of \(textShown) values shown right")
        #expect(textRight * 100 >= textShown * 95, "\(textRight) of \(textShown) text-display values right")
    }
}
