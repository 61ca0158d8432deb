import Foundation
import Testing

@testable import TextRecognition

/// A JPEG decoded at 1/2, 1/4 or 1/8 of its size (libjpeg's DCT scaling), for a photo larger than its reader needs;
/// the pixel limit still counts the full size.
@Suite struct JPEGReductionTests {
    @Test func aJPEGIsDecodedReducedAndOtherFormatsWhole() throws {
        let image = try Image.blank(width: 1001, height: 750, gray: 200)
        let jpeg = try image.encoded(as: .jpeg)
        for reduction in [1, 2, 4, 8] {
            let decoded = try ImageDecoder().decode(jpeg, jpegReduction: reduction)
            let page = try #require(decoded.pages.first)
            #expect(decoded.reduction == reduction)
            #expect(
                page.width == (1001 + reduction - 1) / reduction && page.height == (750 + reduction - 1) / reduction)
        }
        #expect(throws: ImageError.self) { try ImageDecoder().decode(jpeg, jpegReduction: 3) }
        #expect(throws: ImageError.tooManyPixels(pixels: 1001 * 750, limit: 500_000)) {
            try ImageDecoder(limits: DecodeLimits(maxPixels: 500_000)).decode(jpeg, jpegReduction: 8)
        }
        let png = try ImageDecoder().decode(try image.encoded(as: .png), jpegReduction: 4)
        #expect(png.reduction == 1 && png.pages[0].width == 1001)
    }
}
