import CImageCodecs
import CTesseract
import Foundation

/// Why image bytes were refused.
public enum ImageError: Error, Equatable, Sendable, CustomStringConvertible {
    /// Not an image format this module reads.
    case cannotDecode
    /// An image of a known format whose data is cut short or damaged (a JPEG that ends early would otherwise
    /// be read with grey where its data is missing), with the decoder's reason.
    case damaged(String)
    /// A page would decode to more pixels than allowed (`pixels` > `limit`); found from the header, before decoding.
    case tooManyPixels(pixels: Int, limit: Int)
    /// A multi-page file with more pages than allowed.
    case tooManyPages(pages: Int, limit: Int)
    /// A Leptonica operation failed (out of memory, or an image it cannot process): an internal error.
    case processing(String)

    public var description: String {
        switch self {
        case .cannotDecode: "cannot decode image"
        case .damaged(let reason): "the image is truncated or damaged (\(reason))"
        case .tooManyPixels(let pixels, let limit):
            "image has \(pixels) pixels, more than the limit of \(limit) (\(limit / 1_000_000) MP)"
        case .tooManyPages(let pages, let limit): "image has \(pages) pages, more than the limit of \(limit)"
        case .processing(let step): "image processing failed in \(step)"
        }
    }
}

/// Limits checked before any pixel is decoded, so an upload cannot make the service allocate without bound
/// (a 100 000 × 100 000 PNG is a few kilobytes of bytes and 40 GB of pixels).
public struct DecodeLimits: Sendable, Hashable {
    /// Pixels of one page (width × height). Default 60 megapixels: a 48 MP phone photo passes.
    public var maxPixels: Int
    /// Pages of a multi-page TIFF.
    public var maxPages: Int

    public init(maxPixels: Int = 60_000_000, maxPages: Int = 100) {
        self.maxPixels = maxPixels
        self.maxPages = maxPages
    }
}

/// A decoded image file: one page, or the pages of a multi-page TIFF, each upright as the file's EXIF
/// orientation says (JPEG).
public struct DecodedImage: Sendable {
    public let format: ImageFormat
    public let pages: [Image]
    /// The EXIF orientation tag (1–8) that was applied; 1 when there was none.
    public let exifOrientation: Int
    /// The pages are 1/`reduction` of the file's size on each side (a JPEG decoded reduced), 1 when full size.
    public var reduction: Int = 1
}

/// Decodes image bytes with Leptonica after checking their header against `DecodeLimits`; HEIF/HEIC (the iPhone's
/// default, which Leptonica cannot read) through the shared codecs (CImageCodecs, libheif).
public struct ImageDecoder: Sendable {
    public var limits: DecodeLimits

    public init(limits: DecodeLimits = DecodeLimits()) {
        TesseractRuntime.configureOnce()
        self.limits = limits
    }

    /// The pages of `data`. Throws `ImageError.cannotDecode` for bytes that are no image this module reads,
    /// `.damaged` for a file cut short or corrupt, and `.tooManyPixels` / `.tooManyPages` when the header announces
    /// more than the limits (the full size counts, whatever the reduction).
    ///
    /// A JPEG is decoded at 1/`jpegReduction` of its size (1, 2, 4 or 8; each side rounded up): libjpeg's DCT
    /// scaling skips most of the decoding work and the full-size pixels are never allocated, which is what a
    /// photo larger than its reader needs wants. Other formats ignore it; `DecodedImage.reduction` says what was
    /// applied.
    public func decode(_ data: Data, jpegReduction: Int = 1) throws -> DecodedImage {
        guard [1, 2, 4, 8].contains(jpegReduction) else {
            throw ImageError.processing("JPEG reduction \(jpegReduction)")
        }
        guard data.count >= 8 else { throw ImageError.cannotDecode }
        return try data.withUnsafeBytes { (raw: UnsafeRawBufferPointer) -> DecodedImage in
            let bytes = raw.bindMemory(to: UInt8.self)
            guard let base = bytes.baseAddress else { throw ImageError.cannotDecode }
            if image_sniff(base, bytes.count) == IMAGE_FORMAT_HEIF { return try decodeHEIF(base, count: bytes.count) }
            var leptonicaFormat: Int32 = 0
            guard findFileFormatBuffer(base, &leptonicaFormat) == 0 else { throw ImageError.cannotDecode }
            let format = try Self.format(leptonicaFormat)
            if format == .tiff { return try decodeTIFF(base, count: bytes.count) }

            switch format {
            // Leptonica learns a GIF's or BMP's size by decoding it (`pixReadHeaderMem` reads the whole file), so
            // a few bytes claiming 65535 × 65535 would be allocated before any check: read their headers here.
            case .gif:
                guard let pixels = HeaderSizes.gifPixels(UnsafeRawBufferPointer(bytes), complete: true) else {
                    throw ImageError.cannotDecode
                }
                try check(pixels: pixels)
            case .bmp:
                guard let (width, height) = HeaderSizes.bmpSize(UnsafeRawBufferPointer(bytes)) else {
                    throw ImageError.cannotDecode
                }
                try check(width: width, height: height)
            default:
                var headerFormat: Int32 = 0, width: Int32 = 0, height: Int32 = 0
                var bitsPerSample: Int32 = 0, samplesPerPixel: Int32 = 0, hasColormap: Int32 = 0
                guard
                    pixReadHeaderMem(
                        base, bytes.count, &headerFormat, &width, &height, &bitsPerSample, &samplesPerPixel,
                        &hasColormap)
                        == 0, width > 0, height > 0
                else { throw ImageError.cannotDecode }
                try check(width: Int(width), height: Int(height))
            }

            let image: Image
            if format == .jpeg {
                // Leptonica, like libjpeg, only warns when the data ends early and returns the picture with grey
                // below the cut; a warning sends the file to the shared decoder, which tells harmless ones from
                // lost data. When Leptonica refuses the file the shared decoder says why (a cut is "truncated").
                var warnings: Int32 = 0
                guard let pix = pixReadMemJpeg(base, bytes.count, 0, Int32(jpegReduction), &warnings, 0) else {
                    try Self.checkJPEGData(base, count: bytes.count)
                    throw ImageError.cannotDecode
                }
                image = Image(owning: pix)
                if warnings > 0 { try Self.checkJPEGData(base, count: bytes.count) }
            } else {
                image = try Image.wrapDecoded(pixReadMem(base, bytes.count))
            }
            guard format == .jpeg else { return DecodedImage(format: format, pages: [image], exifOrientation: 1) }
            let orientation = EXIFOrientation.read(fromJPEG: UnsafeRawBufferPointer(bytes)) ?? 1
            return DecodedImage(
                format: format, pages: [try image.applyingEXIFOrientation(orientation)], exifOrientation: orientation,
                reduction: jpegReduction)
        }
    }

    /// Checks the pixel limit from the first bytes of an upload still arriving, so an image too large to decode is
    /// refused before the rest of it is received. Throws `.tooManyPixels` when the header (of a PNG, JPEG, BMP, GIF
    /// or WebP) announces more than the limit; returns quietly when the header cannot be read from `prefix` (yet),
    /// leaving the verdict to `decode`.
    public func checkHeader(prefix data: Data) throws {
        guard let pixels = Self.announcedPixels(prefix: data) else { return }
        try check(pixels: pixels)
    }

    /// The pixels the header of a PNG, JPEG, BMP, GIF (the frames announced in `prefix`) or WebP announces; nil when
    /// it cannot be read from `prefix` or the format is another. What a decode will hold is known before it runs.
    public static func announcedPixels(prefix data: Data) -> Int? {
        guard data.count >= 32 else { return nil }
        return data.withUnsafeBytes { (raw: UnsafeRawBufferPointer) -> Int? in
            let bytes = raw.bindMemory(to: UInt8.self)
            guard let base = bytes.baseAddress else { return nil }
            var leptonicaFormat: Int32 = 0
            guard findFileFormatBuffer(base, &leptonicaFormat) == 0 else { return nil }
            switch Int(leptonicaFormat) {
            case IFF_GIF:
                return HeaderSizes.gifPixels(UnsafeRawBufferPointer(bytes), complete: false)
            case IFF_BMP:
                guard let (width, height) = HeaderSizes.bmpSize(UnsafeRawBufferPointer(bytes)) else { return nil }
                let (pixels, overflow) = width.multipliedReportingOverflow(by: height)
                return overflow ? .max : pixels
            case IFF_PNG, IFF_JFIF_JPEG, IFF_WEBP: break
            default: return nil
            }
            var headerFormat: Int32 = 0, width: Int32 = 0, height: Int32 = 0
            var bitsPerSample: Int32 = 0, samplesPerPixel: Int32 = 0, hasColormap: Int32 = 0
            guard
                pixReadHeaderMem(
                    base, bytes.count, &headerFormat, &width, &height, &bitsPerSample, &samplesPerPixel, &hasColormap)
                    == 0,
                width > 0, height > 0
            else { return nil }
            return Int(width) * Int(height)
        }
    }

    /// A HEIF's primary image, upright (libheif applies the file's rotation and mirroring), as a 32-bit page.
    private func decodeHEIF(_ base: UnsafePointer<UInt8>, count: Int) throws -> DecodedImage {
        var format: Int32 = 0, width: UInt32 = 0, height: UInt32 = 0
        var message = [CChar](repeating: 0, count: 256)
        guard image_probe(base, count, &format, &width, &height, &message, message.count) == 0 else {
            throw ImageError.damaged(Self.text(message))
        }
        guard width > 0, height > 0 else { throw ImageError.cannotDecode }
        try check(width: Int(width), height: Int(height))
        let capacity = Int(width) * Int(height) * 3
        var rgb = [UInt8](repeating: 0, count: capacity)
        let status = rgb.withUnsafeMutableBufferPointer {
            image_decode_rgb(base, count, 1, $0.baseAddress, capacity, &message, message.count)
        }
        guard status == 0 else { throw ImageError.damaged(Self.text(message)) }
        return DecodedImage(
            format: .heic, pages: [try Image.fromRGB(rgb, width: Int(width), height: Int(height))], exifOrientation: 1)
    }

    /// Throws `.damaged` when the shared decoder finds the JPEG cut short or corrupt.
    private static func checkJPEGData(_ base: UnsafePointer<UInt8>, count: Int) throws {
        var format: Int32 = 0, width: UInt32 = 0, height: UInt32 = 0
        var message = [CChar](repeating: 0, count: 256)
        guard image_probe(base, count, &format, &width, &height, &message, message.count) == 0 else {
            throw ImageError.damaged(text(message))
        }
        // Decoded at 1/8 of its size: libjpeg still reads every byte of the data, which is what is checked.
        let capacity = ((Int(width) + 7) / 8) * ((Int(height) + 7) / 8) * 3
        var rgb = [UInt8](repeating: 0, count: capacity)
        let status = rgb.withUnsafeMutableBufferPointer {
            image_decode_rgb(base, count, 8, $0.baseAddress, capacity, &message, message.count)
        }
        if status != 0 { throw ImageError.damaged(text(message)) }
    }

    private static func text(_ buffer: [CChar]) -> String {
        String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    private func decodeTIFF(_ base: UnsafePointer<UInt8>, count: Int) throws -> DecodedImage {
        // Check every page's header first: a file whose tenth page is huge is refused before page one decodes.
        var page: Int32 = 0
        while true {
            var width: Int32 = 0, height: Int32 = 0, bitsPerSample: Int32 = 0, samplesPerPixel: Int32 = 0
            var resolution: Int32 = 0, colormap: Int32 = 0, compression: Int32 = 0
            let status = readHeaderMemTiff(
                base, count, page, &width, &height, &bitsPerSample, &samplesPerPixel, &resolution, &colormap,
                &compression)
            if status != 0 { break }
            try check(width: Int(width), height: Int(height))
            page += 1
            if page > limits.maxPages { throw ImageError.tooManyPages(pages: Int(page), limit: limits.maxPages) }
        }
        guard page > 0 else { throw ImageError.cannotDecode }
        var pages: [Image] = []
        var offset = 0
        for _ in 0..<page {
            pages.append(try Image.wrapDecoded(pixReadMemFromMultipageTiff(base, count, &offset)))
            if offset == 0 { break }
        }
        return DecodedImage(format: .tiff, pages: pages, exifOrientation: 1)
    }

    private func check(pixels: Int) throws {
        if pixels > limits.maxPixels { throw ImageError.tooManyPixels(pixels: pixels, limit: limits.maxPixels) }
    }

    private func check(width: Int, height: Int) throws {
        let (pixels, overflow) = width.multipliedReportingOverflow(by: height)
        if overflow || pixels > limits.maxPixels {
            throw ImageError.tooManyPixels(pixels: overflow ? .max : pixels, limit: limits.maxPixels)
        }
    }

    private static func format(_ leptonicaFormat: Int32) throws -> ImageFormat {
        switch Int(leptonicaFormat) {
        case IFF_PNG: return .png
        case IFF_JFIF_JPEG: return .jpeg
        case IFF_BMP: return .bmp
        case IFF_GIF: return .gif
        case IFF_WEBP: return .webp
        case IFF_TIFF, IFF_TIFF_PACKBITS, IFF_TIFF_RLE, IFF_TIFF_G3, IFF_TIFF_G4, IFF_TIFF_LZW, IFF_TIFF_ZIP,
            IFF_TIFF_JPEG:
            return .tiff
        default: throw ImageError.cannotDecode
        }
    }
}

/// Image sizes read from GIF and BMP headers without Leptonica, which decodes those files to learn their size.
enum HeaderSizes {
    /// The pixels a GIF decodes to: its logical screen (bytes 6–9, little-endian) or, when larger, the sum of its
    /// frames' sizes (every image descriptor's; giflib keeps each frame's pixels, and a small screen may announce
    /// huge frames). Nil when the bytes are no GIF, or, if `complete`, when the blocks do not parse up to a frame.
    /// With `complete` false (a prefix of an upload) the frames found before the bytes end are counted.
    static func gifPixels(_ data: UnsafeRawBufferPointer, complete: Bool) -> Int? {
        guard data.count >= 13, data.prefix(4).elementsEqual(Array("GIF8".utf8)) else { return nil }
        func u16(_ at: Int) -> Int { Int(data[at]) | Int(data[at + 1]) << 8 }
        let screen = u16(6) * u16(8)
        var frames = 0, frameCount = 0
        var position = 13
        if data[10] & 0x80 != 0 { position += 3 << (Int(data[10] & 0x07) + 1) }  // global colour table
        /// Skips data sub-blocks (a length byte, that many bytes, … up to a zero length); false at the end of data.
        func skipSubBlocks() -> Bool {
            while position < data.count {
                let length = Int(data[position])
                position += 1 + length
                if length == 0 { return true }
            }
            return false
        }
        parsing: while position < data.count {
            switch data[position] {
            case 0x21:  // extension: label, sub-blocks
                position += 2
                guard skipSubBlocks() else { break parsing }
            case 0x2C:  // image descriptor: left, top, width, height, flags; colour table; LZW code size; sub-blocks
                guard position + 10 <= data.count else { break parsing }
                let (pixels, overflow) = frames.addingReportingOverflow(u16(position + 5) * u16(position + 7))
                frames = overflow ? .max : pixels
                frameCount += 1
                let flags = data[position + 9]
                position += 10
                if flags & 0x80 != 0 { position += 3 << (Int(flags & 0x07) + 1) }
                position += 1
                guard skipSubBlocks() else { break parsing }
            case 0x3B:  // trailer
                break parsing
            default:
                if complete { return frameCount > 0 ? max(screen, frames) : nil }
                break parsing
            }
        }
        if complete && frameCount == 0 { return nil }
        return max(screen, frames)
    }

    /// A BMP's width and height: 16-bit at bytes 18–21 for the old 12-byte core header, else signed 32-bit at
    /// bytes 18–25 (a negative height means rows stored top-down). Nil when the bytes are no BMP or the size is not
    /// positive.
    static func bmpSize(_ data: UnsafeRawBufferPointer) -> (width: Int, height: Int)? {
        guard data.count >= 26, data[0] == 0x42, data[1] == 0x4D else { return nil }
        func u32(_ at: Int) -> UInt32 {
            UInt32(data[at]) | UInt32(data[at + 1]) << 8 | UInt32(data[at + 2]) << 16 | UInt32(data[at + 3]) << 24
        }
        let width: Int, height: Int
        if u32(14) == 12 {
            width = Int(data[18]) | Int(data[19]) << 8
            height = Int(data[20]) | Int(data[21]) << 8
        } else {
            width = Int(Int32(bitPattern: u32(18)))
            height = abs(Int(Int32(bitPattern: u32(22))))
        }
        guard width > 0, height > 0 else { return nil }
        return (width, height)
    }
}

extension Image {
    fileprivate static func wrapDecoded(_ pix: UnsafeMutablePointer<PIX>?) throws -> Image {
        guard let pix else { throw ImageError.cannotDecode }
        return Image(owning: pix)
    }

    /// Upright as a viewer shows a photo with this EXIF orientation (1 upright … 8 turned 90° counter-clockwise).
    public func applyingEXIFOrientation(_ orientation: Int) throws -> Image {
        switch orientation {
        case 2: return try flippedHorizontally()
        case 3: return try rotated(quarterTurns: 2)
        case 4: return try flippedVertically()
        case 5: return try rotated(quarterTurns: 1).flippedHorizontally()  // transpose
        case 6: return try rotated(quarterTurns: 1)
        case 7: return try rotated(quarterTurns: 1).flippedVertically()  // transverse
        case 8: return try rotated(quarterTurns: 3)
        default: return self
        }
    }
}

/// Reads the orientation tag (0x0112) of a JPEG's EXIF block; Leptonica decodes the pixels as stored, so a phone
/// photo taken in portrait would otherwise be read lying on its side.
public enum EXIFOrientation {
    public static func read(fromJPEG bytes: UnsafeRawBufferPointer) -> Int? {
        let data = bytes.bindMemory(to: UInt8.self)
        guard data.count > 4, data[0] == 0xFF, data[1] == 0xD8 else { return nil }
        var position = 2
        while position + 4 <= data.count, data[position] == 0xFF {
            let marker = data[position + 1]
            if marker == 0xDA || marker == 0xD9 { return nil }  // start of scan: no EXIF before the pixels
            let length = Int(data[position + 2]) << 8 | Int(data[position + 3])
            guard length >= 2, position + 2 + length <= data.count else { return nil }
            let segment = position + 4
            if marker == 0xE1, length >= 14,
                Array(data[segment..<segment + 6]) == [0x45, 0x78, 0x69, 0x66, 0, 0]  // "Exif\0\0"
            {
                return orientation(inTIFF: UnsafeBufferPointer(rebasing: data[(segment + 6)..<(position + 2 + length)]))
            }
            position += 2 + length
        }
        return nil
    }

    /// The orientation entry of IFD0 in a TIFF-structured EXIF payload.
    static func orientation(inTIFF tiff: UnsafeBufferPointer<UInt8>) -> Int? {
        guard tiff.count >= 8 else { return nil }
        let little: Bool
        switch (tiff[0], tiff[1]) {
        case (0x49, 0x49): little = true
        case (0x4D, 0x4D): little = false
        default: return nil
        }
        func u16(_ at: Int) -> Int? {
            guard at >= 0, at + 2 <= tiff.count else { return nil }
            return little ? Int(tiff[at]) | Int(tiff[at + 1]) << 8 : Int(tiff[at]) << 8 | Int(tiff[at + 1])
        }
        func u32(_ at: Int) -> Int? {
            guard let high = u16(little ? at + 2 : at), let low = u16(little ? at : at + 2) else { return nil }
            return high << 16 | low
        }
        guard let ifd = u32(4), let entries = u16(ifd) else { return nil }
        for index in 0..<entries {
            let entry = ifd + 2 + index * 12
            guard let tag = u16(entry) else { return nil }
            if tag == 0x0112, let value = u16(entry + 8), (1...8).contains(value) { return value }
        }
        return nil
    }
}
