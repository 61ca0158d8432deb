import Foundation
import OpenCVDNN

/// A turned line of a picture made level, and the way back for the boxes found on it.
/// PP-OCR's recogniser reads a line's axis-aligned box squeezed to 48 rows: a line turned a few degrees (a phone
/// held off level, a display in perspective) fills its box with a slope and the lines above and below, and is read
/// worse than the same line level, so each turned line is cropped level first, as PaddleOCR crops its turned boxes.
struct Levelling {
    let sourceWidth: Int, sourceHeight: Int
    /// The levelled picture's size.
    let width: Int, height: Int
    /// The point of the source the levelled picture's centre is.
    private let centreX: Double, centreY: Double
    private let cosine: Double, sine: Double

    /// The line `turned` of a picture of `width` × `height`, level: its length by its thickness.
    init(_ turned: TurnedBox, width: Int, height: Int) {
        sourceWidth = width
        sourceHeight = height
        self.width = max(1, Int(turned.length.rounded()))
        self.height = max(1, Int(turned.thickness.rounded()))
        (centreX, centreY) = (turned.centreX, turned.centreY)
        let radians = turned.degrees * .pi / 180
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
        for index in line.words.indices { line.words[index].box = sourceBox(line.words[index].box).kept(in: box) }
        return line
    }
}

extension TextBox {
    /// The part of the box inside `frame`, at least one pixel of it (a box wholly outside keeps the pixel of `frame`
    /// nearest to it).
    func kept(in frame: TextBox) -> TextBox {
        let left = min(max(x, frame.x), frame.x + frame.width - 1)
        let top = min(max(y, frame.y), frame.y + frame.height - 1)
        let right = max(min(x + width, frame.x + frame.width), left + 1)
        let bottom = max(min(y + height, frame.y + frame.height), top + 1)
        return TextBox(x: left, y: top, width: right - left, height: bottom - top, score: score)
    }
}
