import Foundation
import Testing
import TextRecognition

@testable import OCRCore

/// Issue 40, item 1: on a charger's photo (orange digits on a black display, the device's light body around it)
/// the default level returned only the labels, `Napětí Proud Nabito`, where `--level fast` read the values too.
/// The binarised reading found the labels alone at 0.94 and won on confidence over the plain reading of labels and
/// values at 0.85–0.90 (`TextRecognizer.Reading.isBetter`). Before the fix the default read none of these photos'
/// values (8 of 18 such renderings: daylight and dim, level and turned 4–7°, digits 0.8–1.4× the labels' size).
@Suite(.serialized) struct LightOnDarkTests {
    static func numbersRead(_ text: String) -> [String] {
        DevicePhoto.numbers.filter { number in
            text.split(whereSeparator: { $0.isWhitespace }).contains { $0.contains(number) }
        }
    }

    @Test(arguments: [(1.0, 0.0, 1.0), (1.0, 4.0, 0.8), (0.5, 4.0, 1.4)])
    func theDefaultLevelReadsLightValuesOnADarkDisplay(light: Double, degrees: Double, valueScale: Double) async throws
    {
        let photo = try DevicePhoto.jpeg(
            width: 1000, light: light, degrees: degrees, valueScale: valueScale, try DevicePhoto.snippets())
        let fast = try await sharedRecognizer.recognize(photo, options: RecognitionOptions(level: .fast))
        let accurate = try await sharedRecognizer.recognize(photo, options: RecognitionOptions())
        #expect(Self.numbersRead(fast.text) == DevicePhoto.numbers, "the fast level reads them: \(fast.text)")
        #expect(Self.numbersRead(accurate.text) == DevicePhoto.numbers, "\(accurate.text)")
    }
}
