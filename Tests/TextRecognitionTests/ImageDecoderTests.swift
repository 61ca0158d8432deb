import Foundation
import Testing

@testable import TextRecognition

/// A 40 × 20 grey image, white with a black 10 × 10 square in the top-left corner.
func cornerMarkedImage() throws -> Image {
    let square = try Image.blank(width: 10, height: 10, depth: 8, gray: 0)
    return try Image.blank(width: 40, height: 20).pasting(square, x: 0, y: 0)
}

/// `jpeg` with an EXIF block whose orientation tag is `orientation`, inserted after the start-of-image marker.
func jpegWithEXIF(_ jpeg: Data, orientation: UInt8, littleEndian: Bool = false) -> Data {
    let tiff: [UInt8] =
        littleEndian
        ? [0x49, 0x49, 0x2A, 0, 8, 0, 0, 0, 1, 0, 0x12, 0x01, 3, 0, 1, 0, 0, 0, orientation, 0, 0, 0, 0, 0, 0, 0]
        : [0x4D, 0x4D, 0, 0x2A, 0, 0, 0, 8, 0, 1, 0x01, 0x12, 0, 3, 0, 0, 0, 1, 0, orientation, 0, 0, 0, 0, 0, 0]
    let payload: [UInt8] = Array("Exif".utf8) + [0, 0] + tiff
    let length = payload.count + 2
    var bytes = [UInt8](jpeg.prefix(2))
    bytes += [0xFF, 0xE1, UInt8(length >> 8), UInt8(length & 0xFF)] + payload
    bytes += jpeg.dropFirst(2)
    return Data(bytes)
}

/// A GIF of a few bytes whose logical screen is `screen` and whose one frame (an empty LZW stream) is `frame`.
func handMadeGIF(screen: (Int, Int), frame: (Int, Int)) -> Data {
    func u16(_ value: Int) -> [UInt8] { [UInt8(value & 0xFF), UInt8(value >> 8)] }
    var bytes = Array("GIF89a".utf8) + u16(screen.0) + u16(screen.1) + [0, 0, 0]
    bytes += [0x21, 0xF9, 4, 0, 0, 0, 0, 0]  // a graphic control extension, to be skipped
    bytes += [0x2C] + u16(0) + u16(0) + u16(frame.0) + u16(frame.1) + [0, 2, 0, 0x3B]
    return Data(bytes)
}

/// The first bytes of a BMP announcing `width` × `height` (negative: stored top-down), with the usual 40-byte
/// header or the old 12-byte core header; no pixels follow.
func handMadeBMP(width: Int, height: Int, coreHeader: Bool = false) -> Data {
    func le(_ value: Int, _ count: Int) -> [UInt8] { (0..<count).map { UInt8(truncatingIfNeeded: value >> (8 * $0)) } }
    var bytes: [UInt8] = [0x42, 0x4D] + le(1 << 20, 4) + le(0, 4) + le(54, 4)
    bytes +=
        coreHeader
        ? le(12, 4) + le(width, 2) + le(height, 2) + le(1, 2) + le(24, 2)
        : le(40, 4) + le(width, 4) + le(height, 4) + le(1, 2) + le(24, 2) + [UInt8](repeating: 0, count: 24)
    return Data(bytes + [UInt8](repeating: 0, count: 64))
}

@Suite struct ImageDecoderTests {
    @Test(arguments: ImageFormat.allCases)
    func decodesEveryFormatLeptonicaWrites(format: ImageFormat) throws {
        let data = try cornerMarkedImage().encoded(as: format)
        let decoded = try ImageDecoder().decode(data)
        #expect(decoded.format == format)
        #expect(decoded.pages.count == 1)
        #expect(decoded.pages[0].width == 40 && decoded.pages[0].height == 20)
        let gray = try decoded.pages[0].grayscale()
        #expect(gray.pixel(x: 2, y: 2) < 64, "the marked corner stays dark")
        #expect(gray.pixel(x: 35, y: 15) > 192)
    }

    @Test func multiPageTIFFGivesEveryPage() throws {
        let pages = try [10, 20, 30].map { try Image.blank(width: $0, height: 15) }
        let decoded = try ImageDecoder().decode(try Image.multipageTIFF(pages))
        #expect(decoded.format == .tiff)
        #expect(decoded.pages.map(\.width) == [10, 20, 30])
    }

    @Test func pixelLimitIsCheckedBeforeDecoding() throws {
        let data = try Image.blank(width: 1000, height: 600).encoded(as: .png)
        #expect(throws: ImageError.tooManyPixels(pixels: 600_000, limit: 500_000)) {
            try ImageDecoder(limits: DecodeLimits(maxPixels: 500_000)).decode(data)
        }
        #expect(try ImageDecoder(limits: DecodeLimits(maxPixels: 600_000)).decode(data).pages.count == 1)
        #expect(DecodeLimits().maxPixels == 60_000_000)
    }

    /// Leptonica decodes a GIF or BMP to learn its size: the decoder reads their headers itself, so these few bytes
    /// are refused instead of making Leptonica allocate 4 GB.
    @Test(arguments: [
        (handMadeGIF(screen: (65535, 65535), frame: (65535, 65535)), 65535 * 65535),
        (handMadeGIF(screen: (10, 10), frame: (65535, 65535)), 65535 * 65535),
        (handMadeGIF(screen: (65535, 65535), frame: (1, 1)), 65535 * 65535),
        (handMadeBMP(width: 65535, height: 65535), 65535 * 65535),
        (handMadeBMP(width: 40000, height: -30000), 40000 * 30000),
        (handMadeBMP(width: 65535, height: 65535, coreHeader: true), 65535 * 65535),
    ])
    func gifAndBMPSizesAreReadFromTheirHeaders(data: Data, pixels: Int) throws {
        #expect(throws: ImageError.tooManyPixels(pixels: pixels, limit: 60_000_000)) { try ImageDecoder().decode(data) }
        #expect(throws: ImageError.tooManyPixels(pixels: pixels, limit: 60_000_000)) {
            try ImageDecoder().checkHeader(prefix: data.prefix(64))
        }
    }

    @Test func framesOfAGIFCountTogether() throws {
        let frame: [UInt8] = [0x2C, 0, 0, 0, 0, 0x10, 0x27, 0x10, 0x27, 0, 2, 0]  // 10 000 × 10 000
        let gif = Data(Array("GIF89a".utf8) + [10, 0, 10, 0, 0, 0, 0] + frame + frame + [0x3B])
        #expect(throws: ImageError.tooManyPixels(pixels: 200_000_000, limit: 150_000_000)) {
            try ImageDecoder(limits: DecodeLimits(maxPixels: 150_000_000)).decode(gif)
        }
    }

    @Test func realGIFsAndBMPsPassTheirHeaderChecks() throws {
        for format in [ImageFormat.gif, .bmp] {
            let data = try Image.blank(width: 300, height: 200).encoded(as: format)
            #expect(throws: ImageError.tooManyPixels(pixels: 60_000, limit: 59_999)) {
                try ImageDecoder(limits: DecodeLimits(maxPixels: 59_999)).decode(data)
            }
            #expect(try ImageDecoder(limits: DecodeLimits(maxPixels: 60_000)).decode(data).pages[0].width == 300)
        }
        #expect(throws: ImageError.cannotDecode) { try ImageDecoder().decode(handMadeBMP(width: 0, height: 10)) }
    }

    @Test func pixelLimitCoversEveryTIFFPage() throws {
        let pages = [try Image.blank(width: 10, height: 10), try Image.blank(width: 1000, height: 1000)]
        let data = try Image.multipageTIFF(pages)
        #expect(throws: ImageError.tooManyPixels(pixels: 1_000_000, limit: 100_000)) {
            try ImageDecoder(limits: DecodeLimits(maxPixels: 100_000)).decode(data)
        }
        #expect(throws: ImageError.tooManyPages(pages: 2, limit: 1)) {
            try ImageDecoder(limits: DecodeLimits(maxPages: 1)).decode(data)
        }
    }

    @Test func bytesThatAreNoImageCannotBeDecoded() throws {
        #expect(throws: ImageError.cannotDecode) { try ImageDecoder().decode(Data("hello, this is text".utf8)) }
        #expect(throws: ImageError.cannotDecode) { try ImageDecoder().decode(Data()) }
        let png = try cornerMarkedImage().encoded(as: .png)
        #expect(throws: ImageError.cannotDecode) { try ImageDecoder().decode(png.prefix(40)) }
    }

    @Test(arguments: [
        // orientation, decoded width × height, where the stored top-left square ends up (a point inside it)
        (1, 40, 20, 2, 2), (3, 40, 20, 37, 17), (6, 20, 40, 17, 2), (8, 20, 40, 2, 37),
        (2, 40, 20, 37, 2), (4, 40, 20, 2, 17), (5, 20, 40, 2, 2), (7, 20, 40, 17, 37),
    ])
    func jpegEXIFOrientationIsHonoured(orientation: Int, width: Int, height: Int, x: Int, y: Int) throws {
        let jpeg = try cornerMarkedImage().encoded(as: .jpeg)
        for littleEndian in [false, true] {
            let decoded = try ImageDecoder().decode(
                jpegWithEXIF(jpeg, orientation: UInt8(orientation), littleEndian: littleEndian))
            #expect(decoded.exifOrientation == orientation)
            let page = try decoded.pages[0].grayscale()
            #expect(page.width == width && page.height == height)
            #expect(page.pixel(x: x, y: y) < 64, "orientation \(orientation): the marked corner is at \(x), \(y)")
        }
    }
}

/// Phone photos: HEIC through libheif, and a JPEG cut short refused instead of read with grey below the cut.
@Suite struct DamagedImageTests {
    /// A noisy 300 × 200 photo as a JPEG of tens of kilobytes.
    static func noisyJPEG() throws -> Data {
        var state: UInt64 = 1
        let pixels: [UInt8] = (0..<300 * 200 * 3).map { _ in
            state = state &* 6364136223846793005 &+ 1442695040888963407
            return UInt8(truncatingIfNeeded: state >> 33)
        }
        return try Image.fromRGB(pixels, width: 300, height: 200).encoded(as: .jpeg)
    }

    @Test func aTruncatedJPEGIsDamagedNotDecoded() throws {
        let jpeg = try Self.noisyJPEG()
        #expect(jpeg.count > 20_000)
        #expect(try ImageDecoder().decode(jpeg).pages[0].width == 300)
        for kept in [2048, jpeg.count / 2] {
            #expect {
                try ImageDecoder().decode(jpeg.prefix(kept))
            } throws: { error in
                guard case .damaged(let reason) = error as? ImageError else { return false }
                return reason.contains("truncated")
            }
        }
    }

    @Test func aTruncatedHEICIsRefused() throws {
        let heic = try cornerMarkedImage().encoded(as: .heic)
        #expect(try ImageDecoder().decode(heic).pages[0].width == 40)
        #expect(throws: ImageError.self) { try ImageDecoder().decode(heic.prefix(heic.count / 2)) }
        #expect(throws: ImageError.tooManyPixels(pixels: 800, limit: 799)) {
            try ImageDecoder(limits: DecodeLimits(maxPixels: 799)).decode(heic)
        }
    }
}

@Suite struct MidToneTests {
    /// Binary content has no mid-tones whether stored at 1 or 8 bits; a blurred copy (anti-aliased edges) has some.
    @Test func binaryPagesHaveNoMidTones() throws {
        let marked = try cornerMarkedImage()
        #expect(try marked.midToneFraction() == 0)
        #expect(try marked.converted(toDepth: 1).midToneFraction() == 0)
        #expect(try marked.scaled(by: 1.7).midToneFraction() > 0.005, "interpolated edges are mid-tones")
    }
}
