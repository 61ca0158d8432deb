import Base
import Foundation
import Testing
import TextRecognition

@testable import OCRCore

/// Issue 40, items 4 and 5: a phone's photo of a device (12 MP, 3 MP; daylight and dim) read by default, its
/// time printed (debug builds are slower than release; the benchmark measures release).
@Suite(.serialized) struct PhonePhotoTests {
    static func numbersRead(_ text: String) -> [String] {
        DevicePhoto.numbers.filter { number in
            text.split(whereSeparator: { $0.isWhitespace }).contains { $0.contains(number) }
        }
    }

    @Test(arguments: [(4000, 1.0), (2000, 1.0), (4000, 0.25)])
    func aPhonePhotoIsReadWithItsValues(width: Int, light: Double) async throws {
        let photo = try DevicePhoto.jpeg(width: width, light: light, try DevicePhoto.snippets())
        let clock = ContinuousClock()
        let start = clock.now
        let result = try await sharedRecognizer.recognize(photo, options: RecognitionOptions())
        let seconds = (clock.now - start).seconds
        print(
            String(
                format: "PHONE %d×%d light %.2f: %.2f s (decode %.2f, prepare %.2f, recognise %.2f) %@", width,
                width * 3 / 4, light,
                seconds, result.timings.decode, result.timings.preprocess, result.timings.recognize,
                Self.numbersRead(result.text).description))
        #expect(Self.numbersRead(result.text) == DevicePhoto.numbers, "\(result.text.debugDescription)")
        let page = try #require(result.pages.first)
        #expect(page.width == width && page.height == width * 3 / 4, "boxes are in the photo's own pixels")
    }

    /// A photo whose readings outlast the time budget returns the best found so far, said to be cut short, and a
    /// template's values from it are flagged (before: the call failed with DEADLINE_EXCEEDED, nothing stored).
    @Test func aPhotoOverItsTimeBudgetReturnsTheBestReadingSoFarFlagged() async throws {
        let photo = try DevicePhoto.jpeg(width: 1000, try DevicePhoto.snippets())
        let whole = try await sharedRecognizer.recognize(photo, options: RecognitionOptions())
        #expect(!whole.cutShort)
        let cut = try await sharedRecognizer.recognize(photo, options: RecognitionOptions(timeBudget: 0))
        #expect(cut.cutShort && cut.pages[0].cutShort && !cut.text.isEmpty, "\(cut.text)")
        let template = [
            ValueDefinition(
                name: "Napětí", region: NormalizedRect(x: 0.4, y: 0.25, width: 0.2, height: 0.08), shape: "###.#V")
        ]
        let values = TemplateMatcher.assign(template, in: cut)
        #expect(values[0].value.uncertainty.contains("cut short by its time budget"), "\(values[0].value)")
        #expect(throws: OCRError.self) { try RecognitionOptions(timeBudget: -1).validate() }
    }
}
