import Testing
import TextRecognition

@testable import OCRCore

func word(
    _ text: String, _ x: Double, _ y: Double, _ width: Double = 0.1, _ height: Double = 0.05,
    confidence: Double = 0.9, level: ObservationLevel = .word
) -> Observation {
    Observation(
        level: level, text: text, confidence: confidence,
        box: PixelRect(x: Int(x * 1000), y: Int(y * 1000), width: Int(width * 1000), height: Int(height * 1000)),
        normalizedBox: NormalizedRect(x: x, y: y, width: width, height: height))
}

@Suite struct TemplateMatcherTests {
    let values = [
        ValueDefinition(name: "Volts", region: NormalizedRect(x: 0.5, y: 0.1, width: 0.1, height: 0.05)),
        ValueDefinition(name: "Amps", region: NormalizedRect(x: 0.5, y: 0.3, width: 0.1, height: 0.05)),
    ]

    /// A held-out display (white on black, labels left of the values, two columns) where Tesseract joined the next
    /// column's label onto a value's line: "13.52V Proud". The value is found without the label (before: nothing
    /// fit, stored empty); a line whose digits came apart, "1 8.4W Teplota", is not cut down to "8.4W" (a wrong
    /// reading of 18.4W) and, read whole or without its label, is flagged for the gap between its digits.
    @Test func aLabelRunIntoAValuesLineIsCutOffButDigitsNeverAre() {
        let napeti = ValueDefinition(
            name: "Napětí", region: NormalizedRect(x: 0.3, y: 0.2, width: 0.2, height: 0.08), level: .line,
            shape: "##.##V", label: "Napětí")
        let vykon = ValueDefinition(
            name: "Výkon", region: NormalizedRect(x: 0.3, y: 0.6, width: 0.2, height: 0.08), level: .line,
            shape: "##.#W", label: "Výkon")
        let observations = [
            word("Napětí", 0.08, 0.2, 0.12, 0.06, level: .line), word("Napětí", 0.08, 0.2, 0.12, 0.06),
            word("13.52V Proud", 0.3, 0.2, 0.36, 0.08, level: .line), word("13.52V", 0.3, 0.2, 0.2, 0.08),
            word("Proud", 0.56, 0.21, 0.1, 0.06),
            word("Výkon", 0.08, 0.6, 0.12, 0.06, level: .line), word("Výkon", 0.08, 0.6, 0.12, 0.06),
            word("1 8.4W Teplota", 0.3, 0.6, 0.4, 0.08, level: .line), word("1", 0.3, 0.6, 0.03, 0.08),
            word("8.4W", 0.35, 0.6, 0.15, 0.08),
            word("Teplota", 0.58, 0.61, 0.12, 0.06),
        ]
        let filled = TemplateMatcher.match([napeti, vykon], in: observations)
        #expect(filled[0].raw == "13.52V" && filled[0].text == "13.52" && filled[0].uncertainty.isEmpty, "\(filled[0])")
        #expect(filled[1].raw != "8.4W", "\(filled[1])")
        #expect(!filled[1].uncertainty.isEmpty, "\(filled[1])")
        #expect(TemplateMatcher.digitGap(in: "1 8.4W") != nil)
        #expect(TemplateMatcher.digitGap(in: "1 234,5 kWh") == nil && TemplateMatcher.digitGap(in: "12.6 V") == nil)
    }

    @Test func eachValueTakesTheObservationAtItsRegionNotTheNthString() {
        // An extra label first in reading order, then the values slightly shifted, as in a new photo.
        let observations = [
            word("CHARGING", 0.1, 0.05, 0.2), word("12.6", 0.51, 0.11), word("3.2", 0.49, 0.31),
        ]
        let filled = TemplateMatcher.match(values, in: observations)
        #expect(filled.map(\.text) == ["12.6", "3.2"])
        #expect(filled.map(\.name) == ["Volts", "Amps"])
        #expect(filled[0].confidence == 0.9)
    }

    @Test func aDistractorOverlappingLessLosesToTheValue() {
        let observations = [word("LOW", 0.45, 0.1, 0.08), word("12.6", 0.5, 0.1)]
        #expect(TemplateMatcher.match(values, in: observations)[0].text == "12.6")
    }

    @Test func aRegionWithoutTextGivesAnEmptyValueWithConfidenceZero() {
        let filled = TemplateMatcher.match(values, in: [word("12.6", 0.5, 0.1), word("far", 0.9, 0.9)])
        #expect(filled[1] == RecordValue(name: "Amps", text: "", confidence: 0, uncertainty: "nothing was read there"))
    }

    @Test func anObservationFillsOneValueOnly() {
        // One observation spans both regions; the better-fitting value gets it, the other stays empty.
        let tall = word("12.6", 0.5, 0.1, 0.1, 0.1)
        let filled = TemplateMatcher.match(
            [
                values[0],
                ValueDefinition(name: "Below", region: NormalizedRect(x: 0.5, y: 0.15, width: 0.1, height: 0.05)),
            ],
            in: [tall])
        #expect(filled.filter { $0.text == "12.6" }.count == 1)
    }

    @Test func equalOverlapIsDecidedByDistance() {
        // Two observations overlap the region by the same area; the one whose centre is nearer wins.
        let region = ValueDefinition(name: "V", region: NormalizedRect(x: 0.4, y: 0.4, width: 0.2, height: 0.2))
        let near = word("near", 0.45, 0.3, 0.1, 0.2), far = word("far", 0.3, 0.5, 0.2, 0.1)
        #expect(TemplateMatcher.match([region], in: [far, near])[0].text == "near")
    }

    @Test func valuesMatchObservationsOfTheirLevel() {
        let line = ValueDefinition(
            name: "Reading", region: NormalizedRect(x: 0.1, y: 0.1, width: 0.3, height: 0.05), level: .line)
        let observations = [
            word("12.6 V", 0.1, 0.1, 0.3, level: .line), word("12.6", 0.1, 0.1, 0.15), word("V", 0.3, 0.1, 0.05),
        ]
        let matched = TemplateMatcher.match([line], in: observations)[0]
        #expect(
            matched.raw == "12.6 V" && matched.text == "12.6" && matched.unit == "V",
            "stored normalised, the line kept as read")
    }
}

@Suite struct DetachedMarksTests {
    func text(_ text: String, _ x: Int, _ y: Int, _ width: Int, _ height: Int) -> RecognizedText {
        RecognizedText(text: text, confidence: 0.7, box: PixelRect(x: x, y: y, width: width, height: height))
    }

    func page(_ lines: [RecognizedText]) -> RecognizedPage {
        RecognizedPage(
            width: 1200, height: 600,
            blocks: lines.map { RecognizedBlock(block: $0, lines: [RecognizedLine(line: $0, words: [$0])]) })
    }

    @Test func accentsTornOffTheLineBelowAreDropped() {
        // Measured on a rendered Czech page: the carons of "příští" read as a line "viv" on top of their line.
        let accents = text("viv", 844, 397, 51, 11), line = text("řekl, že nový pavilon", 64, 395, 1023, 55)
        #expect(TextRecognizer.detachedMarks(page([accents, line])) == [accents.box])
        let prepared = PreparedImage(
            image: try! Image.blank(width: 1200, height: 600), quarterTurns: 0, deskewDegrees: 0, inverted: false,
            binarized: false, scale: 1)
        let result = TextRecognizer.pageResult(
            page([accents, line]), prepared: prepared, minimumTextHeight: 0, index: 0)
        #expect(result.text == "řekl, že nový pavilon")
    }

    @Test func smallWordsAboveLargeTextStay() {
        // A display's unit label over large digits is text, not accents.
        let label = text("VOLTS", 100, 80, 120, 18), digits = text("12.6", 100, 100, 300, 90)
        #expect(TextRecognizer.detachedMarks(page([label, digits])).isEmpty)
        // Marks far above a line are not its accents either.
        let far = text("vv", 100, 10, 40, 10)
        #expect(TextRecognizer.detachedMarks(page([far, digits])).isEmpty)
    }
}

@Suite struct PageResultTests {
    let prepared = PreparedImage(
        image: try! Image.blank(width: 1000, height: 500), quarterTurns: 1, deskewDegrees: 0, inverted: false,
        binarized: false, scale: 2)

    func element(_ text: String, _ x: Int, _ y: Int, _ width: Int, _ height: Int) -> RecognizedText {
        RecognizedText(text: text, confidence: 0.9, box: PixelRect(x: x, y: y, width: width, height: height))
    }

    /// A page recognised on the twice-enlarged image: one line with a tall and a small word.
    var page: RecognizedPage {
        let big = element("BIG", 100, 100, 200, 100), small = element("small", 400, 160, 100, 20)
        let line = element("BIG small", 100, 100, 400, 100)
        return RecognizedPage(
            width: 1000, height: 500,
            blocks: [RecognizedBlock(block: line, lines: [RecognizedLine(line: line, words: [big, small])])])
    }

    @Test func boxesAreInTheUprightImageBeforeEnlarging() {
        let result = TextRecognizer.pageResult(page, prepared: prepared, minimumTextHeight: 0, index: 0)
        #expect(result.width == 500 && result.height == 250)
        #expect(result.orientationDegrees == 90)
        #expect(result.observations.map(\.level) == [.block, .line, .word, .word])
        let big = result.observations[2]
        #expect(big.box == PixelRect(x: 50, y: 50, width: 100, height: 50))
        #expect(big.normalizedBox == NormalizedRect(x: 0.1, y: 0.2, width: 0.2, height: 0.2))
    }

    @Test func textBelowTheMinimumHeightIsLeftOut() {
        // 20 px of 500 is 4 %: a 5 % minimum drops "small", and the line and block shrink to what is left.
        let result = TextRecognizer.pageResult(page, prepared: prepared, minimumTextHeight: 0.05, index: 0)
        #expect(result.text == "BIG")
        #expect(result.observations.map(\.text) == ["BIG", "BIG", "BIG"])
        #expect(result.observations[1].box == PixelRect(x: 50, y: 50, width: 100, height: 50))
        let none = TextRecognizer.pageResult(page, prepared: prepared, minimumTextHeight: 0.5, index: 0)
        #expect(none.observations.isEmpty)
    }
}

@Suite struct CustomWordTests {
    let corrector = CustomWordCorrector(["Menagerie", "pH", "kWh", "Volts"])

    @Test func lookAlikesBecomeTheCustomWord() {
        #expect(corrector.correct("Menagerle") == "Menagerie")
        #expect(corrector.correct("(Menagerle),") == "(Menagerie),", "punctuation around the word stays")
        #expect(corrector.correct("Menagere") == "Menagerie")
        #expect(corrector.correct("PH") == "pH", "case alone, for short words too")
        #expect(corrector.correct("KWH") == "kWh")
        #expect(corrector.correct("Voltz") == "Volts")
    }

    @Test func otherWordsStay() {
        #expect(corrector.correct("Menagerie") == nil)
        #expect(corrector.correct("Mangerii") == nil, "two edits away")
        #expect(corrector.correct("pX") == nil, "short words change in case only")
        #expect(corrector.correct("12.6") == nil)
        #expect(corrector.correct("—") == nil)
        // Equally near two custom words: left as read.
        #expect(CustomWordCorrector(["Bolt", "Volt"]).correct("Rolt") == nil)
    }

    @Test func correctedWordsRebuildTheirLineAndBlock() {
        let word = RecognizedText(
            text: "Menagerle", confidence: 0.8, box: PixelRect(x: 10, y: 10, width: 100, height: 20))
        let page = RecognizedPage(
            width: 200, height: 100,
            blocks: [RecognizedBlock(block: word, lines: [RecognizedLine(line: word, words: [word])])])
        let prepared = PreparedImage(
            image: try! Image.blank(width: 200, height: 100), quarterTurns: 0, deskewDegrees: 0, inverted: false,
            binarized: false, scale: 1)
        let result = TextRecognizer.pageResult(
            page, prepared: prepared, minimumTextHeight: 0, customWords: CustomWordCorrector(["Menagerie"]), index: 0)
        #expect(result.observations.map(\.text) == ["Menagerie", "Menagerie", "Menagerie"])
        #expect(result.text == "Menagerie")
    }
}

/// Matching by shape and label, on hand-made observations.
@Suite struct ShapeMatchingTests {
    static func word(_ text: String, x: Int, y: Int, width: Int = 60, confidence: Double = 0.95) -> Observation {
        let box = PixelRect(x: x, y: y, width: width, height: 30)
        return Observation(
            level: .word, text: text, confidence: confidence, box: box,
            normalizedBox: NormalizedRect(box, imageWidth: 600, imageHeight: 400))
    }

    /// A display of label / value / unit rows starting at `top`, shifted right by `dx`.
    static func display(_ rows: [(String, String, String)], top: Int = 100, dx: Int = 0, confidence: Double = 0.95)
        -> [Observation]
    {
        rows.enumerated().flatMap { index, row in
            let y = top + 50 * index
            return [
                word(row.0, x: 50 + dx, y: y), word(row.1, x: 300 + dx, y: y, confidence: confidence),
                word(row.2, x: 370 + dx, y: y, width: 20),
            ]
        }
    }

    static let first = display([("Napětí", "14.38", "V"), ("Proud", "2.10", "A"), ("Nabito", "45", "%")])
    static func template() -> [ValueDefinition] {
        ["Napětí", "Proud", "Nabito"].enumerated().map { index, name in
            ValueDefinition(name: name, observation: first[3 * index + 1], among: first)
        }
    }

    @Test func skeletonsAndSimilarities() {
        #expect(
            ValueShape.skeleton("14.38 V") == "##.##V" && ValueShape.skeleton("9,5v") == "#.#V"
                && ValueShape.skeleton("45 %") == "##%")
        #expect(ValueShape.similarity(learned: "#.#V", candidate: "#.#V") == 1)
        #expect(ValueShape.similarity(learned: "#.#V", candidate: "#.#A") == 0.4)
        #expect(ValueShape.similarity(learned: "#.#V", candidate: "#V") == 0.5)
        #expect(ValueShape.similarity(learned: "#.#V", candidate: "NAPĚTÍ") == 0)
        #expect(
            ValueShape.labelSimilarity("Napětí", "Napeti") == 1 && ValueShape.labelSimilarity("Proud", "Nabito") < 0.5)
    }

    @Test func learnsShapeWithUnitAndLabel() {
        let values = Self.template()
        #expect(values.map(\.shape) == ["##.##V", "#.##A", "##%"])
        #expect(values.map(\.label) == ["Napětí", "Proud", "Nabito"])
    }

    @Test func aDisplayMovedUpARowKeepsEachValueInItsSlot() {
        // The current now sits where the voltage was: by position alone it would fill Napětí.
        let moved = Self.display(
            [("Napětí", "12.91", "V"), ("Proud", "3.05", "A"), ("Nabito", "77", "%")], top: 50, dx: 40)
        let values = TemplateMatcher.match(Self.template(), in: moved)
        #expect(values.map(\.text) == ["12.91", "3.05", "77"])
        #expect(values.allSatisfy { !$0.isUncertain }, "\(values)")
        let byPosition = TemplateMatcher.matchByPosition(Self.template(), in: moved)
        #expect(byPosition[0].text == "3.05", "position alone is fooled")
    }

    @Test func missingLowConfidenceAndMisshapenValuesAreUncertain() {
        // No current on the display: the best left for Proud is a misfit.
        let missing = Self.display([("Napětí", "12.91", "V"), ("Nabito", "77", "%")])
        let values = TemplateMatcher.match(Self.template(), in: missing)
        #expect(values[0].text == "12.91" && !values[0].isUncertain && values[2].text == "77" && !values[2].isUncertain)
        #expect(
            values[1].isUncertain && values[1].text.isEmpty && values[1].uncertainty.hasPrefix("nothing fits it well"),
            "\(values[1])")
        // Read with low confidence.
        let unsure = TemplateMatcher.match(
            Self.template(),
            in: Self.display(
                [("Napětí", "14.30", "V"), ("Proud", "2.10", "A"), ("Nabito", "45", "%")], confidence: 0.7))
        #expect(unsure.allSatisfy { $0.uncertainty.contains("confidence 0.70") }, "\(unsure)")
        // Two slots, one reading: two labels beside a single value of a shape both learned.
        let twins = [
            ValueDefinition(
                name: "A", region: NormalizedRect(x: 0.5, y: 0.25, width: 0.1, height: 0.075), shape: "#.#V"),
            ValueDefinition(
                name: "B", region: NormalizedRect(x: 0.5, y: 0.25, width: 0.1, height: 0.075), shape: "#.#V"),
        ]
        let one = TemplateMatcher.match(twins, in: [Self.word("12.5V", x: 300, y: 100)])
        #expect(
            one[0].uncertainty.contains("fits B as well") && one[1].uncertainty == "nothing was read there", "\(one)")
    }

    @Test func templatesWithoutShapesMatchByPositionAsBefore() {
        let plain = Self.template().map { ValueDefinition(name: $0.name, region: $0.region, level: $0.level) }
        let values = TemplateMatcher.match(plain, in: Self.first)
        #expect(values.map(\.text) == ["14.38", "2.10", "45"] && values.allSatisfy { !$0.isUncertain })
    }
}
