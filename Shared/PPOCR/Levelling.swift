import Foundation
import OpenCVDNN

/// A turned line of a picture (or the whole picture) made level, and the way back for the boxes found on it.
/// PP-OCR's recogniser reads a line's axis-aligned box squeezed to 48 rows: a line turned a few degrees (a phone
/// held off level, a display in perspective) fills its box with a slope and the lines above and below, and is read
/// worse than the same line level, so each turned line is cropped level first, as PaddleOCR crops its turned boxes.
struct Levelling {
    /// The turn made level, in degrees (positive: falling to the right).
    let degrees: Double
    let sourceWidth: Int, sourceHeight: Int
    /// The levelled picture's size.
    let width: Int, height: Int
    /// The point of the source the levelled picture's centre is.
    private let centreX: Double, centreY: Double
    private let cosine: Double, sine: Double

    /// The whole picture turned level by `degrees` onto a canvas that holds all of it.
    init(degrees: Double, width: Int, height: Int) {
        let radians = degrees * .pi / 180
        self.init(
            degrees: degrees, centre: (Double(width) / 2, Double(height) / 2),
            size: (
                Int((Double(width) * abs(cos(radians)) + Double(height) * abs(sin(radians))).rounded(.up)),
                Int((Double(width) * abs(sin(radians)) + Double(height) * abs(cos(radians))).rounded(.up))
            ), source: (width, height))
    }

    /// The line `turned` of a picture of `width` × `height`, level: its length by its thickness.
    init(_ turned: TurnedBox, width: Int, height: Int) {
        self.init(
            degrees: turned.degrees, centre: (turned.centreX, turned.centreY),
            size: (Int(turned.length.rounded()), Int(turned.thickness.rounded())), source: (width, height))
    }

    private init(
        degrees: Double, centre: (x: Double, y: Double), size: (width: Int, height: Int),
        source: (width: Int, height: Int)
    ) {
        self.degrees = degrees
        sourceWidth = source.width
        sourceHeight = source.height
        width = max(1, size.width)
        height = max(1, size.height)
        (centreX, centreY) = centre
        let radians = degrees * .pi / 180
        cosine = cos(radians)
        sine = sin(radians)
    }

    /// Where a point of the levelled canvas lies in the source picture: the canvas's x axis runs along the lines.
    func source(_ x: Double, _ y: Double) -> (x: Double, y: Double) {
        let dx = x - Double(width) / 2, dy = y - Double(height) / 2
        return (centreX + dx * cosine - dy * sine, centreY + dx * sine + dy * cosine)
    }

    /// The picture levelled: each pixel sampled bilinearly, the source's edge pixels carried on past it (no border
    /// of another colour for the detector to take for an edge of text).
    func level(_ pixels: RGBPixels) -> RGBPixels {
        precondition(pixels.width == sourceWidth && pixels.height == sourceHeight, "levelling another picture")
        var out = [UInt8](repeating: 0, count: width * height * 3)
        let maxX = Double(sourceWidth - 1), maxY = Double(sourceHeight - 1), stride = sourceWidth * 3
        pixels.bytes.withUnsafeBufferPointer { input in
            out.withUnsafeMutableBufferPointer { output in
                for y in 0..<height {
                    // Along a row the source point moves by (cos, sin) per pixel.
                    var (sx, sy) = source(0.5, Double(y) + 0.5)
                    sx -= 0.5
                    sy -= 0.5
                    for x in 0..<width {
                        let fx = min(max(sx, 0), maxX), fy = min(max(sy, 0), maxY)
                        let x0 = Int(fx), y0 = Int(fy)
                        let x1 = min(x0 + 1, sourceWidth - 1), y1 = min(y0 + 1, sourceHeight - 1)
                        let ax = fx - Double(x0), ay = fy - Double(y0)
                        let a = y0 * stride + x0 * 3, b = y0 * stride + x1 * 3
                        let c = y1 * stride + x0 * 3, d = y1 * stride + x1 * 3
                        let o = (y * width + x) * 3
                        for channel in 0..<3 {
                            let top = Double(input[a + channel]) * (1 - ax) + Double(input[b + channel]) * ax
                            let bottom = Double(input[c + channel]) * (1 - ax) + Double(input[d + channel]) * ax
                            output[o + channel] = UInt8((top * (1 - ay) + bottom * ay).rounded())
                        }
                        sx += cosine
                        sy += sine
                    }
                }
            }
        }
        return RGBPixels(width: width, height: height, bytes: out)
    }

    /// A box of the levelled canvas in the source picture: the bounds of its four corners turned back, clipped.
    func sourceBox(_ box: TextBox) -> TextBox {
        let corners = [
            source(Double(box.x), Double(box.y)), source(Double(box.x + box.width), Double(box.y)),
            source(Double(box.x), Double(box.y + box.height)),
            source(Double(box.x + box.width), Double(box.y + box.height)),
        ]
        let left = max(0, Int(corners.map(\.x).min()!.rounded(.down)))
        let top = max(0, Int(corners.map(\.y).min()!.rounded(.down)))
        let right = min(sourceWidth, Int(corners.map(\.x).max()!.rounded(.up)))
        let bottom = min(sourceHeight, Int(corners.map(\.y).max()!.rounded(.up)))
        return TextBox(
            x: min(left, sourceWidth - 1), y: min(top, sourceHeight - 1), width: max(1, right - left),
            height: max(1, bottom - top), score: box.score)
    }

    /// A line read on the levelled picture in the source picture: its box `box` (the detector's), its words' boxes
    /// turned back and kept inside it (a word's turned corners can reach past the line's box).
    func sourceLine(_ line: PPOCRLine, box: TextBox) -> PPOCRLine {
        var line = line
        line.box = box
        for index in line.words.indices {
            let word = sourceBox(line.words[index].box)
            let left = min(max(word.x, box.x), box.x + box.width - 1)
            let top = min(max(word.y, box.y), box.y + box.height - 1)
            let right = max(min(word.x + word.width, box.x + box.width), left + 1)
            let bottom = max(min(word.y + word.height, box.y + box.height), top + 1)
            line.words[index].box = TextBox(
                x: left, y: top, width: right - left, height: bottom - top, score: word.score)
        }
        return line
    }
}
