import Testing

@testable import ClassificationCore

/// JPEGs decoded at 1/2, 1/4 or 1/8 of their size (libjpeg's DCT scaling) while the result still covers the size
/// asked for: what Classify does with a photo far larger than its model's input.
@Suite struct ReducedDecodeTests {
    /// A width × height JPEG of a smooth two-way gradient.
    static func gradient(width: Int, height: Int) throws -> [UInt8] {
        var pixels: [UInt8] = []
        for y in 0..<height {
            for x in 0..<width { pixels += [UInt8(x * 255 / width), UInt8(y * 255 / height), 128] }
        }
        return try RGBImage(width: width, height: height, pixels: pixels).jpeg(quality: 90)
    }

    static func mean(_ image: RGBImage) -> [Double] {
        (0..<3).map { c in
            Double(stride(from: c, to: image.pixels.count, by: 3).reduce(0) { $0 + Int(image.pixels[$1]) })
                / Double(image.width * image.height)
        }
    }

    @Test func aJPEGDecodesReducedWhileTheResultCoversTheSizeAsked() throws {
        let photo = try Self.gradient(width: 641, height: 481)
        let whole = try RGBImage.decode(photo)
        #expect(whole.width == 641 && whole.height == 481)
        func size(_ minimum: (Int, Int)) throws -> [Int] {
            let image = try RGBImage.decode(photo, atLeast: minimum)
            return [image.width, image.height]
        }
        #expect(try size((32, 32)) == [81, 61])  // sides rounded up, as libjpeg scales
        #expect(try size((100, 100)) == [161, 121])
        #expect(try size((300, 200)) == [321, 241])
        #expect(try size((700, 10)) == [641, 481])
        // The same picture, smaller: the colours agree on average.
        let reduced = try RGBImage.decode(photo, atLeast: (32, 32))
        for (a, b) in zip(Self.mean(whole), Self.mean(reduced)) {
            #expect(abs(a - b) < 2, "\(Self.mean(whole)) against \(Self.mean(reduced))")
        }
    }

    /// A photo stored sideways (EXIF orientation 6) is reduced by its upright size: its stored width is its height.
    @Test func aTurnedPhotoIsReducedByItsUprightSize() throws {
        let stored = try Self.gradient(width: 640, height: 480)
        // An APP1 segment holding a big-endian TIFF with the one orientation tag, after the start-of-image marker.
        let tiff: [UInt8] = [
            0x4D, 0x4D, 0, 0x2A, 0, 0, 0, 8, 0, 1, 0x01, 0x12, 0, 3, 0, 0, 0, 1, 0, 6, 0, 0, 0, 0, 0, 0,
        ]
        let segment = Array("Exif\0\0".utf8) + tiff
        let turned =
            Array(stored.prefix(2)) + [0xFF, 0xE1, UInt8((segment.count + 2) >> 8), UInt8((segment.count + 2) & 0xFF)]
            + segment
            + stored.dropFirst(2)
        let upright = try RGBImage.decode(turned)
        #expect(upright.width == 480 && upright.height == 640)
        let reduced = try RGBImage.decode(turned, atLeast: (100, 150))
        #expect(reduced.width == 120 && reduced.height == 160, "\(reduced.width)×\(reduced.height)")
    }

    @Test func aPNGIsDecodedWhole() throws {
        let png = TestPNG.encode(TestPNG.solid(width: 64, height: 48, colour: (10, 20, 30)))
        let image = try RGBImage.decode(png, atLeast: (8, 8))
        #expect(image.width == 64 && image.height == 48)
    }

    /// The pixel limit is the photo's full size, whatever is decoded of it.
    @Test func theLimitIsOnTheFullSize() throws {
        let photo = try Self.gradient(width: 160, height: 120)
        #expect(throws: ClassificationError.invalid("image: 160×120 exceeds the limit of 10000 pixels")) {
            try RGBImage.decode(photo, pixelLimit: 10_000, atLeast: (8, 8))
        }
    }
}

/// Classify decodes no more of a photo than its resize keeps, twice over (issue 41): a 12 MP 4:3 photo fitted into
/// 224×224 keeps 224×168, so 448×336 is enough — libjpeg's 1/8 — where twice the input on both sides (448×448) took
/// 1/4 and four times the pixels.
@Suite struct DecodeSizeTests {
    @Test func theDecodedSizeCoversTwiceWhatTheScalingKeeps() throws {
        let photo = (width: 4000, height: 3000), input = (width: 224, height: 224)
        #expect(Preprocessing.decodeSize(of: photo, input: input, scaling: .fit) == (448, 336))
        #expect(Preprocessing.decodeSize(of: photo, input: input, scaling: .centerCrop) == (598, 448))
        #expect(Preprocessing.decodeSize(of: photo, input: input, scaling: .fill) == (448, 448))
        #expect(Preprocessing.decodeSize(of: (3000, 4000), input: input, scaling: .fit) == (336, 448))
        // What libjpeg then decodes of a 4000×3000 JPEG: 1/8 for fit, 1/4 for the others.
        let jpeg = try ReducedDecodeTests.gradient(width: 4000, height: 3000)
        let fitted = try RGBImage.decode(
            jpeg, atLeast: Preprocessing.decodeSize(of: photo, input: input, scaling: .fit))
        #expect([fitted.width, fitted.height] == [500, 375])
        let filled = try RGBImage.decode(
            jpeg, atLeast: Preprocessing.decodeSize(of: photo, input: input, scaling: .fill))
        #expect([filled.width, filled.height] == [1000, 750])
    }
}

/// Detect decodes a JPEG reduced too (issue 41: it decoded 12 MP whole for a 160-pixel input) and answers in the
/// photo's own pixels.
@Suite struct PhotoDetectionTests {
    /// Finds one box over the middle half of whatever image it is given, and remembers that image's size.
    final class MiddleHalf: ObjectDetector, @unchecked Sendable {
        let header = ModelHeader(
            kind: .detector, algorithm: "yolo", labels: ["thing"], inputWidth: 160, inputHeight: 160)
        var seen: (Int, Int) = (0, 0)
        func detect(
            _ image: RGBImage, confidenceThreshold: Double, iouThreshold: Double, maximum: Int, labels only: Set<String>
        ) throws -> [Detection] {
            seen = (image.width, image.height)
            let w = Double(image.width), h = Double(image.height)
            return [Detection(label: 0, confidence: 0.9, box: Box(x: w / 4, y: h / 4, width: w / 2, height: h / 2))]
        }
    }

    @Test func aLargeJPEGIsDecodedReducedAndItsBoxesMappedBack() throws {
        let detector = MiddleHalf()
        let photo = PhotoDetection.self
        let jpeg = try ReducedDecodeTests.gradient(width: 4000, height: 3000)
        let prepared = try photo.init(jpeg, for: detector)
        // 1/8: fit keeps 160×120, twice is 320×240
        #expect([prepared.image.width, prepared.image.height] == [500, 375])
        #expect(prepared.width == 4000 && prepared.height == 3000)
        let found = prepared.mapped(try detector.detect(prepared.image))
        #expect(detector.seen == (500, 375))
        #expect(found.map(\.box) == [Box(x: 1000, y: 750, width: 2000, height: 1500)])
        // A small photo is decoded whole, boxes unchanged.
        let small = try photo.init(try ReducedDecodeTests.gradient(width: 300, height: 200), for: detector)
        #expect([small.image.width, small.image.height, small.width, small.height] == [300, 200, 300, 200])
    }
}
