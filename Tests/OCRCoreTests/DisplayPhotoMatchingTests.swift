import Foundation
import Testing
import TextRecognition

@testable import OCRCore

/// Templates on the committed display photos (`Tests/DisplayPhotos`): a template made from `template.png` (the
/// user picks the three values), then every other photo matched to it with the defaults. Every value is either
/// right or flagged uncertain, never silently wrong; prints the per-condition table Services/OCR/README.md shows.
@Suite(.serialized) struct DisplayPhotoMatchingTests {
    /// The template as `gateway ocr template create --values` makes it: each value the word that reads as the
    /// truth, with its shape and label learned from the photo.
    static func template() async throws -> [ValueDefinition] {
        let photo = try DisplayPhotoFixture.photo("template.png")
        let result = try await sharedRecognizer.recognize(try photo.data())
        return try zip(DisplayPhotoFixture.valueNames, photo.values).map { name, value in
            let picked = try #require(
                result.observations.first { $0.level == .word && Self.number($0.text) == value },
                "\(value) in \(result.text)")
            return ValueDefinition(name: name, observation: picked, among: result.observations)
        }
    }

    /// The number of a reading: a unit stuck to it (`14.38V`) and spaces dropped.
    static func number(_ text: String) -> String {
        var text = text.filter { !$0.isWhitespace }
        while let last = text.last, "VA%".contains(last) { text.removeLast() }
        return text
    }

    @Test func templateLearnsShapesAndLabels() async throws {
        let values = try await Self.template()
        #expect(values.map(\.shape) == ["##.##V", "#.##A", "##%"], "\(values)")
        #expect(
            values.map { ValueShape.labelSimilarity($0.label, "Napětí") > 0.7 } == [true, false, false], "\(values)")
        #expect(
            ValueShape.labelSimilarity(values[1].label, "Proud") > 0.7
                && ValueShape.labelSimilarity(values[2].label, "Nabito") > 0.7)
    }

    @Test func everyValueIsRightOrFlaggedAndAShiftedDisplayKeepsItsSlots() async throws {
        let template = try await Self.template()
        var table: [String: (right: Int, flaggedRight: Int, flaggedWrong: Int, silentlyWrong: Int)] = [:]
        var order: [String] = []
        var failures: [String] = []
        for photo in try DisplayPhotoFixture.photos() where photo.file != "template.png" {
            if !order.contains(photo.condition) { order.append(photo.condition) }
            let result = try await sharedRecognizer.recognize(try photo.data())
            let matched = TemplateMatcher.match(template, in: result.observations)
            for (value, truth) in zip(matched, photo.values) {
                let right = !truth.isEmpty && Self.number(value.text) == truth
                var row = table[photo.condition] ?? (0, 0, 0, 0)
                switch (right, value.isUncertain) {
                case (true, false): row.right += 1
                case (true, true): row.flaggedRight += 1
                case (false, true): row.flaggedWrong += 1
                case (false, false):
                    row.silentlyWrong += 1
                    failures.append("\(photo.file) \(value.name): \"\(value.text)\" for \(truth)")
                }
                table[photo.condition] = row
            }
        }
        var text =
            "| condition | right | right, flagged | wrong, flagged | wrong, not flagged |\n|---|---|---|---|---|\n"
        for condition in order {
            let row = table[condition]!
            text +=
                "| \(condition) | \(row.right) | \(row.flaggedRight) | \(row.flaggedWrong) | \(row.silentlyWrong) |\n"
        }
        print("Template values on Tests/DisplayPhotos (template from template.png):\n" + text)
        #expect(failures.isEmpty, "silently wrong: \(failures)")
        // Moved up a row: position alone gives Napětí the current; shape and label keep every value in its slot.
        #expect(table["moved-up-a-row"]!.right == 3)
        #expect(table["no-current"]!.right == 2 && table["no-current"]!.flaggedWrong == 1)
    }

    /// A real photo for the two-slot path: Proud's reading carries a volt unit and the display sits half a row up.
    /// Before shapes counted digits it fitted Proud (its label) and Napětí (its unit, as near) within
    /// `ambiguityMargin`; now `5.16` is no `##.##V` either, and it is stored flagged for its unit, not Proud's A.
    /// Napětí and Nabito, which fit only their own, are not flagged.
    @Test func aReadingThatFitsTwoSlotsIsFlagged() async throws {
        let template = try await Self.template()
        let photo = try DisplayPhotoFixture.photo("two-slots.png")
        let result = try await sharedRecognizer.recognize(try photo.data())
        let matched = TemplateMatcher.match(template, in: result.observations)
        #expect(matched.map { Self.number($0.text) } == photo.values, "\(matched)")
        #expect(
            matched[1].isUncertain && matched[1].uncertainty.contains("its unit V is not the learned A"),
            "\(matched[1])")
        #expect(!matched[0].isUncertain && !matched[2].isUncertain, "\(matched)")
    }
}
