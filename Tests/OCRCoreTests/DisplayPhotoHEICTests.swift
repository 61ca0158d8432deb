import Foundation
import Testing
import TextRecognition

@testable import OCRCore

/// A display photographed by an iPhone arrives as HEIC, which Leptonica cannot read: the decoder reads it through
/// libheif, and the defaults read the same values as from the PNG.
@Suite(.serialized) struct DisplayPhotoHEICTests {
    @Test func theValuesOfAHEICPhotoOfADisplayAreRead() async throws {
        let photo = try DisplayPhotoFixture.photo("clean-1.png")
        let png = try sharedRecognizer.decoder.decode(try photo.data()).pages[0]
        let heic = try png.encoded(as: .heic)
        #expect(heic.prefix(12).dropFirst(4).elementsEqual(Array("ftypheic".utf8)), "an HEIC file")
        let decoded = try sharedRecognizer.decoder.decode(heic)
        #expect(decoded.format == .heic)
        #expect(decoded.pages[0].width == png.width && decoded.pages[0].height == png.height)

        let options = RecognitionOptions()
        // `checkout`, not `checkoutBlocking`: a test runs on the cooperative pool, whose threads a blocking wait for
        // an engine would hold while the engine's checkin needs one of them (parallel test runs deadlocked).
        let engine = try await sharedRecognizer.engines.checkout(options.engineConfiguration)
        defer { sharedRecognizer.engines.checkin(engine) }
        var timings = RecognitionTimings()
        let reading = try TextRecognizer.bestReading(
            decoded.pages[0], options: options, engine: engine, timings: &timings)
        #expect(DisplayPhotoFixture.valuesRead(reading.page.text, photo: photo) == 3, "\(reading.page.text)")
    }
}
