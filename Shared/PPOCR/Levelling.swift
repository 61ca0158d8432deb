import Foundation
import OpenCVDNN

/// A picture turned level about its centre onto a canvas that holds all of it, and the way back for the boxes found
/// on it. PP-OCR's recogniser reads a line's axis-aligned box squeezed to 48 rows, and the segment reader cuts a line
/// into columns: a line turned a few degrees (a phone held off level) fills its box with a slope and the lines above
/// and below, and both read it worse than the same line level (PaddleOCR crops each turned box upright for the
/// same reason).
struct Levelling {
    /// The turn of the picture's lines, in degrees (positive: falling to the right).
    let degrees: Double
    let sourceWidth: Int, sourceHeight: Int
    /// The levelled canvas.
    let width: Int, height: Int
    private let cosine: Double, sine: Double

    init(degrees: Double, width: Int, height: Int) {
        self.degrees = degrees
        sourceWidth = width
        sourceHeight = height
        let radians = degrees * .pi / 180
        cosine = cos(radians)
        sine = sin(radians)
        self.width = max(1, Int((Double(width) * abs(cosine) + Double(height) * abs(sine)).rounded(.up)))
        self.height = max(1, Int((Double(width) * abs(sine) + Double(height) * abs(cosine)).rounded(.up)))
    }

    /// Where a point of the levelled canvas lies in the source picture: the canvas's x axis runs along the lines.
    func source(_ x: Double, _ y: Double) -> (x: Double, y: Double) {
        let dx = x - Double(width) / 2, dy = y - Double(height) / 2
        return (
            Double(sourceWidth) / 2 + dx * cosine - dy * sine, Double(sourceHeight) / 2 + dx * sine + dy * cosine
        )
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

    /// A line read on the levelled canvas, its and its words' boxes in the source picture.
    func sourceLine(_ line: PPOCRLine) -> PPOCRLine {
        var line = line
        line.box = sourceBox(line.box)
        for index in line.words.indices { line.words[index].box = sourceBox(line.words[index].box) }
        return line
    }
}
