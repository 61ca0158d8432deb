import CImageCodecs
import CTesseract
import Foundation

/// A decoded raster image: a Leptonica `Pix` that nothing mutates once this value owns it.
///
/// Every operation returns a new image, so an `Image` can be shared between threads; Leptonica's reference
/// counting is not thread-safe, which is why the pixels are never cloned (`pixClone`) into a second owner.
public final class Image: @unchecked Sendable {
    let pix: UnsafeMutablePointer<PIX>

    /// Takes ownership of `pix` (destroyed with this object).
    init(owning pix: UnsafeMutablePointer<PIX>) {
        self.pix = pix
    }

    /// Takes ownership of a Leptonica result, or throws `.processing(step)` when Leptonica returned NULL.
    static func wrap(_ pix: UnsafeMutablePointer<PIX>?, _ step: String) throws -> Image {
        guard let pix else { throw ImageError.processing(step) }
        return Image(owning: pix)
    }

    deinit {
        var pointer: UnsafeMutablePointer<PIX>? = pix
        pixDestroy(&pointer)
    }

    public var width: Int { Int(pixGetWidth(pix)) }
    public var height: Int { Int(pixGetHeight(pix)) }
    /// Bits per pixel: 1 (binary), 2/4/8 (grey or palette), 32 (RGB).
    public var depth: Int { Int(pixGetDepth(pix)) }
    public var pixelCount: Int { width * height }

    /// A blank image of `width` × `height`: white at 8 bits per pixel (grey) or 32 (RGB), or all 0 (white)
    /// at 1 bit per pixel.
    /// For 8 bits per pixel, `gray` sets the shade (0 black … 255 white).
    public static func blank(width: Int, height: Int, depth: Int = 8, gray: UInt8 = 255) throws -> Image {
        guard width > 0, height > 0, [1, 8, 32].contains(depth) else {
            throw ImageError.processing("blank \(width)x\(height)x\(depth)")
        }
        let image = try wrap(pixCreate(Int32(width), Int32(height), Int32(depth)), "pixCreate")
        switch depth {
        case 8: pixSetAllArbitrary(image.pix, UInt32(gray))
        case 32: pixSetAll(image.pix)
        default: break
        }
        return image
    }

    /// A copy with the dark pixels of `mask` (converted to binary) painted in `gray` at (`x`, `y`): draws text
    /// cut from one image onto another without its background. This image must be grey (8 bits per pixel).
    public func painting(_ mask: Image, x: Int, y: Int, gray: UInt8) throws -> Image {
        guard depth == 8 else { throw ImageError.processing("painting needs an 8-bit image") }
        let result = try copy()
        let binary = mask.depth == 1 ? mask : try mask.otsuBinarised()
        guard pixPaintThroughMask(result.pix, binary.pix, Int32(x), Int32(y), UInt32(gray)) == 0 else {
            throw ImageError.processing("pixPaintThroughMask")
        }
        return result
    }

    /// The pixel value at (`x`, `y`) (grey level, palette index, bit or packed RGB). For tests.
    func pixel(x: Int, y: Int) -> UInt32 {
        var value: UInt32 = 0
        _ = pixGetPixel(pix, Int32(x), Int32(y), &value)
        return value
    }

    // MARK: Geometry

    /// Turned clockwise by `quarterTurns` × 90°.
    public func rotated(quarterTurns: Int) throws -> Image {
        let turns = ((quarterTurns % 4) + 4) % 4
        if turns == 0 { return try copy() }
        return try Self.wrap(pixRotateOrth(pix, Int32(turns)), "pixRotateOrth")
    }

    /// Mirrored left to right.
    public func flippedHorizontally() throws -> Image {
        try Self.wrap(pixFlipLR(nil, pix), "pixFlipLR")
    }

    /// Mirrored top to bottom.
    public func flippedVertically() throws -> Image {
        try Self.wrap(pixFlipTB(nil, pix), "pixFlipTB")
    }

    /// Rotated by `degrees` (positive is clockwise) about the centre, keeping the size and bringing in white.
    public func rotated(degrees: Double) throws -> Image {
        let radians = Float(degrees * .pi / 180)
        return try Self.wrap(
            pixRotate(pix, radians, Int32(L_ROTATE_AREA_MAP), Int32(L_BRING_IN_WHITE), 0, 0),
            "pixRotate")
    }

    /// Scaled by `factor` in both directions.
    public func scaled(by factor: Double) throws -> Image {
        try Self.wrap(pixScale(pix, Float(factor), Float(factor)), "pixScale")
    }

    /// The part of the image inside `rect` (clipped to the image); throws when nothing is left.
    public func cropped(to rect: PixelRect) throws -> Image {
        guard let box = boxCreate(Int32(rect.x), Int32(rect.y), Int32(rect.width), Int32(rect.height)) else {
            throw ImageError.processing("boxCreate")
        }
        var boxPointer: UnsafeMutablePointer<BOX>? = box
        defer { boxDestroy(&boxPointer) }
        return try Self.wrap(pixClipRectangle(pix, box, nil), "pixClipRectangle")
    }

    /// A copy of this image with `other` painted over it at (`x`, `y`) (top-left origin); `other` is converted to
    /// this image's depth first. Used to compose test and benchmark images.
    public func pasting(_ other: Image, x: Int, y: Int) throws -> Image {
        let result = try copy()
        let source = try other.converted(toDepth: depth)
        let status = pixRasterop(
            result.pix, Int32(x), Int32(y), Int32(source.width), Int32(source.height), PIX_SRC, source.pix, 0, 0)
        guard status == 0 else { throw ImageError.processing("pixRasterop") }
        return result
    }

    // MARK: Pixels

    /// Dark and light swapped.
    public func inverted() throws -> Image {
        try Self.wrap(pixInvert(nil, pix), "pixInvert")
    }

    /// 8-bit grey (palettes removed, RGB to luminance, binary to 0/255).
    public func grayscale() throws -> Image {
        try Self.wrap(pixConvertTo8(pix, 0), "pixConvertTo8")
    }

    /// The same picture at 1, 8 or 32 bits per pixel.
    public func converted(toDepth target: Int) throws -> Image {
        if target == depth, pixGetColormap(pix) == nil { return try copy() }
        switch target {
        case 1: return try Self.wrap(pixConvertTo1(pix, 128), "pixConvertTo1")
        case 8: return try grayscale()
        case 32: return try Self.wrap(pixConvertTo32(pix), "pixConvertTo32")
        default: throw ImageError.processing("convert to \(target) bits per pixel")
        }
    }

    /// The fraction (0–1) of pixels that are dark once the image is binarised with a global Otsu threshold:
    /// a page of dark text on light paper is mostly light (well under 0.5), white text on a dark display is
    /// mostly dark.
    public func darkFraction() throws -> Double {
        let binary = depth == 1 ? try copy() : try otsuBinarised()
        var count: Int32 = 0
        guard pixCountPixels(binary.pix, &count, nil) == 0 else { throw ImageError.processing("pixCountPixels") }
        return Double(count) / Double(max(1, binary.pixelCount))
    }

    /// The fraction (0–1) of pixels between black and white (grey levels 32–223): 0 for a binary page, even one
    /// stored as grey (an inverted fax), a few percent for rendered text's anti-aliased edges, most of a photo.
    public func midToneFraction() throws -> Double {
        let gray = try grayscale()
        guard let histogram = pixGetGrayHistogram(gray.pix, 1) else {
            throw ImageError.processing("pixGetGrayHistogram")
        }
        var histogramPointer: UnsafeMutablePointer<NUMA>? = histogram
        defer { numaDestroy(&histogramPointer) }
        var total = 0.0, middle = 0.0
        for level in 0..<256 {
            var count: Float = 0
            numaGetFValue(histogram, Int32(level), &count)
            total += Double(count)
            if (32..<224).contains(level) { middle += Double(count) }
        }
        return total > 0 ? middle / total : 0
    }

    /// The grey level (0–255) under which `fraction` (0–1) of the pixels lie: how light a photo's highlights are.
    public func greyPercentile(_ fraction: Double) throws -> Int {
        let gray = try grayscale()
        guard let histogram = pixGetGrayHistogram(gray.pix, 1) else {
            throw ImageError.processing("pixGetGrayHistogram")
        }
        var histogramPointer: UnsafeMutablePointer<NUMA>? = histogram
        defer { numaDestroy(&histogramPointer) }
        var counts = [Double](repeating: 0, count: 256)
        for level in 0..<256 {
            var count: Float = 0
            numaGetFValue(histogram, Int32(level), &count)
            counts[level] = Double(count)
        }
        let target = fraction * counts.reduce(0, +)
        var sum = 0.0
        for level in 0..<256 {
            sum += counts[level]
            if sum >= target { return level }
        }
        return 255
    }

    /// The levels stretched linearly, `low` to black and `high` to white (colour kept): a dim photo's contrast
    /// restored before it is thresholded.
    public func stretched(low: Int, high: Int) throws -> Image {
        guard 0 <= low, low < high, high <= 255 else { throw ImageError.processing("stretch \(low)…\(high)") }
        let source = depth == 8 || depth == 32 ? self : try converted(toDepth: 8)
        return try Self.wrap(pixGammaTRC(nil, source.pix, 1, Int32(low), Int32(high)), "pixGammaTRC")
    }

    /// Binary (1 bit per pixel) with one Otsu threshold for the whole image.
    func otsuBinarised() throws -> Image {
        let gray = try grayscale()
        var binary: UnsafeMutablePointer<PIX>?
        let status = pixOtsuAdaptiveThreshold(
            gray.pix, Int32(max(16, gray.width)), Int32(max(16, gray.height)), 0, 0, 0.1, nil, &binary)
        guard status == 0 else { throw ImageError.processing("pixOtsuAdaptiveThreshold") }
        return try Self.wrap(binary, "pixOtsuAdaptiveThreshold")
    }

    /// Binary with a local (Sauvola) threshold, which keeps text readable under uneven light and shadows where a
    /// single threshold loses one side of the page. `window` is the half-width of the neighbourhood in pixels;
    /// by default it follows the image size (about a text line of a photographed page).
    public func adaptivelyBinarised(window: Int? = nil) throws -> Image {
        if depth == 1 { return try copy() }
        let gray = try grayscale()
        let halfWidth = window ?? max(8, min(64, min(gray.width, gray.height) / 40))
        // Sauvola needs the window to fit in a tile: split large images into tiles as Leptonica suggests.
        let tilesX = max(1, gray.width / 1000), tilesY = max(1, gray.height / 1000)
        guard gray.width > 2 * halfWidth + 3, gray.height > 2 * halfWidth + 3 else { return try otsuBinarised() }
        var binary: UnsafeMutablePointer<PIX>?
        let status = pixSauvolaBinarizeTiled(
            gray.pix, Int32(halfWidth), 0.34, Int32(tilesX), Int32(tilesY), nil, &binary)
        guard status == 0 else { throw ImageError.processing("pixSauvolaBinarizeTiled") }
        return try Self.wrap(binary, "pixSauvolaBinarizeTiled")
    }

    /// The skew of text lines in degrees (positive: lines fall to the right) and Leptonica's confidence in it,
    /// or nil when no lines were found.
    public func skew() throws -> (degrees: Double, confidence: Double)? {
        let binary = depth == 1 ? try copy() : try otsuBinarised()
        var angle: Float = 0, confidence: Float = 0
        guard pixFindSkew(binary.pix, &angle, &confidence) == 0 else { return nil }
        return (Double(angle), Double(confidence))
    }

    /// The median height in pixels of the dark connected components (8-connected) between 4 pixels and a quarter
    /// of the image high: for a page of text, about the height of its lowercase letters. Nil without such
    /// components. Components are counted on at most a 1500-pixel-high copy, so a large page costs little.
    public func medianComponentHeight() throws -> Double? {
        var binary = depth == 1 ? self : try otsuBinarised()
        var factor = 1.0
        if binary.height > 1500 {
            factor = 1500 / Double(binary.height)
            binary = try Self.wrap(pixScaleToGray(binary.pix, Float(factor)), "pixScaleToGray").otsuBinarised()
        }
        guard let boxes = pixConnCompBB(binary.pix, 8) else { throw ImageError.processing("pixConnCompBB") }
        var boxesPointer: UnsafeMutablePointer<BOXA>? = boxes
        defer { boxaDestroy(&boxesPointer) }
        let limit = Double(binary.height) / 4
        var heights: [Double] = []
        for index in 0..<boxaGetCount(boxes) {
            var x: Int32 = 0, y: Int32 = 0, w: Int32 = 0, h: Int32 = 0
            guard boxaGetBoxGeometry(boxes, index, &x, &y, &w, &h) == 0 else { continue }
            if Double(h) >= 4 * factor, Double(h) <= limit { heights.append(Double(h)) }
        }
        guard !heights.isEmpty else { return nil }
        heights.sort()
        return heights[heights.count / 2] / factor
    }

    // MARK: Encoding

    /// An RGB picture (`rgb`: width × height × 3 bytes, rows top to bottom) as a 32-bit image.
    public static func fromRGB(_ rgb: [UInt8], width: Int, height: Int) throws -> Image {
        guard width > 0, height > 0, rgb.count == width * height * 3 else {
            throw ImageError.processing("RGB buffer of \(rgb.count) bytes for \(width)x\(height)")
        }
        let image = try wrap(pixCreate(Int32(width), Int32(height), 32), "pixCreate")
        let words = pixGetData(image.pix)!, wordsPerLine = Int(pixGetWpl(image.pix))
        for y in 0..<height {
            for x in 0..<width {
                let i = (y * width + x) * 3
                words[y * wordsPerLine + x] = UInt32(rgb[i]) << 24 | UInt32(rgb[i + 1]) << 16 | UInt32(rgb[i + 2]) << 8
            }
        }
        return image
    }

    /// The picture as 8-bit grey levels, rows top to bottom (width × height bytes): for tools that colour or
    /// measure it.
    public func greyBytes() throws -> [UInt8] {
        let grey = depth == 8 ? self : try converted(toDepth: 8)
        let words = pixGetData(grey.pix)!, wordsPerLine = Int(pixGetWpl(grey.pix))
        var bytes = [UInt8](repeating: 0, count: width * height)
        bytes.withUnsafeMutableBufferPointer { out in
            words.withMemoryRebound(to: UInt8.self, capacity: height * wordsPerLine * 4) { raw in
                for y in 0..<height {
                    for x in 0..<width {
                        // Leptonica packs 8-bit pixels big-endian in 32-bit words.
                        out[y * width + x] = raw[y * wordsPerLine * 4 + (x & ~3) + (3 - (x & 3))]
                    }
                }
            }
        }
        return bytes
    }

    /// The picture as 8-bit RGB, rows top to bottom (width × height × 3 bytes).
    public func rgbBytes() throws -> [UInt8] {
        let colour = try converted(toDepth: 32)
        let words = pixGetData(colour.pix)!, wordsPerLine = Int(pixGetWpl(colour.pix))
        var rgb = [UInt8](repeating: 0, count: width * height * 3)
        for y in 0..<height {
            for x in 0..<width {
                let word = words[y * wordsPerLine + x], i = (y * width + x) * 3
                rgb[i] = UInt8(word >> 24)
                rgb[i + 1] = UInt8(truncatingIfNeeded: word >> 16)
                rgb[i + 2] = UInt8(truncatingIfNeeded: word >> 8)
            }
        }
        return rgb
    }

    /// The image as bytes of `format` (PNG, TIFF with G4 for binary images, JPEG, BMP, GIF, WebP; HEIC through
    /// libheif, for tests of photos as iPhones take them).
    public func encoded(as format: ImageFormat) throws -> Data {
        if format == .heic {
            var out: UnsafeMutablePointer<UInt8>?
            var length = 0
            var message = [CChar](repeating: 0, count: 256)
            let rgb = try rgbBytes()
            let status = rgb.withUnsafeBufferPointer {
                image_encode_heic(
                    $0.baseAddress, UInt32(width), UInt32(height), 70, &out, &length, &message, message.count)
            }
            defer { free(out) }
            guard status == 0, let out else {
                throw ImageError.processing(
                    "HEIC encoding: "
                        + String(decoding: message.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
            }
            return Data(bytes: out, count: length)
        }
        var bytes: UnsafeMutablePointer<UInt8>?
        var size = 0
        let leptonicaFormat: Int32
        switch format {
        case .png: leptonicaFormat = Int32(IFF_PNG)
        case .jpeg: leptonicaFormat = Int32(IFF_JFIF_JPEG)
        case .tiff: leptonicaFormat = Int32(depth == 1 ? IFF_TIFF_G4 : IFF_TIFF_ZIP)
        case .bmp: leptonicaFormat = Int32(IFF_BMP)
        case .gif: leptonicaFormat = Int32(IFF_GIF)
        case .webp: leptonicaFormat = Int32(IFF_WEBP)
        case .heic: throw ImageError.processing("HEIC is encoded above")
        }
        let source = format == .jpeg || format == .webp ? try converted(toDepth: depth == 32 ? 32 : 8) : self
        guard pixWriteMem(&bytes, &size, source.pix, leptonicaFormat) == 0, let bytes else {
            throw ImageError.processing("pixWriteMem \(format)")
        }
        defer { lept_free(bytes) }
        return Data(bytes: bytes, count: size)
    }

    /// `pages` as one multi-page TIFF (binary pages G4-compressed, others lossless).
    public static func multipageTIFF(_ pages: [Image]) throws -> Data {
        guard let pixa = pixaCreate(Int32(pages.count)) else { throw ImageError.processing("pixaCreate") }
        var pixaPointer: UnsafeMutablePointer<PIXA>? = pixa
        defer { pixaDestroy(&pixaPointer) }
        for page in pages {
            // L_COPY: the array owns a copy, so this image's pixels keep a single owner.
            guard pixaAddPix(pixa, page.pix, Int32(L_COPY)) == 0 else { throw ImageError.processing("pixaAddPix") }
        }
        var bytes: UnsafeMutablePointer<UInt8>?
        var size = 0
        guard pixaWriteMemMultipageTiff(&bytes, &size, pixa) == 0, let bytes else {
            throw ImageError.processing("pixaWriteMemMultipageTiff")
        }
        defer { lept_free(bytes) }
        return Data(bytes: bytes, count: size)
    }

    func copy() throws -> Image {
        try Self.wrap(pixCopy(nil, pix), "pixCopy")
    }
}

/// The image file formats this module reads (where the Leptonica build reads them; HEIC through libheif) and writes.
public enum ImageFormat: String, Sendable, CaseIterable {
    case png, jpeg, tiff, bmp, gif, webp, heic
}

/// A rectangle in pixels, top-left origin.
public struct PixelRect: Sendable, Hashable, Codable {
    public var x: Int
    public var y: Int
    public var width: Int
    public var height: Int

    public init(x: Int, y: Int, width: Int, height: Int) {
        self.x = x
        self.y = y
        self.width = width
        self.height = height
    }
}
