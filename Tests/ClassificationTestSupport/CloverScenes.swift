import ClassificationCore
import Foundation

/// Seeded lawn scenes for small-object detection (issue 41: four-leaf clovers among three-leaf ones, no real clover
/// photos on this machine): a mottled grass background with blades, scattered clovers drawn as three or four round
/// leaflets about a centre, each turned at random, with a darker rim, in shades of green. Most clovers have three
/// leaflets; a scene holds `fourLeafChance` of a four-leaf one per clover, so `four-leaf` is the minority label, as
/// in a lawn. Clovers do not overlap. The same seed gives the same scenes.
public struct CloverScenes: Sendable {
    public var side = 448
    /// Clover diameters in scene pixels (letterboxed to 224 a 448-pixel scene halves them).
    public var diameters: ClosedRange<Double> = 20...30
    public var cloversPerScene: ClosedRange<Int> = 4...8
    public var fourLeafChance = 0.25
    public var seed: UInt64

    public static let labels = ["four-leaf", "three-leaf"]

    public init(seed: UInt64) { self.seed = seed }

    /// `count` scenes as a detection dataset (Create ML's annotations, JPEG images), built as an upload is.
    public func dataset(count: Int, prefix: String = "scene") throws -> Dataset {
        var random = Random(seed)
        var files: [String: [UInt8]] = [:]
        var entries: [[String: Any]] = []
        for index in 0..<count {
            let (image, objects) = scene(using: &random)
            let name = "\(prefix)-\(index).jpg"
            files[name] = try image.jpeg(quality: 92)
            entries.append([
                "image": name,
                "annotations": objects.map { object in
                    [
                        "label": object.label,
                        "coordinates": [
                            "x": object.box.x + object.box.width / 2, "y": object.box.y + object.box.height / 2,
                            "width": object.box.width, "height": object.box.height,
                        ],
                    ]
                },
            ])
        }
        let json = try JSONSerialization.data(withJSONObject: entries)
        return try DatasetBuilder.detection(annotations: [UInt8](json), images: files)
    }

    /// One scene and its clovers' boxes (the leaflets' extent).
    func scene(using random: inout Random) -> (RGBImage, [(label: String, box: Box)]) {
        var pixels = [UInt8](repeating: 0, count: side * side * 3)
        // Grass: a base green mottled by coarse and fine noise, then short blades lighter or darker than it.
        let base = (
            r: 60.0 + random.uniform(-10, 10), g: 110.0 + random.uniform(-15, 15), b: 45.0 + random.uniform(-8, 8)
        )
        let coarse = 8
        let cells = side / coarse + 2
        let mottle = (0..<(cells * cells)).map { _ in random.uniform(-18, 18) }
        for y in 0..<side {
            for x in 0..<side {
                let fx = Double(x) / Double(coarse), fy = Double(y) / Double(coarse)
                let x0 = Int(fx), y0 = Int(fy), tx = fx - Double(x0), ty = fy - Double(y0)
                let m =
                    mottle[y0 * cells + x0] * (1 - tx) * (1 - ty) + mottle[y0 * cells + x0 + 1] * tx * (1 - ty)
                    + mottle[(y0 + 1) * cells + x0] * (1 - tx) * ty + mottle[(y0 + 1) * cells + x0 + 1] * tx * ty
                let n = random.uniform(-10, 10) + m
                let i = (y * side + x) * 3
                pixels[i] = clamp(base.r + n * 0.6)
                pixels[i + 1] = clamp(base.g + n)
                pixels[i + 2] = clamp(base.b + n * 0.4)
            }
        }
        for _ in 0..<(side * side / 90) {
            let x = random.uniform(0, Double(side)), y = random.uniform(0, Double(side))
            let angle = random.uniform(-0.6, 0.6) - Double.pi / 2, length = random.uniform(4, 12)
            let shade = random.uniform(-35, 35)
            for step in 0..<Int(length) {
                let px = Int(x + cos(angle) * Double(step)), py = Int(y + sin(angle) * Double(step))
                guard px >= 0, py >= 0, px < side, py < side else { continue }
                let i = (py * side + px) * 3
                pixels[i] = clamp(Double(pixels[i]) + shade * 0.6)
                pixels[i + 1] = clamp(Double(pixels[i + 1]) + shade)
                pixels[i + 2] = clamp(Double(pixels[i + 2]) + shade * 0.3)
            }
        }
        var objects: [(label: String, box: Box)] = []
        let wanted = Int(random.uniform(Double(cloversPerScene.lowerBound), Double(cloversPerScene.upperBound) + 1))
        var attempts = 0
        while objects.count < wanted, attempts < 200 {
            attempts += 1
            let diameter = random.uniform(diameters.lowerBound, diameters.upperBound)
            let margin = diameter / 2 + 2
            let cx = random.uniform(margin, Double(side) - margin), cy = random.uniform(margin, Double(side) - margin)
            let leaflets = random.uniform(0, 1) < fourLeafChance ? 4 : 3
            let turn = random.uniform(0, 2 * Double.pi)
            // Leaflets: circles of radius 0.27 d whose centres are 0.23 d from the clover's, so they overlap a little.
            let radius = 0.27 * diameter, reach = 0.23 * diameter
            let centres = (0..<leaflets).map { k -> (Double, Double) in
                let a = turn + Double(k) * 2 * Double.pi / Double(leaflets)
                return (cx + reach * cos(a), cy + reach * sin(a))
            }
            let box = Box(
                x: (centres.map(\.0).min()! - radius).rounded(.down),
                y: (centres.map(\.1).min()! - radius).rounded(.down),
                width: 0, height: 0)
            let right = (centres.map(\.0).max()! + radius).rounded(.up),
                bottom = (centres.map(\.1).max()! + radius).rounded(.up)
            let bounds = Box(x: box.x, y: box.y, width: right - box.x, height: bottom - box.y)
            // Apart from every clover placed, by a few pixels.
            if objects.contains(where: { Self.overlaps($0.box, bounds, gap: 3) }) { continue }
            let leaf = (r: random.uniform(40, 75), g: random.uniform(120, 165), b: random.uniform(35, 60))
            for y in Int(bounds.minY)..<Int(bounds.maxY) {
                for x in Int(bounds.minX)..<Int(bounds.maxX) {
                    // Distance inside the nearest leaflet's edge, smoothed over a pixel; the rim darker.
                    let px = Double(x) + 0.5, py = Double(y) + 0.5
                    let inside = centres.map {
                        radius - ((px - $0.0) * (px - $0.0) + (py - $0.1) * (py - $0.1)).squareRoot()
                    }.max()!
                    let coverage = min(1, max(0, inside + 0.5))
                    guard coverage > 0 else { continue }
                    let rim = inside < 1.5 ? 0.65 : 1.0
                    let i = (y * side + x) * 3
                    for (channel, value) in [leaf.r, leaf.g, leaf.b].enumerated() {
                        pixels[i + channel] = clamp(
                            Double(pixels[i + channel]) * (1 - coverage) + value * rim * coverage)
                    }
                }
            }
            objects.append((leaflets == 4 ? "four-leaf" : "three-leaf", bounds))
        }
        return (RGBImage(width: side, height: side, pixels: pixels), objects)
    }

    static func overlaps(_ a: Box, _ b: Box, gap: Double) -> Bool {
        a.minX - gap < b.maxX && b.minX - gap < a.maxX && a.minY - gap < b.maxY && b.minY - gap < a.maxY
    }

    private func clamp(_ v: Double) -> UInt8 { UInt8(max(0, min(255, v.rounded()))) }

    /// SplitMix64: the scenes depend on the seed alone.
    struct Random {
        var state: UInt64
        init(_ seed: UInt64) { state = seed &+ 0x9E37_79B9_7F4A_7C15 }
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
        mutating func uniform(_ low: Double, _ high: Double) -> Double {
            low + (high - low) * Double(next() >> 11) / Double(1 << 53)
        }
    }
}
