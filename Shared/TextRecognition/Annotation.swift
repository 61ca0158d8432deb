import CTesseract
import Foundation

/// A box to draw on an annotated copy of an image, with an optional caption above it.
public struct AnnotationMark: Sendable, Hashable {
    public var box: PixelRect
    public var color: RGB
    /// Line width in pixels.
    public var width: Int
    /// Drawn above the box (below it when there is no room), in Leptonica's built-in bitmap font: ASCII only, so
    /// letters with diacritics lose them (`Napětí` → `Napeti`).
    public var caption: String

    public init(box: PixelRect, color: RGB, width: Int = 1, caption: String = "") {
        self.box = box
        self.color = color
        self.width = width
        self.caption = caption
    }

    public struct RGB: Sendable, Hashable {
        public var red: UInt8, green: UInt8, blue: UInt8
        public init(_ red: UInt8, _ green: UInt8, _ blue: UInt8) {
            self.red = red
            self.green = green
            self.blue = blue
        }
    }
}

extension Image {
    /// An RGB copy of the image with `marks` drawn on it: what `scan --annotate` and `record add --annotate` write.
    public func annotated(_ marks: [AnnotationMark]) throws -> Image {
        let canvas = try converted(toDepth: 32)
        // Built from Leptonica's compiled-in font strings (no font files needed), in its sizes 4–20 (even): about
        // a hundredth of the image's height (4 on a 360-pixel photo, 20 from 2000 pixels up).
        let points = min(20, max(4, height / 100 / 2 * 2))
        let font = bmfCreate(nil, Int32(points))
        defer {
            var pointer = font
            bmfDestroy(&pointer)
        }
        for mark in marks {
            guard
                let box = boxCreate(Int32(mark.box.x), Int32(mark.box.y), Int32(mark.box.width), Int32(mark.box.height))
            else { throw ImageError.processing("boxCreate") }
            defer {
                var pointer: UnsafeMutablePointer<BOX>? = box
                boxDestroy(&pointer)
            }
            pixRenderBoxArb(
                canvas.pix, box, Int32(max(1, mark.width)), mark.color.red, mark.color.green, mark.color.blue)
            guard let font, !mark.caption.isEmpty else { continue }
            let ascii = Self.asciiCaption(mark.caption)
            // Leptonica's colour word: 0xRRGGBB00.
            let color = UInt32(mark.color.red) << 24 | UInt32(mark.color.green) << 16 | UInt32(mark.color.blue) << 8
            let lineHeight = Int(font.pointee.lineheight)
            let above = mark.box.y - 3
            let baseline = above - lineHeight >= 0 ? above : mark.box.y + mark.box.height + lineHeight
            var drawnWidth: Int32 = 0, overflow: Int32 = 0
            pixSetTextline(canvas.pix, font, ascii, color, Int32(mark.box.x), Int32(baseline), &drawnWidth, &overflow)
        }
        return canvas
    }

    /// `text` with diacritics dropped and anything else outside printable ASCII as `?`: the bitmap font has
    /// nothing else.
    static func asciiCaption(_ text: String) -> String {
        let folded = text.folding(options: .diacriticInsensitive, locale: nil)
        return String(
            folded.unicodeScalars.map { $0.isASCII && $0.value >= 32 && $0.value < 127 ? Character($0) : "?" })
    }
}
