@testable import ClassificationCore

/// A minimal PNG writer (stored, uncompressed deflate blocks) so tests make their own images without an encoder
/// library: the decoder under test is libpng, which must read any valid PNG.
enum TestPNG {
    static func encode(_ image: RGBImage) -> [UInt8] {
        var raw: [UInt8] = []
        for y in 0..<image.height {
            raw.append(0)  // filter: none
            raw += image.pixels[(y * image.width * 3)..<((y + 1) * image.width * 3)]
        }
        return encode(width: image.width, height: image.height, raw: raw)
    }

    /// A PNG whose header says width × height over whatever scanline bytes `raw` holds.
    /// `colourType` 2 is RGB, 6 RGBA (`raw`'s scanlines then 4 bytes a pixel).
    static func encode(width: Int, height: Int, raw: [UInt8], colourType: UInt8 = 2) -> [UInt8] {
        var zlib: [UInt8] = [0x78, 0x01]
        var offset = 0
        repeat {
            let length = min(65535, raw.count - offset)
            let final: UInt8 = offset + length == raw.count ? 1 : 0
            zlib += [
                final, UInt8(length & 0xFF), UInt8(length >> 8), UInt8(~length & 0xFF), UInt8((~length >> 8) & 0xFF),
            ]
            zlib += raw[offset..<(offset + length)]
            offset += length
        } while offset < raw.count
        zlib += bigEndian(adler32(raw))
        var png: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
        png += chunk("IHDR", bigEndian(UInt32(width)) + bigEndian(UInt32(height)) + [8, colourType, 0, 0, 0])
        png += chunk("IDAT", zlib)
        png += chunk("IEND", [])
        return png
    }

    /// A width × height image of one colour with a lighter square at (x, y).
    static func solid(width: Int, height: Int, colour: (UInt8, UInt8, UInt8), mark: (Int, Int)? = nil) -> RGBImage {
        var pixels: [UInt8] = []
        for y in 0..<height {
            for x in 0..<width {
                if let mark, abs(x - mark.0) < 2, abs(y - mark.1) < 2 {
                    pixels += [255, 255, 255]
                } else {
                    pixels += [colour.0, colour.1, colour.2]
                }
            }
        }
        return RGBImage(width: width, height: height, pixels: pixels)
    }

    private static func chunk(_ type: String, _ data: [UInt8]) -> [UInt8] {
        let body = Array(type.utf8) + data
        return bigEndian(UInt32(data.count)) + body + bigEndian(crc32(body))
    }

    private static func bigEndian(_ v: UInt32) -> [UInt8] {
        [UInt8(v >> 24), UInt8((v >> 16) & 0xFF), UInt8((v >> 8) & 0xFF), UInt8(v & 0xFF)]
    }

    private static func crc32(_ data: [UInt8]) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in data {
            crc ^= UInt32(byte)
            for _ in 0..<8 { crc = crc & 1 == 1 ? (crc >> 1) ^ 0xEDB8_8320 : crc >> 1 }
        }
        return ~crc
    }

    private static func adler32(_ data: [UInt8]) -> UInt32 {
        var a: UInt32 = 1, b: UInt32 = 0
        for byte in data {
            a = (a + UInt32(byte)) % 65521
            b = (b + a) % 65521
        }
        return b << 16 | a
    }
}
