import Testing

@testable import PPOCR
@testable import SevenSegment

/// Why a segment value is flagged rather than stored as if right (issue 40: no value wrong without a flag), each rule
/// on the readings that made it: the photos of Tests/SevenSegmentPhotos where it was read wrong at 0.90 unflagged.
struct SegmentDoubtTests {
    static func reading(_ text: String, confidence: Double = 0.9, strokes: Double = 4) -> SevenSegmentReading {
        let digits = text.filter(\.isNumber).count
        return SevenSegmentReading(
            text: text, confidence: confidence, strokesPerDigit: strokes, digits: digits, glyphs: digits)
    }

    static func box(_ x: Int, _ y: Int, _ width: Int, _ height: Int) -> TextBox {
        TextBox(x: x, y: y, width: width, height: height, score: 1)
    }

    /// jpeg-2: the region chosen read `01.` of 60.1 (its `6` outside it); a taller region over it read `60`.
    @Test func anOverlappingRegionThatReadsOtherDigitsCastsDoubt() {
        let chosen = Self.box(335, 108, 210, 120)
        let others = [(Self.box(21, 79, 445, 180), Self.reading("60"))]
        #expect(SegmentReading.disagreeing(with: Self.reading("01."), at: chosen, among: others) == "60")
        // A part of the value (a fragment region's `14` of 147.3) or a single digit is no disagreement.
        #expect(
            SegmentReading.disagreeing(
                with: Self.reading("147.3"), at: chosen,
                among: [(chosen, Self.reading("14")), (chosen, Self.reading("7"))]) == nil)
        // Nor is a region around the whole panel, its "digits" many lines' strokes together (jpeg-4's `88` of 16
        // strokes a digit over 29.8).
        #expect(
            SegmentReading.disagreeing(
                with: Self.reading("29.8"), at: chosen,
                among: [(Self.box(0, 64, 587, 330), Self.reading("88", strokes: 16))]) == nil)
    }

    /// A region widened by its height that reads digits before the value's: the value's ink goes on past its region.
    @Test func digitsBeforeTheRegionCastDoubtButAUnitAfterItDoesNot() {
        #expect(SegmentReading.hasLeadingDigits(Self.reading("601."), before: Self.reading("01.")))
        #expect(SegmentReading.hasLeadingDigits(Self.reading("239.8"), before: Self.reading("9.8")))
        // `%` beside 147.3 read as a `1` after it; the same value read wider.
        #expect(!SegmentReading.hasLeadingDigits(Self.reading("147.3.1"), before: Self.reading("147.3")))
        #expect(!SegmentReading.hasLeadingDigits(Self.reading("25.3"), before: Self.reading("25.3")))
    }

    /// PP-OCR's word over the value: digits the value lacks, or a point it lost, cast doubt; a digit PP-OCR dropped
    /// (`17.3` of 147.3, its common failure on segments) does not.
    @Test func ppocrDisagreeingCastsDoubt() {
        #expect(SegmentReading.ppocrDisagrees("60.", with: "01.") != nil)
        #expect(SegmentReading.ppocrDisagrees("34.3", with: "343") != nil)
        #expect(SegmentReading.ppocrDisagrees("17.3", with: "147.3") == nil)
        #expect(SegmentReading.ppocrDisagrees("25.3°C", with: "25.3") == nil)
        #expect(SegmentReading.ppocrDisagrees("kg", with: "25.3") == nil)
    }

    /// PP-OCR's number is a part of the reader's longer reading there when that looks like segments or is sure
    /// (perspective-4: PP-OCR's `17.3` of 147.3 stood at 0.96 unflagged when the reader's own value was refused).
    @Test func aPartOfALongerSegmentReadingIsFlagged() {
        #expect(SegmentReading.isLonger(Self.reading("147.3", confidence: 0.7, strokes: 3), than: "173"))
        #expect(SegmentReading.isLonger(Self.reading("82", confidence: 0.86, strokes: 1), than: "8"))
        // Print read unsure, the same digits, or other digits: no part.
        #expect(!SegmentReading.isLonger(Self.reading("147.3", confidence: 0.7, strokes: 1), than: "173"))
        #expect(!SegmentReading.isLonger(Self.reading("17.3", strokes: 3), than: "173"))
        #expect(!SegmentReading.isLonger(Self.reading("1465", strokes: 3), than: "173"))
    }

    /// PP-OCR's numbers that are no number: a point read in a gap between segments (`7.9.5` for 79.5, `1.4.5`) or a
    /// digit lost after the point (`60.` of 60.1).
    @Test func aMalformedNumberIsFlagged() {
        #expect(SegmentReading.isMalformedNumber("7.9.5"))
        #expect(SegmentReading.isMalformedNumber("1.4.5"))
        #expect(SegmentReading.isMalformedNumber("60."))
        #expect(!SegmentReading.isMalformedNumber("25.3°C"))
        #expect(!SegmentReading.isMalformedNumber("13.03V"))
        #expect(!SegmentReading.isMalformedNumber("-4.0"))
        #expect(!SegmentReading.isMalformedNumber("67"))
        // A letter between digits: a 6 without its top stroke read as `b` (Tests/SevenSegmentHeldOut turned-glare-4's
        // `3b3` for 363 at 0.90).
        #expect(SegmentReading.isMalformedNumber("3b3"))
        #expect(!SegmentReading.isMalformedNumber("PM2.5"))
    }

    /// PP-OCR splits segment digits at the gaps between segments (Tests/SevenSegmentHeldOut clean-3's `6.9 9` for
    /// 6.99, glare-3's `7 2.5 4` for -72.54, read at 0.97–1.00): numbers closer than their height are each doubted;
    /// numbers apart, or a number beside a word, are not.
    @Test func numbersSplitAtAGapAreFlagged() {
        let words = [
            PPOCRWord(text: "6.9", confidence: 1, box: Self.box(100, 0, 60, 40)),
            PPOCRWord(text: "9", confidence: 1, box: Self.box(175, 0, 25, 40)),
            PPOCRWord(text: "kW", confidence: 1, box: Self.box(210, 0, 30, 40)),
            PPOCRWord(text: "12", confidence: 1, box: Self.box(400, 0, 40, 40)),
        ]
        let line = PPOCRLine(text: "6.9 9 kW 12", confidence: 1, box: Self.box(100, 0, 340, 40), words: words)
        #expect(SegmentReading.splitNumbers(line) == [100: "6.9 9", 175: "6.9 9"])
    }

    /// A number split at gaps between segments is given whole, flagged (Tests/SevenSegmentHeldOut turned-glare-2's
    /// `1 4.57` for 14.57, shadow-4's `5 0 3 3.0` for 5033.0, both before as flagged pieces no template could use);
    /// parts that make no number together, or a split the caller does not take for one value, stay as read.
    @Test func aNumberSplitAtGapsIsReadTogetherFlagged() {
        let words = [
            PPOCRWord(text: "1", confidence: 0.99, box: Self.box(100, 2, 15, 38)),
            PPOCRWord(text: "4.57", confidence: 0.98, box: Self.box(125, 0, 75, 40)),
            PPOCRWord(text: "kW", confidence: 1, box: Self.box(210, 0, 30, 40)),
            PPOCRWord(text: "1.2", confidence: 1, box: Self.box(300, 0, 40, 40)),
            PPOCRWord(text: "3.4", confidence: 1, box: Self.box(350, 0, 40, 40)),
        ]
        let line = PPOCRLine(text: "1 4.57 kW 1.2 3.4", confidence: 1, box: Self.box(100, 0, 290, 40), words: words)
        let joined = SegmentReading.joiningSplitNumbers(line)
        #expect(joined.words.map(\.text) == ["14.57", "kW", "1.2", "3.4"])
        #expect(joined.text == "14.57 kW 1.2 3.4")
        #expect(joined.words[0].box == Self.box(100, 0, 100, 40))
        #expect(joined.words[0].confidence == SegmentReading.doubtfulConfidence)
        #expect(joined.words[0].doubt?.contains("1 4.57") == true)
        #expect(joined.words[1...].allSatisfy { $0.doubt == nil })
        #expect(SegmentReading.joiningSplitNumbers(line) { _ in false }.words.map(\.text) == words.map(\.text))
    }

    /// Where the picture does not look like segments, the reader's digits across the parts show one value (clean-3's
    /// `99` over `6.9 9`: clean segments whose strokes join look like print to it); digits inside one part do not.
    @Test func theReadersDigitsAcrossTheSplitShowOneValue() {
        #expect(SegmentReading.spansParts([Self.reading("99", strokes: 1)], ["6.9", "9"]))
        #expect(!SegmentReading.spansParts([Self.reading("69", strokes: 1)], ["6.9", "9"]))
        #expect(!SegmentReading.spansParts([Self.reading("9")], ["6.9", "9"]))
        #expect(!SegmentReading.spansParts([Self.reading("42")], ["6.9", "9"]))
        #expect(!SegmentReading.spansParts([], ["6.9", "9"]))
    }

    /// A 6 without its top stroke is a `b` to PP-OCR (turned-glare-4's `3b3` for 363): between digits it is given as
    /// the 6, flagged; a word of letters is left alone. Of several points (dim-2's `1.4.5` for 14.5) the last is kept.
    @Test func aSixWithoutItsTopIsNoB() {
        let words = [
            PPOCRWord(text: "3b3", confidence: 0.9, box: Self.box(0, 0, 60, 40)),
            PPOCRWord(text: "bb", confidence: 0.96, box: Self.box(100, 0, 40, 40)),
            PPOCRWord(text: "kWh", confidence: 1, box: Self.box(200, 0, 40, 40)),
        ]
        let line = SegmentReading.joiningSplitNumbers(
            PPOCRLine(text: "3b3 bb kWh", confidence: 0.95, box: Self.box(0, 0, 240, 40), words: words))
        #expect(line.words.map(\.text) == ["363", "bb", "kWh"])
        #expect(SegmentReading.mended("1.4.5")?.text == "14.5")
        #expect(SegmentReading.mended("7.9.5")?.text == "79.5")
        #expect(SegmentReading.mended("60.") == nil, "a digit lost after the point is not made up")
        #expect(SegmentReading.mended("1.2.3.4")?.text == "123.4")
        // Off a segment display (the caller's `isValue`) a version number stays as written.
        let version = PPOCRLine(
            text: "1.2.3", confidence: 1, box: Self.box(0, 0, 60, 40),
            words: [PPOCRWord(text: "1.2.3", confidence: 1, box: Self.box(0, 0, 60, 40))])
        #expect(SegmentReading.joiningSplitNumbers(version) { _ in false }.words[0].text == "1.2.3")
        #expect(line.words[0].confidence == SegmentReading.doubtfulConfidence && line.words[0].doubt != nil)
        #expect(line.words[1].doubt == nil)
    }

    /// Where PP-OCR's detector found no text, its recogniser reads the reader's regions that look like segments
    /// (Tests/SevenSegmentPhotos clean-3's 9.8, jpeg-4's 59.9 and 29.8: nothing read there before): a number is a
    /// line of its own, flagged unless the reader read it alike, two digits at least; a region over PP-OCR's lines,
    /// or read as no number, adds nothing; a lone digit is read again with its row widened.
    @Test func theRecogniserReadsTheReadersRegionsWherePPOCRFoundNoText() throws {
        let label = PPOCRLine(
            text: "TEMP", confidence: 1, box: Self.box(0, 0, 80, 30),
            words: [PPOCRWord(text: "TEMP", confidence: 1, box: Self.box(0, 0, 80, 30))])
        let texts: [TextBox: String] = [
            Self.box(100, 50, 90, 40): "9.8", Self.box(100, 150, 90, 40): "48", Self.box(0, 0, 60, 30): "12",
            Self.box(100, 250, 90, 40): "TEMP", Self.box(130, 350, 30, 40): "3", Self.box(90, 350, 110, 40): "37.7",
        ]
        var asked: [TextBox] = []
        let found = try SegmentReading.recognizedInRegions(
            texts.keys.map { ($0, Self.reading($0.y == 150 ? "48" : "8", confidence: 0.9, strokes: 3)) },
            lines: [label],
            taken: [], width: 640
        ) { box in
            asked.append(box)
            return texts[box].map {
                PPOCRLine(
                    text: $0, confidence: 0.95, box: box, words: [PPOCRWord(text: $0, confidence: 0.95, box: box)])
            }
        }
        let byText = Dictionary(uniqueKeysWithValues: found.map { ($0.text, $0.words[0]) })
        #expect(Set(byText.keys) == ["9.8", "48", "37.7"], "\(found)")
        #expect(byText["9.8"]?.confidence == SegmentReading.doubtfulConfidence && byText["9.8"]?.doubt != nil)
        #expect(byText["48"]?.confidence == 0.95 && byText["48"]?.doubt == nil, "read alike by the reader")
        #expect(byText["37.7"]?.box == Self.box(90, 350, 110, 40) && byText["37.7"]?.doubt != nil)
        #expect(!asked.contains(Self.box(0, 0, 60, 30)), "a region over PP-OCR's label is not read")
    }

    /// What the recogniser may give for a value: a number, a unit after it at most.
    @Test func aPlainNumberIsANumberAndItsUnit() {
        for text in ["-12.0", "9.8°C", "67%", "5033.0", "−4"] { #expect(SegmentReading.isPlainNumber(text), "\(text)") }
        for text in ["1.4.5", "TEMP", "3b3", "kWh", "60.", ".5", "12V3"] {
            #expect(!SegmentReading.isPlainNumber(text), "\(text)")
        }
    }

    /// On a segment display PP-OCR's number stands only where the reader read it alike as segments (Tests/
    /// SevenSegmentHeldOut: turned-4's `152` for 162 and turned-glare-1's `7.9` for 79 where the reader read other
    /// digits or nothing, noisy-2's `243` for 24.3 where it read the same strokes as print, all unflagged at 0.87–1.0).
    @Test func aNumberOnASegmentDisplayTheReaderDidNotConfirmIsFlagged() {
        #expect(SegmentReading.unconfirmed("25.0", readings: [Self.reading("25.0")]) == nil)
        #expect(SegmentReading.unconfirmed("25.3°C", readings: [Self.reading("25.3")]) == nil, "a unit is no digit")
        #expect(SegmentReading.unconfirmed("-0.5", readings: [Self.reading("-0.5")]) == nil)
        #expect(SegmentReading.unconfirmed("152", readings: [Self.reading("16")])?.contains("read as 16") == true)
        #expect(SegmentReading.unconfirmed("7.9", readings: [])?.contains("could not read") == true)
        #expect(SegmentReading.unconfirmed("7.9", readings: [Self.reading("79")]) != nil, "a point the reader lacks")
        #expect(
            SegmentReading.unconfirmed("243", readings: [Self.reading("243", strokes: 1)])?.contains("like print")
                == true)
        // The display is one of segments when a region reads two digits of segments, or one does under a number.
        #expect(SegmentReading.isSegmentDisplay([Self.reading("25.0")], underNumbers: []))
        #expect(SegmentReading.isSegmentDisplay([], underNumbers: [Self.reading("1")]))
        // A lone segment-like `8` elsewhere (a panel's frame) or print under the numbers is not.
        #expect(!SegmentReading.isSegmentDisplay([Self.reading("8")], underNumbers: [Self.reading("243", strokes: 1)]))
    }

    /// A doubted word is held under a template's threshold and says why; the line's confidence follows.
    @Test func aDoubtedWordIsHeldUnderTheThreshold() {
        let word = PPOCRWord(text: "8", confidence: 1, box: Self.box(0, 0, 10, 20))
        let line = PPOCRLine(
            text: "8 kg", confidence: 1, box: Self.box(0, 0, 40, 20),
            words: [word, PPOCRWord(text: "kg", confidence: 1, box: Self.box(20, 0, 20, 20))])
        let doubted = SegmentReading.doubting(line) { $0.text == "8" ? "a part of 82" : nil }
        #expect(
            doubted.words[0].confidence == SegmentReading.doubtfulConfidence && doubted.words[0].doubt == "a part of 82"
        )
        #expect(doubted.words[1].confidence == 1 && doubted.words[1].doubt == nil)
        #expect(doubted.confidence == (1 + SegmentReading.doubtfulConfidence) / 2)
    }
}
