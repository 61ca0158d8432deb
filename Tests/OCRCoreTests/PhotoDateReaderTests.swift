import Foundation
import Testing

@testable import OCRCore

/// EXIF blocks and the JPEG and PNG files around them, made by hand byte by byte.
enum CraftedEXIF {
    /// A TIFF block: IFD0 with only the Exif IFD pointer, the Exif IFD with `tags` (ASCII values), their texts after it.
    static func tiff(_ tags: [(UInt16, String)], bigEndian: Bool = false) -> [UInt8] {
        func u16(_ value: Int) -> [UInt8] {
            bigEndian
                ? [UInt8(value >> 8 & 0xFF), UInt8(value & 0xFF)] : [UInt8(value & 0xFF), UInt8(value >> 8 & 0xFF)]
        }
        func u32(_ value: Int) -> [UInt8] {
            let bytes = [
                UInt8(value & 0xFF), UInt8(value >> 8 & 0xFF), UInt8(value >> 16 & 0xFF), UInt8(value >> 24 & 0xFF),
            ]
            return bigEndian ? bytes.reversed() : bytes
        }
        var out: [UInt8] = (bigEndian ? Array("MM".utf8) : Array("II".utf8)) + u16(42) + u32(8)
        // IFD0 at 8: one entry (the Exif IFD pointer), next-IFD offset 0.
        let exifOffset = 8 + 2 + 12 + 4
        out += u16(1) + u16(0x8769) + u16(4) + u32(1) + u32(exifOffset) + u32(0)
        var data: [UInt8] = []
        let dataStart = exifOffset + 2 + tags.count * 12 + 4
        out += u16(tags.count)
        for (tag, text) in tags {
            let bytes = Array(text.utf8) + [0]
            out += u16(Int(tag)) + u16(2) + u32(bytes.count)
            if bytes.count <= 4 {
                out += bytes + [UInt8](repeating: 0, count: 4 - bytes.count)
            } else {
                out += u32(dataStart + data.count)
                data += bytes
            }
        }
        return out + u32(0) + data
    }

    /// SOI, a JFIF APP0, the APP1 Exif segment, a quantisation table, SOS and EOI: enough to look like a JPEG.
    static func jpeg(_ tiff: [UInt8]) -> Data {
        let app0: [UInt8] = [0xFF, 0xE0, 0x00, 0x10] + Array("JFIF".utf8) + [0, 1, 1, 0, 0, 1, 0, 1, 0, 0]
        let exif = Array("Exif".utf8) + [0, 0] + tiff
        let app1: [UInt8] = [0xFF, 0xE1, UInt8((exif.count + 2) >> 8), UInt8((exif.count + 2) & 0xFF)] + exif
        return Data([0xFF, 0xD8] + app0 + app1 + [0xFF, 0xDB, 0x00, 0x03, 0x00, 0xFF, 0xDA, 0x00, 0x02, 0xFF, 0xD9])
    }

    static func png(_ tiff: [UInt8]) -> Data {
        func chunk(_ type: String, _ body: [UInt8]) -> [UInt8] {
            let length = body.count
            return [
                UInt8(length >> 24 & 0xFF), UInt8(length >> 16 & 0xFF), UInt8(length >> 8 & 0xFF), UInt8(length & 0xFF),
            ]
                + Array(type.utf8) + body + [0, 0, 0, 0]  // the CRC is not checked
        }
        let header: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
        return Data(
            header + chunk("IHDR", [0, 0, 0, 1, 0, 0, 0, 1, 8, 0, 0, 0, 0]) + chunk("eXIf", tiff) + chunk("IEND", []))
    }
}

@Suite struct PhotoDateReaderTests {
    @Test func readsDateTimeOriginalWithItsOffsetAndSubseconds() throws {
        let tiff = CraftedEXIF.tiff([(0x9003, "2026:11:22 14:05:09"), (0x9011, "+01:00"), (0x9291, "25")])
        let date = try #require(PhotoDateReader.read(CraftedEXIF.jpeg(tiff)))
        #expect(date.iso8601 == "2026-11-22T14:05:09.250+01:00")
        #expect(date.date(in: TimeZone(identifier: "UTC")!) == Date(timeIntervalSince1970: 1_795_352_709.25))
        // Big-endian (Motorola) order reads the same.
        let motorola = CraftedEXIF.tiff([(0x9003, "2026:11:22 14:05:09"), (0x9011, "-05:30")], bigEndian: true)
        #expect(PhotoDateReader.read(CraftedEXIF.jpeg(motorola))?.iso8601 == "2026-11-22T14:05:09-05:30")
    }

    @Test func withoutAnOffsetTheZoneIsLeftToTheCaller() throws {
        let date = try #require(
            PhotoDateReader.read(CraftedEXIF.jpeg(CraftedEXIF.tiff([(0x9003, "2026:07:01 08:00:00")]))))
        #expect(date.iso8601 == "2026-07-01T08:00:00" && date.offsetSeconds == nil)
        #expect(date.date(in: TimeZone(identifier: "Europe/Prague")!) == Date(timeIntervalSince1970: 1_782_885_600))
    }

    @Test func readsThePNGeXIfChunk() {
        let png = CraftedEXIF.png(CraftedEXIF.tiff([(0x9003, "2025:01:31 23:59:59")]))
        #expect(PhotoDateReader.read(png)?.iso8601 == "2025-01-31T23:59:59")
    }

    @Test func readsFromASliceOfALargerBuffer() {
        // Uploads arrive as slices whose indices do not start at 0.
        let jpeg = CraftedEXIF.jpeg(CraftedEXIF.tiff([(0x9003, "2026:11:22 14:05:09")]))
        let padded = Data([1, 2, 3]) + jpeg
        #expect(PhotoDateReader.read(padded[3...])?.iso8601 == "2026-11-22T14:05:09")
    }

    @Test func malformedOrTruncatedMetadataIsNoDate() {
        let good = CraftedEXIF.jpeg(CraftedEXIF.tiff([(0x9003, "2026:11:22 14:05:09"), (0x9011, "+01:00")]))
        #expect(PhotoDateReader.read(good) != nil)
        // Cut anywhere: never a crash, never a date made of garbage.
        for length in 0..<good.count - 11 {
            #expect(PhotoDateReader.read(good.prefix(length)) == nil, "cut at \(length)")
        }
        for text in [
            "0000:00:00 00:00:00", "2026:02:30 10:00:00", "2026-11-22 14:05:09", "2026:11:22 24:00:00", "garbage", "",
        ] {
            #expect(PhotoDateReader.read(CraftedEXIF.jpeg(CraftedEXIF.tiff([(0x9003, text)]))) == nil, "\(text)")
        }
        // A malformed offset is dropped, the date kept.
        let odd = PhotoDateReader.read(
            CraftedEXIF.jpeg(CraftedEXIF.tiff([(0x9003, "2026:11:22 14:05:09"), (0x9011, "  :  ")])))
        #expect(odd?.iso8601 == "2026-11-22T14:05:09")
        // A segment length past the end, a wrong TIFF magic, an IFD offset past the block, a huge entry count.
        var bytes = [UInt8](good)
        bytes[22] = 0xFF
        bytes[23] = 0xFF
        #expect(PhotoDateReader.read(Data(bytes)) == nil)
        var tiff = CraftedEXIF.tiff([(0x9003, "2026:11:22 14:05:09")])
        tiff[2] = 43
        #expect(PhotoDateReader.read(CraftedEXIF.jpeg(tiff)) == nil)
        tiff = CraftedEXIF.tiff([(0x9003, "2026:11:22 14:05:09")])
        tiff[4] = 0xF0
        #expect(PhotoDateReader.read(CraftedEXIF.jpeg(tiff)) == nil)
        tiff = CraftedEXIF.tiff([(0x9003, "2026:11:22 14:05:09")])
        tiff[8] = 0xFF
        tiff[9] = 0xFF
        #expect(PhotoDateReader.read(CraftedEXIF.jpeg(tiff)) == nil)
        // Not a JPEG or PNG, or one without EXIF.
        #expect(PhotoDateReader.read(Data("GIF89a".utf8)) == nil)
        #expect(PhotoDateReader.read(Data([0xFF, 0xD8, 0xFF, 0xDA, 0, 2, 0xFF, 0xD9])) == nil)
    }
}
