import Foundation

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

/// A line of text turned from level: its centre, its length along the line and thickness across it, in an image's
/// pixels, and its turn in degrees (positive: falling to the right, as y grows downwards).
struct TurnedBox: Sendable, Hashable {
    var centreX: Double
    var centreY: Double
    var length: Double
    var thickness: Double
    var degrees: Double
}

/// Differentiable Binarization's post-processing: the detector's map of per-pixel text probabilities to boxes
/// of text. Pixels over `threshold` (dilated by 2 × 2) form regions; a region whose
/// pixels average under `boxThreshold`, or narrower than 3 pixels, is dropped; the rest are grown by
/// area × `unclipRatio` / perimeter on every side (the network is trained on shrunk text regions) and scaled to the
/// image. Boxes are axis-aligned; a line turned from level also gets its turned box (`turnedBoxes`), which the
/// recogniser reads levelled (`Levelling`).
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
        turnedBoxes(
            map: map, width: width, height: height, validWidth: validWidth, validHeight: validHeight, scale: scale,
            imageWidth: imageWidth, imageHeight: imageHeight
        ).map(\.box)
    }

    /// `boxes`, each with its line turned where it is (`Region.turned`): what the recogniser reads levelled.
    func turnedBoxes(
        map: [Float], width: Int, height: Int, validWidth: Int, validHeight: Int, scale: Double,
        imageWidth: Int, imageHeight: Int
    ) -> [(box: TextBox, turned: TurnedBox?)] {
        let regions = regions(
            map: map, width: width, height: height, validWidth: validWidth, validHeight: validHeight, scale: scale)
        var found: [(box: TextBox, turned: TurnedBox?)] = []
        for region in regions {
            guard let box = region.box(imageWidth: imageWidth, imageHeight: imageHeight) else { continue }
            found.append((box, region.turned()))
            if found.count == maximumBoxes { break }
        }
        return Self.readingOrder(found, by: \.box)
    }

    /// A connected region of the thresholded map: its bounds and mean probability in map pixels, and the moments of
    /// its pixels (their orientation is the line's).
    struct Region {
        var minX = Int.max, minY = Int.max, maxX = -1, maxY = -1
        var sum = 0.0, count = 0
        var sumX = 0.0, sumY = 0.0, sumXX = 0.0, sumYY = 0.0, sumXY = 0.0
        var scale = 1.0, unclipRatio = 1.6

        mutating func add(_ x: Int, _ y: Int, _ probability: Float) {
            minX = min(minX, x)
            maxX = max(maxX, x)
            minY = min(minY, y)
            maxY = max(maxY, y)
            sum += Double(probability)
            count += 1
            let (fx, fy) = (Double(x), Double(y))
            sumX += fx
            sumY += fy
            sumXX += fx * fx
            sumYY += fy * fy
            sumXY += fx * fy
        }

        var score: Double { sum / Double(max(1, count)) }

        /// The variances of the region's pixels along its long and short axes and the long axis's direction in
        /// degrees (−90…90), from its second moments: the eigen-decomposition of their covariance.
        var axes: (long: Double, short: Double, degrees: Double) {
            let n = Double(max(1, count))
            let xx = sumXX / n - (sumX / n) * (sumX / n), yy = sumYY / n - (sumY / n) * (sumY / n)
            let xy = sumXY / n - (sumX / n) * (sumY / n)
            let spread = ((xx - yy) * (xx - yy) + 4 * xy * xy).squareRoot()
            return ((xx + yy + spread) / 2, (xx + yy - spread) / 2, 0.5 * atan2(2 * xy, xx - yy) * 180 / .pi)
        }

        /// The direction of the region's long axis in degrees (−90…90), or nil when it is not three times as long as
        /// it is wide (a word of one letter, a blob).
        var lineAngle: Double? {
            let axes = axes
            guard axes.long > 0, axes.long >= 9 * max(axes.short, 0.25) else { return nil }
            return axes.degrees
        }

        /// The line the region is, as a box turned with it, in image pixels: its length and thickness from its
        /// moments (a uniform bar of length L has variance L² / 12 along it), grown by area × unclip ratio /
        /// perimeter on every side as `box` grows, as PaddleOCR's boxes are; nil when it lies within 2° of level,
        /// turns more than 25° (as likely a column of text or a picture on its side), or is no line.
        func turned() -> TurnedBox? {
            guard let angle = lineAngle, abs(angle) >= 2, abs(angle) <= 25 else { return nil }
            let axes = axes, n = Double(count)
            var length = (12 * axes.long).squareRoot(), thickness = (12 * max(axes.short, 0.25)).squareRoot()
            let grow = length * thickness * unclipRatio / (2 * (length + thickness))
            length += 2 * grow
            thickness += 2 * grow
            return TurnedBox(
                centreX: (sumX / n + 0.5) * scale, centreY: (sumY / n + 0.5) * scale, length: length * scale,
                thickness: thickness * scale, degrees: angle)
        }

        /// The region grown by area × unclip ratio / perimeter on every side, scaled to the image and clipped to it;
        /// nil when too thin.
        func box(imageWidth: Int, imageHeight: Int) -> TextBox? {
            let boxWidth = Double(maxX - minX + 1), boxHeight = Double(maxY - minY + 1)
            guard min(boxWidth, boxHeight) >= Double(DBPostprocessor.minimumSide) else { return nil }
            let grow = boxWidth * boxHeight * unclipRatio / (2 * (boxWidth + boxHeight))
            guard min(boxWidth, boxHeight) + 2 * grow >= Double(DBPostprocessor.minimumSide + 2) else { return nil }
            let left = max(0, (Double(minX) - grow) * scale), top = max(0, (Double(minY) - grow) * scale)
            let right = min(Double(imageWidth), (Double(maxX + 1) + grow) * scale)
            let bottom = min(Double(imageHeight), (Double(maxY + 1) + grow) * scale)
            let box = TextBox(
                x: Int(left.rounded()), y: Int(top.rounded()), width: Int((right - left).rounded()),
                height: Int((bottom - top).rounded()), score: score)
            return box.width > 3 && box.height > 3 ? box : nil
        }
    }

    /// The map's regions over `threshold` (dilated by 2 × 2, as OpenCV's dilate: a pixel over the threshold also sets
    /// its right, lower and lower-right neighbours) whose mean probability reaches `boxThreshold`.
    func regions(map: [Float], width: Int, height: Int, validWidth: Int, validHeight: Int, scale: Double) -> [Region] {
        precondition(map.count == width * height, "the map does not fill its size")
        let w = min(validWidth, width), h = min(validHeight, height)
        guard w > 0, h > 0 else { return [] }
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
        var found: [Region] = []
        for start in 0..<(w * h) where mask[start] && !seen[start] {
            var region = Region(scale: scale, unclipRatio: unclipRatio)
            seen[start] = true
            stack.append(start)
            while let index = stack.popLast() {
                let x = index % w, y = index / w
                region.add(x, y, map[y * width + x])
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
            guard region.score >= boxThreshold else { continue }
            found.append(region)
        }
        return found
    }

    /// `items` by their boxes top to bottom; boxes whose tops lie within 10 pixels of each other left to right.
    static func readingOrder<Item>(_ items: [Item], by box: (Item) -> TextBox) -> [Item] {
        var sorted = items.sorted { (box($0).y, box($0).x) < (box($1).y, box($1).x) }
        guard sorted.count > 1 else { return sorted }
        for i in 0..<(sorted.count - 1) {
            var j = i
            while j >= 0, abs(box(sorted[j + 1]).y - box(sorted[j]).y) < 10, box(sorted[j + 1]).x < box(sorted[j]).x {
                sorted.swapAt(j, j + 1)
                j -= 1
            }
        }
        return sorted
    }
}
