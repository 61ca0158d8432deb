import Foundation
import Testing

@testable import ClassificationCore

/// Photos as phones and the web hand them over: HEIC (the iPhone's default) and WebP decode like PNG and JPEG; a file
/// cut short or damaged is refused naming it, never decoded with grey where its data is missing.
@Suite struct PhoneImageTests {
    /// A 64 × 48 picture: left half red, right half blue.
    static let halves = RGBImage(
        width: 64, height: 48,
        pixels: (0..<48).flatMap { _ in
            (0..<64).flatMap { x in x < 32 ? [220, 20, 20] : [20, 20, 220] as [UInt8] }
        })

    /// A noisy 300 × 200 picture as a JPEG of tens of kilobytes.
    static func noisyJPEG() throws -> [UInt8] {
        var generator = SeededRandom(seed: 7)
        let pixels = (0..<300 * 200 * 3).map { _ in UInt8(truncatingIfNeeded: generator.next()) }
        return try RGBImage(width: 300, height: 200, pixels: pixels).jpeg(quality: 92)
    }

    static func colour(_ image: RGBImage, x: Int, y: Int) -> [Int] {
        let i = (y * image.width + x) * 3
        return [Int(image.pixels[i]), Int(image.pixels[i + 1]), Int(image.pixels[i + 2])]
    }

    @Test(arguments: ["heic", "webp"])
    func heicAndWebPDecodeLikeTheOthers(format: String) throws {
        let bytes = format == "heic" ? try Self.halves.heic(quality: 80) : try Self.halves.webp(quality: 90)
        let decoded = try RGBImage.decode(bytes, name: "photo.\(format)")
        #expect(decoded.width == 64 && decoded.height == 48)
        let left = Self.colour(decoded, x: 8, y: 24), right = Self.colour(decoded, x: 56, y: 24)
        #expect(left[0] > 150 && left[2] < 90, "left is red: \(left)")
        #expect(right[2] > 150 && right[0] < 90, "right is blue: \(right)")
        #expect(try RGBImage.size(of: bytes) == (64, 48))
    }

    /// The JPEG cut to a small part of its length was decoded "fine" (grey below the cut) and classified.
    @Test func aTruncatedJPEGIsRefusedNamingTheFile() throws {
        let jpeg = try Self.noisyJPEG()
        #expect(jpeg.count > 40_000)
        #expect(try RGBImage.decode(jpeg).width == 300)
        for kept in [2048, jpeg.count / 2, jpeg.count - 10] {
            #expect {
                try RGBImage.decode(Array(jpeg.prefix(kept)), name: "cats/cut.jpg")
            } throws: { error in
                let message = (error as? ClassificationError)?.message ?? ""
                return message.hasPrefix("cats/cut.jpg:") && message.contains("truncated")
            }
        }
        // Reduced decoding (1/8 of the size) reads all the data too.
        #expect(throws: ClassificationError.self) {
            try RGBImage.decode(Array(jpeg.prefix(jpeg.count / 2)), name: "cut.jpg", atLeast: (8, 8))
        }
    }

    @Test(arguments: ["png", "heic", "webp"])
    func otherFormatsCutShortAreRefused(format: String) throws {
        let bytes: [UInt8] =
            switch format {
            case "png": TestPNG.encode(Self.halves)
            case "heic": try Self.halves.heic()
            default: try Self.halves.webp()
            }
        #expect(throws: ClassificationError.self) {
            try RGBImage.decode(Array(bytes.prefix(bytes.count * 2 / 3)), name: "cut.\(format)")
        }
    }

    @Test func aDatasetTakesHEICAndWebPFiles() throws {
        let red = RGBImage(width: 16, height: 16, pixels: (0..<256).flatMap { _ in [200, 0, 0] as [UInt8] })
        let blue = RGBImage(width: 16, height: 16, pixels: (0..<256).flatMap { _ in [0, 0, 200] as [UInt8] })
        let dataset = try DatasetBuilder.classification(files: [
            ("red/a.heic", try red.heic()), ("red/b.webp", try red.webp()),
            ("blue/a.HEIC", try blue.heic(quality: 50)), ("blue/b.jpg", try blue.jpeg()),
        ])
        #expect(dataset.samples.count == 4)
        #expect(dataset.countsPerLabel == ["red": 2, "blue": 2])
    }
}
