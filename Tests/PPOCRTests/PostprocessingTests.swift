import Testing

@testable import PPOCR

/// DB post-processing and CTC decoding on hand-made network outputs.
struct DBPostprocessorTests {
    /// A map of `width` × `height` with each rectangle (x, y, width, height) at `value`, the rest at 0.05.
    static func map(_ width: Int, _ height: Int, _ rectangles: [(Int, Int, Int, Int)], value: Float = 0.9) -> [Float] {
        var map = [Float](repeating: 0.05, count: width * height)
        for (x, y, w, h) in rectangles {
            for row in y..<(y + h) { for column in x..<(x + w) { map[row * width + column] = value } }
        }
        return map
    }

    @Test func aRegionBecomesItsBoxGrownByTheUnclipDistanceAndScaled() {
        // 40 × 10 pixels: dilated to 41 × 11, grown by 41·11·1.6 / (2·52) = 6.94 on each side; scale 2.
        let boxes = DBPostprocessor().boxes(
            map: Self.map(100, 50, [(20, 10, 40, 10)]), width: 100, height: 50, validWidth: 100, validHeight: 50,
            scale: 2, imageWidth: 200, imageHeight: 100)
        #expect(boxes.count == 1)
        let box = boxes[0]
        #expect(abs(box.x - Int(((20 - 6.94) * 2).rounded())) <= 1)
        #expect(abs(box.y - Int(((10 - 6.94) * 2).rounded())) <= 1)
        #expect(abs(box.width - Int(((41 + 2 * 6.94) * 2).rounded())) <= 1)
        #expect(abs(box.height - Int(((11 + 2 * 6.94) * 2).rounded())) <= 1)
        #expect(box.score > 0.8)
    }

    @Test func weakThinAndPaddedRegionsAreDropped() {
        let postprocessor = DBPostprocessor()
        // Over the 0.3 threshold but under the 0.5 box threshold on average.
        let weak = Self.map(100, 50, [(10, 10, 30, 10)], value: 0.4)
        #expect(
            postprocessor.boxes(
                map: weak, width: 100, height: 50, validWidth: 100, validHeight: 50, scale: 1,
                imageWidth: 100, imageHeight: 50
            ).isEmpty)
        // One pixel high: under the minimum side of 3 even dilated.
        let thin = Self.map(100, 50, [(10, 10, 30, 1)])
        #expect(
            postprocessor.boxes(
                map: thin, width: 100, height: 50, validWidth: 100, validHeight: 50, scale: 1,
                imageWidth: 100, imageHeight: 50
            ).isEmpty)
        // Text in the canvas's padding (right of the picture's 60 columns) is not the picture's.
        let padded = Self.map(100, 50, [(70, 10, 20, 10)])
        #expect(
            postprocessor.boxes(
                map: padded, width: 100, height: 50, validWidth: 60, validHeight: 50, scale: 1,
                imageWidth: 60, imageHeight: 50
            ).isEmpty)
    }

    @Test func boxesComeInReadingOrderAndClippedToTheImage() {
        // Two lines; the lower one has its right word first in the map's scan order (a taller region).
        let map = Self.map(200, 100, [(120, 58, 40, 12), (10, 60, 60, 10), (10, 5, 150, 10), (185, 80, 15, 15)])
        let boxes = DBPostprocessor().boxes(
            map: map, width: 200, height: 100, validWidth: 200, validHeight: 100, scale: 1, imageWidth: 200,
            imageHeight: 100)
        #expect(boxes.count == 4)
        #expect(boxes[0].y < 5 && boxes[0].width > 150)
        #expect(boxes[1].x < 10 && boxes[2].x > 100, "the lower line's left word first, though its top is lower")
        #expect(boxes.allSatisfy { $0.x >= 0 && $0.y >= 0 && $0.x + $0.width <= 200 && $0.y + $0.height <= 100 })
        #expect(boxes[3].x + boxes[3].width == 200)
    }
}

struct CTCDecoderTests {
    static let characters = ["1", "4", ".", "V", "ě", "Š"]

    /// Probabilities for `classes` per step: the given class at `p`, the rest sharing what is left.
    static func output(_ path: [Int], p: Float = 0.9) -> [Float] {
        let classes = characters.count + 2
        var values = [Float](repeating: (1 - p) / Float(classes - 1), count: path.count * classes)
        for (step, best) in path.enumerated() { values[step * classes + best] = p }
        return values
    }

    @Test func repeatsCollapseBlanksSeparateAndTheLastClassIsASpace() {
        let decoder = CTCDecoder(characters: Self.characters)
        // blank, 1 1 (one 1), blank, 1, 4 4 (one 4), ., blank, space, blank, V, ě, Š, blank
        let path = [0, 1, 1, 0, 1, 2, 2, 3, 0, 7, 0, 4, 5, 6, 0]
        let decoded = decoder.decode(Self.output(path), steps: path.count)
        #expect(decoded.map(\.character).joined() == "114. VěŠ")
        #expect(decoded.map(\.step) == [1, 4, 5, 7, 9, 11, 12, 13])
        #expect(decoded.allSatisfy { abs($0.probability - 0.9) < 1e-6 })
    }

    @Test func onlyBlanksReadNothing() {
        let decoder = CTCDecoder(characters: Self.characters)
        #expect(decoder.decode(Self.output([0, 0, 0, 0]), steps: 4).isEmpty)
    }
}
