import PPOCR
import Testing
import TextRecognition

@testable import OCRCore

/// Issue 40: the seven-segment reader holds a doubted value at 0.6 with its reason (`PPOCRWord.doubt`); a record
/// says that reason, not only "read with confidence 0.60", so the prompt shows why the value is uncertain.
struct DoubtReasonTests {
    static let reason = "the segments go on before the value's region (239.8 there)"

    static func page() -> PageResult {
        PageResult(
            width: 600, height: 400, orientationDegrees: 0, deskewDegrees: 0, inverted: false, text: "",
            observations: [])
    }

    /// PP-OCR's line `Napětí 9.8 V` with the reader's doubted `9.8` in it.
    static func line() -> PPOCRLine {
        func box(_ x: Int, _ width: Int) -> TextBox { TextBox(x: x, y: 100, width: width, height: 30, score: 0.9) }
        let words = [
            PPOCRWord(text: "Napětí", confidence: 0.97, box: box(50, 90)),
            PPOCRWord(text: "9.8", confidence: 0.6, box: box(300, 60), doubt: reason),
            PPOCRWord(text: "V", confidence: 0.95, box: box(370, 20)),
        ]
        return PPOCRLine(text: "Napětí 9.8 V", confidence: 0.84, box: box(50, 340), words: words)
    }

    static func observations() -> [Observation] {
        EngineCombination.combine(
            page(), lines: [line()], minimumTextHeight: 0, customWords: CustomWordCorrector([]), index: 0
        )
        .observations
    }

    @Test func aWordsDoubtGoesIntoItsObservationItsLineAndItsBlock() {
        let observations = Self.observations()
        #expect(observations.first { $0.text == "9.8" }?.doubt == Self.reason)
        #expect(observations.first { $0.text == "Napětí" }?.doubt == nil)
        #expect(observations.filter { $0.level != .word }.map(\.doubt) == [Self.reason, Self.reason])
    }

    @Test func aRecordSaysWhyTheReaderDoubtedAValue() {
        let observations = Self.observations()
        let words = observations.filter { $0.level == .word }
        let value = words.first { $0.text == "9.8" }!
        // Learned from a photo where the value read surely: the same shape, so only the doubt flags it.
        var learned = value
        learned.doubt = nil
        learned.confidence = 0.95
        let template = [
            ValueDefinition(name: "Napětí", observation: learned, among: words.map { $0.text == "9.8" ? learned : $0 })
        ]
        let values = TemplateMatcher.match(template, in: observations)
        #expect(values.map(\.text) == ["9.8"], "\(values)")
        #expect(values[0].uncertainty == Self.reason, "the reason in place of \"read with confidence 0.60\": \(values)")
        // Matched by position (a template without learned shapes), and a value that is the whole line.
        let byPosition = TemplateMatcher.match(
            [ValueDefinition(name: "Napětí", region: value.normalizedBox, level: .word)], in: observations)
        #expect(byPosition.map(\.uncertainty) == [Self.reason], "\(byPosition)")
        let line = observations.first { $0.level == .line }!
        let wholeLine = TemplateMatcher.match(
            [ValueDefinition(name: "Napětí", region: line.normalizedBox, level: .line)], in: observations)
        #expect(wholeLine.map(\.uncertainty) == [Self.reason], "\(wholeLine)")
    }

    @Test func aValueReadUnsureWithoutAReasonStillSaysItsConfidence() {
        #expect(
            TemplateMatcher.doubts(learnedShape: "", shape: "", text: "9.8", confidence: 0.6) == [
                TemplateMatcher.lowConfidence(0.6)
            ])
        #expect(
            TemplateMatcher.doubts(
                learnedShape: "", shape: "", text: "9.8", confidence: 0.6, doubt: "read unsure (a glyph at 0.7)")
                == ["read unsure (a glyph at 0.7)"])
    }
}
