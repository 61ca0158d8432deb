import CImageCodecs
import Foundation

/// An 8-bit RGB image, rows top to bottom, pixels interleaved (r, g, b).
public struct RGBImage: Sendable, Equatable {
    public let width: Int
    public let height: Int
    public var pixels: [UInt8]

    public init(width: Int, height: Int, pixels: [UInt8]) {
        precondition(pixels.count == width * height * 3, "pixel buffer does not match \(width)×\(height)")
        self.width = width
        self.height = height
        self.pixels = pixels
    }

    /// Largest decoded image accepted by default: 40 megapixels (a 120 MiB RGB buffer). Checked from the header,
    /// before any pixel is decoded, so a small file claiming a huge size costs nothing.
    public static let defaultPixelLimit = 40_000_000

    /// Decodes PNG, JPEG, WebP or HEIF/HEIC bytes, turning a JPEG upright by its EXIF orientation as a photo viewer
    /// does (a HEIC comes upright from libheif, which applies its rotation). Throws `invalidArgument` (naming `name`)
    /// for bytes that are not a decodable image, are cut short or damaged (a truncated JPEG is refused, not decoded
    /// with grey where its data is missing), or exceed the limit (the limit is on the full size, whatever is decoded).
    ///
    /// `atLeast` (upright width and height) lets a JPEG decode at 1/2, 1/4 or 1/8 of its size while the result still
    /// covers it: libjpeg's DCT scaling skips most of the decoding, and everything after works on 1/64 of the pixels
    /// at 1/8 — a model whose input is a few dozen pixels needs no more of a 12-megapixel photo.
    public static func decode(
        _ bytes: [UInt8], name: String = "image", pixelLimit: Int = defaultPixelLimit,
        atLeast minimum: (width: Int, height: Int)? = nil
    ) throws -> RGBImage {
        var format: Int32 = 0
        var width: UInt32 = 0, height: UInt32 = 0
        var message = [CChar](repeating: 0, count: 256)
        let probed = bytes.withUnsafeBufferPointer {
            image_probe($0.baseAddress, $0.count, &format, &width, &height, &message, message.count)
        }
        guard probed == 0 else {
            throw ClassificationError.invalid("\(name): not a decodable image (\(text(message)))")
        }
        let pixels = Int(width) * Int(height)
        guard pixels > 0 else { throw ClassificationError.invalid("\(name): the image is empty") }
        guard pixels <= pixelLimit else {
            throw ClassificationError.invalid("\(name): \(width)×\(height) exceeds the limit of \(pixelLimit) pixels")
        }
        let orientation = format == IMAGE_FORMAT_JPEG ? EXIF.orientation(inJPEG: bytes) : 1
        var reduction = 1
        if format == IMAGE_FORMAT_JPEG, let minimum {
            // Orientations 5–8 turn the image a quarter: its stored width is the upright height.
            let (needWidth, needHeight) =
                orientation >= 5 ? (minimum.height, minimum.width) : (minimum.width, minimum.height)
            while reduction < 8, Int(width) / (reduction * 2) >= needWidth, Int(height) / (reduction * 2) >= needHeight
            { reduction *= 2 }
        }
        // libjpeg's scaled size: each side rounded up.
        let decodedWidth = (Int(width) + reduction - 1) / reduction,
            decodedHeight = (Int(height) + reduction - 1) / reduction
        let capacity = decodedWidth * decodedHeight * 3
        var failure: Int32 = 0
        let rgb = [UInt8](unsafeUninitializedCapacity: capacity) { buffer, initialised in
            failure = bytes.withUnsafeBufferPointer {
                image_decode_rgb(
                    $0.baseAddress, $0.count, UInt32(reduction), buffer.baseAddress, capacity, &message, message.count)
            }
            if failure != 0 { buffer.initialize(repeating: 0) }
            initialised = capacity
        }
        guard failure == 0 else {
            throw ClassificationError.invalid("\(name): the image is truncated or damaged (\(text(message)))")
        }
        return RGBImage(width: decodedWidth, height: decodedHeight, pixels: rgb).oriented(orientation)
    }

    /// The image as a baseline JPEG (libjpeg-turbo) of `quality` 1–100: for benchmarks and tests that need photos.
    public func jpeg(quality: Int = 90) throws -> [UInt8] {
        var out: UnsafeMutablePointer<UInt8>?
        var length = 0
        var message = [CChar](repeating: 0, count: 256)
        let status = pixels.withUnsafeBufferPointer {
            image_encode_jpeg(
                $0.baseAddress, UInt32(width), UInt32(height), Int32(quality), &out, &length, &message, message.count)
        }
        defer { free(out) }
        guard status == 0, let out else { throw ClassificationError.invalid("JPEG encoding failed: \(text(message))") }
        return Array(UnsafeBufferPointer(start: out, count: length))
    }

    /// The image as a lossy WebP of `quality` 1–100 (libwebp): for tests that need the formats phones send.
    public func webp(quality: Int = 80) throws -> [UInt8] {
        try encoded("WebP", quality: quality, image_encode_webp)
    }

    /// The image as a HEIC of `quality` 1–100 (libheif with x265), as an iPhone writes photos: for tests.
    public func heic(quality: Int = 60) throws -> [UInt8] {
        try encoded("HEIC", quality: quality, image_encode_heic)
    }

    private typealias Encoder = (
        UnsafePointer<UInt8>?, UInt32, UInt32, Int32, UnsafeMutablePointer<UnsafeMutablePointer<UInt8>?>?,
        UnsafeMutablePointer<Int>?, UnsafeMutablePointer<CChar>?, Int
    ) -> Int32

    private func encoded(_ format: String, quality: Int, _ encode: Encoder) throws -> [UInt8] {
        var out: UnsafeMutablePointer<UInt8>?
        var length = 0
        var message = [CChar](repeating: 0, count: 256)
        let status = pixels.withUnsafeBufferPointer {
            encode(
                $0.baseAddress, UInt32(width), UInt32(height), Int32(quality), &out, &length, &message, message.count)
        }
        defer { free(out) }
        guard status == 0, let out else {
            throw ClassificationError.invalid("\(format) encoding failed: \(text(message))")
        }
        return Array(UnsafeBufferPointer(start: out, count: length))
    }

    /// Width and height from the header alone (validation of boxes without decoding), upright per EXIF.
    public static func size(of bytes: [UInt8], name: String = "image") throws -> (width: Int, height: Int) {
        var format: Int32 = 0
        var width: UInt32 = 0, height: UInt32 = 0
        var message = [CChar](repeating: 0, count: 256)
        let probed = bytes.withUnsafeBufferPointer {
            image_probe($0.baseAddress, $0.count, &format, &width, &height, &message, message.count)
        }
        guard probed == 0 else {
            throw ClassificationError.invalid("\(name): not a decodable image (\(text(message)))")
        }
        let orientation = format == IMAGE_FORMAT_JPEG ? EXIF.orientation(inJPEG: bytes) : 1
        return orientation >= 5 ? (Int(height), Int(width)) : (Int(width), Int(height))
    }

    /// Applies an EXIF orientation (1–8) so the result is upright.
    public func oriented(_ orientation: Int) -> RGBImage {
        guard (2...8).contains(orientation) else { return self }
        let transposed = orientation >= 5
        let outWidth = transposed ? height : width
        let outHeight = transposed ? width : height
        var out = [UInt8](repeating: 0, count: pixels.count)
        for y in 0..<outHeight {
            for x in 0..<outWidth {
                // Source coordinate for output (x, y), per the EXIF definitions.
                let (sx, sy): (Int, Int)
                switch orientation {
                case 2: (sx, sy) = (width - 1 - x, y)
                case 3: (sx, sy) = (width - 1 - x, height - 1 - y)
                case 4: (sx, sy) = (x, height - 1 - y)
                case 5: (sx, sy) = (y, x)
                case 6: (sx, sy) = (y, height - 1 - x)
                case 7: (sx, sy) = (width - 1 - y, height - 1 - x)
                default: (sx, sy) = (width - 1 - y, x)  // 8
                }
                let s = (sy * width + sx) * 3, d = (y * outWidth + x) * 3
                out[d] = pixels[s]
                out[d + 1] = pixels[s + 1]
                out[d + 2] = pixels[s + 2]
            }
        }
        return RGBImage(width: outWidth, height: outHeight, pixels: out)
    }
}

/// A NUL-terminated C message buffer as a String.
private func text(_ buffer: [CChar]) -> String {
    String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

/// The one EXIF field the service needs: the orientation tag (0x0112) of a JPEG's APP1 segment.
enum EXIF {
    static func orientation(inJPEG bytes: [UInt8]) -> Int {
        var i = 2
        while i + 4 <= bytes.count, bytes[i] == 0xFF {
            let marker = bytes[i + 1]
            let length = Int(bytes[i + 2]) << 8 | Int(bytes[i + 3])
            if marker == 0xDA || marker == 0xD9 { break }  // start of scan: no more metadata
            if marker == 0xE1, i + 4 + length - 2 <= bytes.count,
                let found = tiffOrientation(Array(bytes[(i + 4)..<(i + 2 + length)]))
            {
                return found
            }
            i += 2 + length
        }
        return 1
    }

    private static func tiffOrientation(_ segment: [UInt8]) -> Int? {
        guard segment.count >= 14, segment.starts(with: Array("Exif\0\0".utf8)) else { return nil }
        let tiff = Array(segment.dropFirst(6))
        let little = tiff[0] == 0x49
        func u16(_ at: Int) -> Int? {
            guard at + 2 <= tiff.count else { return nil }
            return little ? Int(tiff[at]) | Int(tiff[at + 1]) << 8 : Int(tiff[at]) << 8 | Int(tiff[at + 1])
        }
        func u32(_ at: Int) -> Int? {
            guard let a = u16(at), let b = u16(at + 2) else { return nil }
            return little ? a | b << 16 : a << 16 | b
        }
        guard let ifd = u32(4), let entries = u16(ifd) else { return nil }
        for entry in 0..<entries {
            let at = ifd + 2 + entry * 12
            guard let tag = u16(at) else { return nil }
            if tag == 0x0112, let value = u16(at + 8), (1...8).contains(value) { return value }
        }
        return nil
    }
}
