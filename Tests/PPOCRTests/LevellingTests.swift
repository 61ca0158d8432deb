import Foundation
import OpenCVDNN
import Testing
import TextRecognition

@testable import PPOCR

/// A picture whose lines are turned is read levelled: the detector's regions give the turn (`DBPostprocessor.skew`),
/// `Levelling` turns the picture level for the recogniser and gives its boxes back in the picture's pixels.
@Suite struct LevellingTests {
    /// A map of `bars` lines of text probability 0.9, each `length` × `thickness`, turned by `degrees` each.
    static func map(degrees: [Double], width: Int = 200, height: Int = 160, length: Double = 120, thickness: Double = 8)
        -> [Float]
    {
        var map = [Float](repeating: 0, count: width * height)
        for (index, angle) in degrees.enumerated() {
            let (c, s) = (cos(angle * .pi / 180), sin(angle * .pi / 180))
            let cx = Double(width) / 2, cy = 30 + Double(index) * 45
            for y in 0..<height {
                for x in 0..<width {
                    let dx = Double(x) - cx, dy = Double(y) - cy
                    // Along the bar and across it.
                    if abs(dx * c + dy * s) <= length / 2, abs(-dx * s + dy * c) <= thickness / 2 {
                        map[y * width + x] = 0.9
                    }
                }
            }
        }
        return map
    }

    static func skew(_ map: [Float]) -> Double? {
        DBPostprocessor().boxesAndSkew(
            map: map, width: 200, height: 160, validWidth: 200, validHeight: 160, scale: 1, imageWidth: 200,
            imageHeight: 160
        ).skew
    }

    @Test func theTurnOfTheLinesIsMeasuredWhereTheyAgree() throws {
        let turned = try #require(Self.skew(Self.map(degrees: [8, 8, 7])))
        #expect(abs(turned - 7.7) < 1, "\(turned)")
        let other = try #require(Self.skew(Self.map(degrees: [-10, -10])))
        #expect(abs(other + 10) < 1, "\(other)")
        #expect(abs(try #require(Self.skew(Self.map(degrees: [0, 0, 0])))) < 0.5)
        // Lines that do not agree (a page's column beside a row), and blobs no longer than they are wide: no turn.
        #expect(Self.skew(Self.map(degrees: [20, -20])) == nil)
        #expect(Self.skew(Self.map(degrees: [10, 10], length: 12, thickness: 10)) == nil)
    }

    /// A dark bar turned 10° is level on the levelled canvas (one row band holds it), and a box round it there
    /// comes back round it in the picture.
    @Test func aLevelledPictureHoldsTheWholePictureAndBoxesComeBack() {
        let width = 160, height = 100, degrees = 10.0
        var bytes = [UInt8](repeating: 255, count: width * height * 3)
        let (c, s) = (cos(degrees * .pi / 180), sin(degrees * .pi / 180))
        for y in 0..<height {
            for x in 0..<width {
                let dx = Double(x) - 80, dy = Double(y) - 50
                if abs(dx * c + dy * s) <= 50, abs(-dx * s + dy * c) <= 4 {
                    for channel in 0..<3 { bytes[(y * width + x) * 3 + channel] = 0 }
                }
            }
        }
        let levelling = Levelling(degrees: degrees, width: width, height: height)
        #expect(levelling.width >= width && levelling.height >= height)
        let level = levelling.level(RGBPixels(width: width, height: height, bytes: bytes))
        // The rows with ink on the levelled canvas: about the bar's thickness, not its slope's 100 × sin 10° = 17.
        let inkedRows = (0..<level.height).filter { y in
            (0..<level.width).contains { x in level.bytes[(y * level.width + x) * 3] < 128 }
        }
        #expect((6...11).contains(inkedRows.count), "\(inkedRows.count) rows")
        let columns = (0..<level.width).filter { x in
            inkedRows.contains { y in level.bytes[(y * level.width + x) * 3] < 128 }
        }
        let box = TextBox(
            x: columns.first!, y: inkedRows.first!, width: columns.last! - columns.first! + 1,
            height: inkedRows.count, score: 1)
        let back = levelling.sourceBox(box)
        // The bar spans x 80 ± 50 cos 10° ± 4 sin 10°, y 50 ± 50 sin 10° ± 4 cos 10°.
        #expect(abs(back.x - 30) <= 3 && abs(back.x + back.width - 130) <= 3, "\(back)")
        #expect(abs(back.y - 37) <= 3 && abs(back.y + back.height - 63) <= 3, "\(back)")
        // The whole canvas comes back as the whole picture.
        let whole = levelling.sourceBox(TextBox(x: 0, y: 0, width: level.width, height: level.height, score: 1))
        #expect(whole == TextBox(x: 0, y: 0, width: width, height: height, score: 1))
    }

    /// Turned displays of Tests/SevenSegmentHeldOut that PP-OCR misread in their axis-aligned boxes (`-3857.4` for
    /// 3857.4, `152` for 162): read levelled, right; the boxes lie in the photo.
    @Test func turnedDisplaysAreReadLevelled() throws {
        try #require(DisplayReadingTests.installed, DisplayReadingTests.missing)
        let engine = try PPOCREngine(models: try DisplayReadingTests.models.get())
        for (name, values) in [("turned-2.jpg", ["3857.4", "15.16"]), ("turned-4.jpg", ["162"])] {
            let data = try Data(
                contentsOf: DisplayReadingTests.root.appendingPathComponent("Tests/SevenSegmentHeldOut/\(name)"))
            let image = try ImageDecoder().decode(data).pages[0]
            let pixels = RGBPixels(width: image.width, height: image.height, bytes: try image.rgbBytes())
            #expect(abs(try #require(try engine.detectWithSkew(pixels).skew, "\(name)")) > 4)
            let words = try engine.read(pixels).flatMap(\.words)
            for value in values { #expect(words.map(\.text).contains(value), "\(name): \(words.map(\.text))") }
            for word in words {
                #expect(word.box.x >= 0 && word.box.x + word.box.width <= pixels.width, "\(word)")
                #expect(word.box.y >= 0 && word.box.y + word.box.height <= pixels.height, "\(word)")
            }
        }
    }
}
