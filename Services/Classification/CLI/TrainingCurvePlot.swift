import CZlib
import ClassificationAPI
import Foundation

/// `model show --plot`: a training's course as a PNG, as Create ML draws its loss curve. Drawn here, pixel by pixel,
/// and written with zlib — no plotting library for one chart of three lines. The loss has its own scale (0 to its
/// largest value), the accuracies 0–100 %; one point per report, left to right in the order reported (pass 1 then
/// pass 2 of the cnn, a grey line between them).
enum TrainingCurvePlot {
    static let width = 800, height = 400, margin = 20
    static let loss: (UInt8, UInt8, UInt8) = (220, 40, 40)
    static let training: (UInt8, UInt8, UInt8) = (40, 80, 220)
    static let validation: (UInt8, UInt8, UInt8) = (30, 160, 60)

    static func png(_ history: [ClassificationV1.TrainingEpoch]) -> [UInt8] {
        var canvas = Canvas(width: width, height: height)
        let left = margin, right = width - margin, top = margin, bottom = height - margin
        for step in 0...10 {
            let y = bottom - (bottom - top) * step / 10
            canvas.line(left, y, right, y, (225, 225, 225))
        }
        canvas.line(left, top, left, bottom, (120, 120, 120))
        canvas.line(left, bottom, right, bottom, (120, 120, 120))
        let count = history.count
        func x(_ i: Int) -> Int { count <= 1 ? (left + right) / 2 : left + (right - left) * i / (count - 1) }
        func y(_ value: Double, _ scale: Double) -> Int {
            let share = scale > 0 && value.isFinite ? min(1, max(0, value / scale)) : 0
            return bottom - Int((Double(bottom - top) * share).rounded())
        }
        for i in 1..<max(1, count) where history[i].pass != history[i - 1].pass {
            canvas.line(x(i), top, x(i), bottom, (150, 150, 150))
        }
        let largestLoss = history.map(\.loss).filter(\.isFinite).max() ?? 1
        func curve(_ values: [Double?], _ scale: Double, _ colour: (UInt8, UInt8, UInt8)) {
            var previous: (Int, Int)?
            for (i, value) in values.enumerated() {
                guard let value else {
                    previous = nil
                    continue
                }
                let point = (x(i), y(value, scale))
                if let previous { canvas.line(previous.0, previous.1, point.0, point.1, colour, thickness: 2) }
                canvas.dot(point.0, point.1, colour)
                previous = point
            }
        }
        curve(history.map { $0.trainingAccuracy > 0 ? $0.trainingAccuracy : nil }, 1, training)
        curve(history.map(\.validationAccuracy), 1, validation)
        curve(history.map(\.loss), largestLoss, loss)
        return canvas.png()
    }

    /// RGB pixels, origin top-left.
    struct Canvas {
        let width: Int, height: Int
        var pixels: [UInt8]

        init(width: Int, height: Int) {
            self.width = width
            self.height = height
            pixels = [UInt8](repeating: 255, count: width * height * 3)
        }

        mutating func set(_ x: Int, _ y: Int, _ c: (UInt8, UInt8, UInt8)) {
            guard x >= 0, y >= 0, x < width, y < height else { return }
            let i = (y * width + x) * 3
            pixels[i] = c.0
            pixels[i + 1] = c.1
            pixels[i + 2] = c.2
        }

        /// Bresenham's line, `thickness` pixels square.
        mutating func line(_ x0: Int, _ y0: Int, _ x1: Int, _ y1: Int, _ c: (UInt8, UInt8, UInt8), thickness: Int = 1) {
            var x = x0, y = y0
            let dx = abs(x1 - x0), dy = -abs(y1 - y0), sx = x0 < x1 ? 1 : -1, sy = y0 < y1 ? 1 : -1
            var error = dx + dy
            while true {
                for ox in 0..<thickness { for oy in 0..<thickness { set(x + ox, y + oy, c) } }
                if x == x1 && y == y1 { break }
                let e2 = 2 * error
                if e2 >= dy {
                    error += dy
                    x += sx
                }
                if e2 <= dx {
                    error += dx
                    y += sy
                }
            }
        }

        mutating func dot(_ x: Int, _ y: Int, _ c: (UInt8, UInt8, UInt8)) {
            for ox in -2...2 { for oy in -2...2 where ox * ox + oy * oy <= 5 { set(x + ox, y + oy, c) } }
        }

        /// An 8-bit RGB PNG, each row filtered with "none", deflated by zlib.
        func png() -> [UInt8] {
            var raw: [UInt8] = []
            raw.reserveCapacity((width * 3 + 1) * height)
            for row in 0..<height {
                raw.append(0)
                raw += pixels[(row * width * 3)..<((row + 1) * width * 3)]
            }
            var size = compressBound(uLong(raw.count))
            var deflated = [UInt8](repeating: 0, count: Int(size))
            let status = deflated.withUnsafeMutableBufferPointer { out in
                raw.withUnsafeBufferPointer { compress2(out.baseAddress, &size, $0.baseAddress, uLong(raw.count), 9) }
            }
            precondition(status == Z_OK, "zlib's compress2 failed on a buffer it sized itself")
            var file: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
            file += Self.chunk(
                "IHDR", Self.bigEndian(UInt32(width)) + Self.bigEndian(UInt32(height)) + [8, 2, 0, 0, 0])
            file += Self.chunk("IDAT", Array(deflated.prefix(Int(size))))
            file += Self.chunk("IEND", [])
            return file
        }

        static func chunk(_ type: String, _ data: [UInt8]) -> [UInt8] {
            let typed = Array(type.utf8) + data
            let crc = typed.withUnsafeBufferPointer { UInt32(crc32(0, $0.baseAddress, uInt($0.count))) }
            return bigEndian(UInt32(data.count)) + typed + bigEndian(crc)
        }

        static func bigEndian(_ v: UInt32) -> [UInt8] {
            [UInt8(v >> 24), UInt8((v >> 16) & 0xFF), UInt8((v >> 8) & 0xFF), UInt8(v & 0xFF)]
        }
    }
}
