import OCRAPI
import OCRCore
import Testing
import TextRecognition

@testable import OCRService

/// Issue 40: a scan's observation says why the engine doubted it (`Observation.doubt`), so a template's first
/// record made from it by a client (`gateway ocr template create`) states that reason as the value's uncertainty.
struct ObservationDoubtTests {
    @Test func aScansObservationCarriesItsDoubt() {
        let box = PixelRect(x: 300, y: 100, width: 60, height: 30)
        let reason = "another reading of the segments there is 60"
        let doubted = Observation(
            level: .word, text: "01", confidence: 0.6, box: box,
            normalizedBox: NormalizedRect(box, imageWidth: 600, imageHeight: 400),
            engine: .ppocr, doubt: reason)
        var sure = doubted
        sure.doubt = nil
        #expect(OcrV1.Observation.list([doubted, sure]).map(\.doubt) == [reason, ""])
    }
}
