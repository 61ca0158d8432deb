import Foundation

/// Create ML's augmentations, applied to a training image already scaled to the network's input (CHW floats in
/// [0, 1]). Each is drawn from the caller's seeded generator, so a seed reproduces the exact training inputs.
public struct Augmentation: Sendable, Equatable, Codable {
    public var flip = false
    /// Random shift by up to this fraction of the side (a crop of a padded image).
    public var crop = 0.0
    /// Random rotation by up to this many degrees either way.
    public var rotation = 0.0
    public var blur = false
    /// Random brightness scale in [1 − e, 1 + e].
    public var exposure = 0.0
    /// Gaussian noise of this standard deviation.
    public var noise = 0.0
    /// A right-angle turn (0, 90, 180 or 270°, equally likely), exact — no pixel is resampled: photos taken from
    /// above (a clover, a leaf, a document on a table) have no "up", and a small rotation does not teach that.
    /// A non-square image turns by 0 or 180° only, keeping its shape.
    public var turns = false
    /// Random zoom by a factor in [1 − s, 1 + s] about the centre: the same object framed closer or farther.
    public var scale = 0.0
    /// Random colour: each channel's gain in [1 − c, 1 + c] (white balance) and the saturation scaled by a factor
    /// in [1 − c, 1 + c] (toward grey or away from it): the same object under other light or another camera.
    public var colour = 0.0

    public init(
        flip: Bool = false, crop: Double = 0, rotation: Double = 0, blur: Bool = false, exposure: Double = 0,
        noise: Double = 0, turns: Bool = false, scale: Double = 0, colour: Double = 0
    ) {
        self.flip = flip
        self.crop = crop
        self.rotation = rotation
        self.blur = blur
        self.exposure = exposure
        self.noise = noise
        self.turns = turns
        self.scale = scale
        self.colour = colour
    }

    // Decoded as before for headers and requests written without the newer fields.
    enum CodingKeys: String, CodingKey { case flip, crop, rotation, blur, exposure, noise, turns, scale, colour }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.init(
            flip: try c.decodeIfPresent(Bool.self, forKey: .flip) ?? false,
            crop: try c.decodeIfPresent(Double.self, forKey: .crop) ?? 0,
            rotation: try c.decodeIfPresent(Double.self, forKey: .rotation) ?? 0,
            blur: try c.decodeIfPresent(Bool.self, forKey: .blur) ?? false,
            exposure: try c.decodeIfPresent(Double.self, forKey: .exposure) ?? 0,
            noise: try c.decodeIfPresent(Double.self, forKey: .noise) ?? 0,
            turns: try c.decodeIfPresent(Bool.self, forKey: .turns) ?? false,
            scale: try c.decodeIfPresent(Double.self, forKey: .scale) ?? 0,
            colour: try c.decodeIfPresent(Double.self, forKey: .colour) ?? 0)
    }

    public static let none = Augmentation()

    public var isNone: Bool { self == .none }

    /// Returns an augmented copy of `image` ([channels][height][width] flattened).
    public func apply(
        _ image: [Float], channels: Int, height: Int, width: Int,
        using random: inout SeededRandom
    ) -> [Float] {
        if isNone { return image }
        var image = image
        // Drawn only when asked for, so the other augmentations of a seed stay as they were.
        if turns {
            let quarter = Int(random.next() % 4)
            image = Self.turned(
                image, channels: channels, height: height, width: width,
                quarters: width == height ? quarter : (quarter & 1) * 2)
        }
        var out = image
        let doFlip = flip && random.unit() < 0.5
        let dx = crop > 0 ? (random.unit() * 2 - 1) * Float(crop) * Float(width) : 0
        let dy = crop > 0 ? (random.unit() * 2 - 1) * Float(crop) * Float(height) : 0
        let angle = rotation > 0 ? (random.unit() * 2 - 1) * Float(rotation) * .pi / 180 : 0
        // Drawn after the others, so a seed's flips, shifts and turns stay as they were without it.
        let zoom = scale > 0 ? 1 + (random.unit() * 2 - 1) * Float(scale) : 1
        if doFlip || dx != 0 || dy != 0 || angle != 0 || zoom != 1 {
            out = Self.warped(
                image, channels: channels, height: height, width: width, flip: doFlip, dx: dx, dy: dy, angle: angle,
                zoom: zoom)
        }
        if blur && random.unit() < 0.5 {
            let source = out
            for ch in 0..<channels {
                for y in 0..<height {
                    for x in 0..<width {
                        var total: Float = 0, n: Float = 0
                        for yy in max(0, y - 1)...min(height - 1, y + 1) {
                            for xx in max(0, x - 1)...min(width - 1, x + 1) {
                                total += source[(ch * height + yy) * width + xx]
                                n += 1
                            }
                        }
                        out[(ch * height + y) * width + x] = total / n
                    }
                }
            }
        }
        if exposure > 0 {
            let scale = 1 + (random.unit() * 2 - 1) * Float(exposure)
            for i in out.indices { out[i] = min(1, out[i] * scale) }
        }
        if colour > 0, channels == 3 {
            let gains = (0..<3).map { _ in 1 + (random.unit() * 2 - 1) * Float(colour) }
            let saturation = 1 + (random.unit() * 2 - 1) * Float(colour)
            let plane = height * width
            for i in 0..<plane {
                let r = out[i] * gains[0], g = out[plane + i] * gains[1], b = out[2 * plane + i] * gains[2]
                let grey = 0.299 * r + 0.587 * g + 0.114 * b
                out[i] = min(1, max(0, grey + (r - grey) * saturation))
                out[plane + i] = min(1, max(0, grey + (g - grey) * saturation))
                out[2 * plane + i] = min(1, max(0, grey + (b - grey) * saturation))
            }
        }
        if noise > 0 {
            for i in out.indices { out[i] = min(1, max(0, out[i] + random.gaussian() * Float(noise))) }
        }
        return out
    }

    /// `image` mirrored, shifted by (dx, dy) pixels, rotated by `angle` radians and zoomed by `zoom` about its centre,
    /// each output pixel inverse-mapped to the source (bilinear; outside it black).
    static func warped(
        _ image: [Float], channels: Int, height: Int, width: Int, flip: Bool = false, dx: Float = 0, dy: Float = 0,
        angle: Float = 0, zoom: Float = 1
    ) -> [Float] {
        var out = image
        let cx = Float(width - 1) / 2, cy = Float(height - 1) / 2
        let c = cosf(angle), s = sinf(angle)
        for y in 0..<height {
            for x in 0..<width {
                var ox = Float(x) - cx - dx, oy = Float(y) - cy - dy
                if flip { ox = -ox }
                ox /= zoom
                oy /= zoom
                let sx = c * ox + s * oy + cx, sy = -s * ox + c * oy + cy
                for ch in 0..<channels {
                    out[(ch * height + y) * width + x] = sample(image, ch, sx, sy, height, width)
                }
            }
        }
        return out
    }

    /// `image` turned clockwise by `quarters` right angles (a square one for odd `quarters`).
    static func turned(_ image: [Float], channels: Int, height: Int, width: Int, quarters: Int) -> [Float] {
        guard quarters % 4 != 0 else { return image }
        var out = image
        for ch in 0..<channels {
            let plane = ch * height * width
            for y in 0..<height {
                for x in 0..<width {
                    let (sx, sy): (Int, Int) =
                        switch quarters % 4 {
                        case 1: (y, height - 1 - x)
                        case 2: (width - 1 - x, height - 1 - y)
                        default: (width - 1 - y, x)
                        }
                    out[plane + y * width + x] = image[plane + sy * width + sx]
                }
            }
        }
        return out
    }

    private static func sample(_ image: [Float], _ ch: Int, _ x: Float, _ y: Float, _ h: Int, _ w: Int) -> Float {
        let x0 = Int(floorf(x)), y0 = Int(floorf(y))
        let fx = x - Float(x0), fy = y - Float(y0)
        func at(_ xx: Int, _ yy: Int) -> Float {
            guard xx >= 0, yy >= 0, xx < w, yy < h else { return 0 }
            return image[(ch * h + yy) * w + xx]
        }
        return (at(x0, y0) * (1 - fx) + at(x0 + 1, y0) * fx) * (1 - fy)
            + (at(x0, y0 + 1) * (1 - fx) + at(x0 + 1, y0 + 1) * fx) * fy
    }
}
