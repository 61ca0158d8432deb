import Foundation
import OpenCVDNN
import Testing
import TextRecognition

@testable import PPOCR

/// A line turned from level is read levelled: its region in the detector's map gives its turned box
/// (`DBPostprocessor.turnedBoxes`), `Levelling` crops it level for the recogniser and turns its words' boxes back.
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

    static func turned(_ map: [Float]) -> [TurnedBox?] {
        DBPostprocessor().turnedBoxes(
            map: map, width: 200, height: 160, validWidth: 200, validHeight: 160, scale: 1, imageWidth: 200,
            imageHeight: 160
        ).map(\.turned)
    }

    /// Each line's own turn, length and thickness (grown as its box is); none for a level line, a blob no longer
    /// than it is wide, or a line turned steeper than 25°.
    @Test func eachTurnedLineGetsItsTurnedBox() throws {
        let lines = Self.turned(Self.map(degrees: [8, -5, 0]))
        #expect(lines.count == 3)
        let first = try #require(lines[0]), second = try #require(lines[1])
        #expect(abs(first.degrees - 8) < 1 && abs(second.degrees + 5) < 1, "\(lines)")
        // 120 × 8 (9 × 121 once dilated), grown by 121 × 9 × 1.6 / (2 × 130) ≈ 6.7 on every side.
        #expect(abs(first.length - 134) < 6 && abs(first.thickness - 22) < 4, "\(first)")
        #expect(abs(first.centreX - 100.5) < 2 && abs(first.centreY - 30.5) < 2, "\(first)")
        #expect(lines[2] == nil)
        #expect(Self.turned(Self.map(degrees: [10], length: 12, thickness: 10)) == [nil])
        #expect(Self.turned(Self.map(degrees: [40])) == [nil])
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
        // The whole picture's turned box: a canvas that holds all of it, turned about its centre.
        let canvas = (
            length: (Double(width) * c + Double(height) * s).rounded(.up),
            thickness: (Double(width) * s + Double(height) * c).rounded(.up)
        )
        let levelling = Levelling(
            TurnedBox(centreX: 80, centreY: 50, length: canvas.length, thickness: canvas.thickness, degrees: degrees),
            width: width, height: height)
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

        // The bar's own turned box, cropped level: the bar runs across the crop's middle rows, all of it.
        let crop = Levelling(
            TurnedBox(centreX: 80, centreY: 50, length: 110, thickness: 20, degrees: degrees), width: width,
            height: height
        ).level(RGBPixels(width: width, height: height, bytes: bytes))
        #expect(crop.width == 110 && crop.height == 20)
        let inked = { (x: Int, y: Int) in crop.bytes[(y * crop.width + x) * 3] < 128 }
        #expect((5..<105).allSatisfy { inked($0, 10) }, "the bar is not level across the crop")
        #expect((0..<crop.width).allSatisfy { !inked($0, 2) && !inked($0, 17) }, "the bar is not level in the crop")
    }

    /// Turned displays of Tests/SevenSegmentHeldOut that PP-OCR misread in their axis-aligned boxes (`-3857.4` for
    /// 3857.4, `-56510` for 5651.0): read levelled, right; the boxes lie in the photo.
    @Test func turnedDisplaysAreReadLevelled() throws {
        try #require(DisplayReadingTests.installed, DisplayReadingTests.missing)
        let engine = try PPOCREngine(models: try DisplayReadingTests.models.get())
        for (name, values) in [("turned-2.jpg", ["3857.4", "15.16"]), ("turned-glare-2.jpg", ["5651.0"])] {
            let data = try Data(
                contentsOf: DisplayReadingTests.root.appendingPathComponent("Tests/SevenSegmentHeldOut/\(name)"))
            let image = try ImageDecoder().decode(data).pages[0]
            let pixels = RGBPixels(width: image.width, height: image.height, bytes: try image.rgbBytes())
            #expect(try engine.detectTurned(pixels).contains { abs($0.turned?.degrees ?? 0) > 4 }, "\(name)")
            let words = try engine.read(pixels).flatMap(\.words)
            for value in values { #expect(words.map(\.text).contains(value), "\(name): \(words.map(\.text))") }
            for word in words {
                #expect(word.box.x >= 0 && word.box.x + word.box.width <= pixels.width, "\(word)")
                #expect(word.box.y >= 0 && word.box.y + word.box.height <= pixels.height, "\(word)")
            }
        }
    }
}
