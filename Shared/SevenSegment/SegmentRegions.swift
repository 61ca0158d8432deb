/// Where a photo may show segment digits. PP-OCR's detector, trained on print, often finds no text at all where a
/// display's digits are separate strokes (a thermometer's `25.3` beside a found `TEMP`), so the segment reader looks
/// for its own lines: ink that stands out from its surroundings (either polarity), its strokes joined by a small
/// dilation into blobs, blobs of like height on one row grouped into a line, each line's box padded for a minus
/// sign too small to be a blob. What is not segments is then rejected by the reader (print's digits are
/// one stroke each; letters are not read with confidence).
public enum SegmentRegions {
    /// A line's box in the photo's pixels.
    public struct Box: Sendable, Equatable {
        public var x: Int
        public var y: Int
        public var width: Int
        public var height: Int
    }

    /// The long side the photo is searched at.
    static let workingSide = 800
    /// Ink differs from the local mean (a 41-pixel window at the working size) by this much at least.
    static let contrast = 28

    public static func find(rgb: [UInt8], width: Int, height: Int) -> [Box] {
        let factor = max(1, (max(width, height) + workingSide - 1) / workingSide)
        let grey = GreyPixels(rgb: rgb, width: width, height: height, maximumHeight: max(1, height / factor))
        let (w, h) = (grey.width, grey.height)
        let mean = localMean(grey, radius: 20)
        var boxes: [Box] = []
        for light in [false, true] {
            var ink = [Bool](repeating: false, count: w * h)
            for i in 0..<(w * h) {
                let difference = Int(grey.bytes[i]) - mean[i]
                ink[i] = light ? difference > contrast : difference < -contrast
            }
            // The gaps between a digit's segments are unknown: a few radii, each line found kept (the reader
            // rejects what is not a value).
            for radius in [2, 4, 7] {
                let joined = dilate(ink, width: w, height: h, radius: radius)
                let blobs = components(joined, width: w, height: h).filter {
                    $0.height >= 12 + 2 * radius && $0.height * 5 <= h * 3 && $0.width * 7 >= $0.height
                        && $0.width <= $0.height * 8
                }
                for line in lines(blobs) {
                    // The dilation's growth off, then room for a minus sign too small to be a blob (it stands a
                    // digit's width and more before the first digit's ink when that is a `1`).
                    let inner = Box(
                        x: line.x + radius, y: line.y + radius, width: line.width - 2 * radius,
                        height: line.height - 2 * radius)
                    let padLeft = inner.height * 7 / 5, padRight = inner.height * 3 / 10, padY = inner.height / 8
                    let x0 = max(0, inner.x - padLeft), y0 = max(0, inner.y - padY)
                    let x1 = min(w, inner.x + inner.width + padRight), y1 = min(h, inner.y + inner.height + padY)
                    let box = Box(
                        x: x0 * factor, y: y0 * factor, width: min(width - x0 * factor, (x1 - x0) * factor),
                        height: min(height - y0 * factor, (y1 - y0) * factor))
                    if !boxes.contains(box) { boxes.append(box) }
                }
            }
        }
        return boxes
    }

    /// Blobs of like height (within a factor 1.3) whose rows overlap by 80 % of the smaller, at most a height
    /// apart, as lines. Each blob is compared with the line's last blob, not the line's box: a turned display's line
    /// climbs or falls blob by blob, its box growing taller than any digit (a 10° turn broke lines after two digits).
    static func lines(_ blobs: [Box]) -> [Box] {
        var lines: [(box: Box, last: Box)] = []
        for blob in blobs.sorted(by: { $0.x < $1.x }) {
            if let index = lines.lastIndex(where: { line in
                let last = line.last
                let overlap = min(last.y + last.height, blob.y + blob.height) - max(last.y, blob.y)
                let small = min(last.height, blob.height), large = max(last.height, blob.height)
                return overlap * 10 >= small * 8 && large * 10 <= small * 13
                    && blob.x - (line.box.x + line.box.width) <= large
            }) {
                let line = lines[index].box
                let x0 = min(line.x, blob.x), y0 = min(line.y, blob.y)
                lines[index] = (
                    Box(
                        x: x0, y: y0, width: max(line.x + line.width, blob.x + blob.width) - x0,
                        height: max(line.y + line.height, blob.y + blob.height) - y0), blob
                )
            } else {
                lines.append((blob, blob))
            }
        }
        return lines.map(\.box)
    }

    /// The mean of a (2r + 1)² window around each pixel (clamped at the edges), from an integral image.
    static func localMean(_ grey: GreyPixels, radius r: Int) -> [Int] {
        let (w, h) = (grey.width, grey.height)
        var integral = [Int](repeating: 0, count: (w + 1) * (h + 1))
        for y in 0..<h {
            var row = 0
            for x in 0..<w {
                row += Int(grey.bytes[y * w + x])
                integral[(y + 1) * (w + 1) + x + 1] = integral[y * (w + 1) + x + 1] + row
            }
        }
        var mean = [Int](repeating: 0, count: w * h)
        for y in 0..<h {
            let y0 = max(0, y - r), y1 = min(h, y + r + 1)
            for x in 0..<w {
                let x0 = max(0, x - r), x1 = min(w, x + r + 1)
                let sum =
                    integral[y1 * (w + 1) + x1] - integral[y0 * (w + 1) + x1] - integral[y1 * (w + 1) + x0]
                    + integral[y0 * (w + 1) + x0]
                mean[y * w + x] = sum / ((x1 - x0) * (y1 - y0))
            }
        }
        return mean
    }

    /// Ink grown by `radius` in every direction (a square), in two separable passes.
    static func dilate(_ ink: [Bool], width w: Int, height h: Int, radius r: Int) -> [Bool] {
        var across = [Bool](repeating: false, count: w * h)
        for y in 0..<h {
            for x in 0..<w where ink[y * w + x] {
                for xx in max(0, x - r)...min(w - 1, x + r) { across[y * w + xx] = true }
            }
        }
        var out = [Bool](repeating: false, count: w * h)
        for y in 0..<h {
            for x in 0..<w where across[y * w + x] {
                for yy in max(0, y - r)...min(h - 1, y + r) { out[yy * w + x] = true }
            }
        }
        return out
    }

    /// The bounding boxes of 8-connected components.
    static func components(_ ink: [Bool], width w: Int, height h: Int) -> [Box] {
        var seen = [Bool](repeating: false, count: w * h)
        var boxes: [Box] = []
        var stack: [Int] = []
        for start in 0..<(w * h) where ink[start] && !seen[start] {
            seen[start] = true
            stack = [start]
            var (x0, y0, x1, y1) = (w, h, 0, 0)
            while let i = stack.popLast() {
                let x = i % w, y = i / w
                (x0, y0, x1, y1) = (min(x0, x), min(y0, y), max(x1, x), max(y1, y))
                for dy in -1...1 {
                    for dx in -1...1 {
                        let nx = x + dx, ny = y + dy
                        guard nx >= 0, nx < w, ny >= 0, ny < h else { continue }
                        let j = ny * w + nx
                        if ink[j] && !seen[j] {
                            seen[j] = true
                            stack.append(j)
                        }
                    }
                }
            }
            boxes.append(Box(x: x0, y: y0, width: x1 - x0 + 1, height: y1 - y0 + 1))
        }
        return boxes
    }
}
