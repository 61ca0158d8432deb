/// A rectangle of text in an image's pixels, top-left origin.
public struct TextBox: Sendable, Hashable {
    public var x: Int
    public var y: Int
    public var width: Int
    public var height: Int
    /// The detector's mean probability of text over the region (0–1).
    public var score: Double

    public init(x: Int, y: Int, width: Int, height: Int, score: Double) {
        self.x = x
        self.y = y
        self.width = width
        self.height = height
        self.score = score
    }
}

/// Differentiable Binarization's post-processing: the detector's map of per-pixel text probabilities to boxes
/// of text. Pixels over `threshold` (dilated by 2 × 2) form regions; a region whose
/// pixels average under `boxThreshold`, or narrower than 3 pixels, is dropped; the rest are grown by
/// area × `unclipRatio` / perimeter on every side (the network is trained on shrunk text regions) and scaled to the
/// image. Boxes are axis-aligned (a display photographed a few degrees off still fits its line's box).
public struct DBPostprocessor: Sendable {
    public var threshold: Float = 0.3
    public var boxThreshold: Double = 0.5
    public var unclipRatio: Double = 1.6
    public var maximumBoxes = 1000
    static let minimumSide = 3

    public init() {}

    /// Boxes in `map` (`width` × `height` probabilities, rows top to bottom) of which the top-left `validWidth` ×
    /// `validHeight` is the picture (the rest canvas padding), scaled by `scale` (image pixels per map pixel) and
    /// clipped to `imageWidth` × `imageHeight`; in reading order (top to bottom, then left to right within a line).
    public func boxes(
        map: [Float], width: Int, height: Int, validWidth: Int, validHeight: Int, scale: Double,
        imageWidth: Int, imageHeight: Int
    ) -> [TextBox] {
        precondition(map.count == width * height, "the map does not fill its size")
        let w = min(validWidth, width), h = min(validHeight, height)
        guard w > 0, h > 0 else { return [] }
        // Threshold, then dilate by 2 × 2 (as OpenCV's dilate: a pixel over the threshold also sets its right,
        // lower and lower-right neighbours).
        var mask = [Bool](repeating: false, count: w * h)
        for y in 0..<h {
            for x in 0..<w where map[y * width + x] > threshold {
                mask[y * w + x] = true
                if x + 1 < w { mask[y * w + x + 1] = true }
                if y + 1 < h {
                    mask[(y + 1) * w + x] = true
                    if x + 1 < w { mask[(y + 1) * w + x + 1] = true }
                }
            }
        }
        var seen = [Bool](repeating: false, count: w * h)
        var stack: [Int] = []
        var found: [TextBox] = []
        for start in 0..<(w * h) where mask[start] && !seen[start] {
            var minX = Int.max, minY = Int.max, maxX = -1, maxY = -1
            var sum = 0.0, count = 0
            seen[start] = true
            stack.append(start)
            while let index = stack.popLast() {
                let x = index % w, y = index / w
                minX = min(minX, x)
                maxX = max(maxX, x)
                minY = min(minY, y)
                maxY = max(maxY, y)
                sum += Double(map[y * width + x])
                count += 1
                for dy in -1...1 {
                    let ny = y + dy
                    guard ny >= 0, ny < h else { continue }
                    for dx in -1...1 {
                        let nx = x + dx
                        guard nx >= 0, nx < w else { continue }
                        let neighbour = ny * w + nx
                        if mask[neighbour] && !seen[neighbour] {
                            seen[neighbour] = true
                            stack.append(neighbour)
                        }
                    }
                }
            }
            let boxWidth = Double(maxX - minX + 1), boxHeight = Double(maxY - minY + 1)
            guard min(boxWidth, boxHeight) >= Double(Self.minimumSide) else { continue }
            let score = sum / Double(count)
            guard score >= boxThreshold else { continue }
            let grow = boxWidth * boxHeight * unclipRatio / (2 * (boxWidth + boxHeight))
            guard min(boxWidth, boxHeight) + 2 * grow >= Double(Self.minimumSide + 2) else { continue }
            let left = max(0, (Double(minX) - grow) * scale), top = max(0, (Double(minY) - grow) * scale)
            let right = min(Double(imageWidth), (Double(maxX + 1) + grow) * scale)
            let bottom = min(Double(imageHeight), (Double(maxY + 1) + grow) * scale)
            let box = TextBox(
                x: Int(left.rounded()), y: Int(top.rounded()), width: Int((right - left).rounded()),
                height: Int((bottom - top).rounded()), score: score)
            guard box.width > 3, box.height > 3 else { continue }
            found.append(box)
            if found.count == maximumBoxes { break }
        }
        return Self.readingOrder(found)
    }

    /// Top to bottom; boxes whose tops lie within 10 pixels of each other left to right.
    static func readingOrder(_ boxes: [TextBox]) -> [TextBox] {
        var sorted = boxes.sorted { ($0.y, $0.x) < ($1.y, $1.x) }
        guard sorted.count > 1 else { return sorted }
        for i in 0..<(sorted.count - 1) {
            var j = i
            while j >= 0, abs(sorted[j + 1].y - sorted[j].y) < 10, sorted[j + 1].x < sorted[j].x {
                sorted.swapAt(j, j + 1)
                j -= 1
            }
        }
        return sorted
    }
}
