import Foundation

/// The `features` classifier's hand-made features: a histogram of oriented gradients (HOG: 8×8 cells, 9 unsigned
/// orientation bins, 2×2-cell blocks L2-Hys normalised, as Dalal and Triggs) over the grey image, and an 8-bin
/// histogram per colour channel. A linear model over them trains in seconds and needs no network.
public enum Features {
    public static let cellsPerSide = 8
    public static let bins = 9
    public static let colourBins = 8

    public static func count() -> Int {
        let blocks = cellsPerSide - 1
        return blocks * blocks * 4 * bins + 3 * colourBins
    }

    /// Features of one CHW image in [0, 1] (3 channels, side × side).
    public static func extract(_ image: [Float], side: Int) -> [Float] {
        let plane = side * side
        var grey = [Float](repeating: 0, count: plane)
        for i in 0..<plane { grey[i] = (image[i] + image[plane + i] + image[2 * plane + i]) / 3 }
        let cell = Float(side) / Float(cellsPerSide)
        var histogram = [Float](repeating: 0, count: cellsPerSide * cellsPerSide * bins)
        for y in 0..<side {
            for x in 0..<side {
                let gx = grey[y * side + min(side - 1, x + 1)] - grey[y * side + max(0, x - 1)]
                let gy = grey[min(side - 1, y + 1) * side + x] - grey[max(0, y - 1) * side + x]
                let magnitude = (gx * gx + gy * gy).squareRoot()
                if magnitude == 0 { continue }
                var angle = atan2f(gy, gx) * 180 / .pi
                if angle < 0 { angle += 180 }
                let position = angle / (180 / Float(bins)) - 0.5
                let lower = Int(floorf(position))
                let fraction = position - Float(lower)
                let cx = min(cellsPerSide - 1, Int(Float(x) / cell)), cy = min(cellsPerSide - 1, Int(Float(y) / cell))
                let base = (cy * cellsPerSide + cx) * bins
                histogram[base + (lower + bins) % bins] += magnitude * (1 - fraction)
                histogram[base + (lower + 1) % bins] += magnitude * fraction
            }
        }
        var features: [Float] = []
        features.reserveCapacity(count())
        for by in 0..<(cellsPerSide - 1) {
            for bx in 0..<(cellsPerSide - 1) {
                var block: [Float] = []
                for (dy, dx) in [(0, 0), (0, 1), (1, 0), (1, 1)] {
                    let base = ((by + dy) * cellsPerSide + bx + dx) * bins
                    block.append(contentsOf: histogram[base..<base + bins])
                }
                var norm = (block.reduce(0) { $0 + $1 * $1 } + 1e-6).squareRoot()
                block = block.map { min($0 / norm, 0.2) }
                norm = (block.reduce(0) { $0 + $1 * $1 } + 1e-6).squareRoot()
                features.append(contentsOf: block.map { $0 / norm })
            }
        }
        for c in 0..<3 {
            var colour = [Float](repeating: 0, count: colourBins)
            for i in 0..<plane { colour[min(colourBins - 1, Int(image[c * plane + i] * Float(colourBins)))] += 1 }
            features.append(contentsOf: colour.map { $0 / Float(plane) })
        }
        return features
    }
}
