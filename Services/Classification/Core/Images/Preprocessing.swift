import Torch

/// How an image of another shape meets the model's square-or-rectangular input.
public enum Scaling: String, Sendable, Codable, CaseIterable {
    /// Scale to fit inside, keeping the aspect ratio, and pad the rest with black (letterbox): nothing is cut off.
    case fit
    /// Stretch to the input size.
    case fill
    /// Scale to cover, keeping the aspect ratio, and cut the centre.
    case centerCrop = "center-crop"
}

/// The placement of the image inside the input (for mapping detector boxes back to the photo's pixels).
public struct Placement: Sendable, Equatable {
    public var scaleX: Double
    public var scaleY: Double
    public var offsetX: Double
    public var offsetY: Double

    /// Maps a box in input pixels back to source pixels.
    public func toSource(_ box: Box) -> Box {
        Box(
            x: (box.x - offsetX) / scaleX, y: (box.y - offsetY) / scaleY, width: box.width / scaleX,
            height: box.height / scaleY)
    }

    /// Maps a box in source pixels into input pixels.
    public func toInput(_ box: Box) -> Box {
        Box(
            x: box.x * scaleX + offsetX, y: box.y * scaleY + offsetY, width: box.width * scaleX,
            height: box.height * scaleY)
    }
}

/// Image → network input: RGB floats in [0, 1], channels first ([3][height][width] flattened). Resizing goes through
/// libtorch's antialiased bilinear interpolation (PIL's filter), so shrinking a photo averages instead of aliasing.
public enum Preprocessing {
    /// The smallest decoded size (`RGBImage.decode(atLeast:)`) of an upright `image` that still covers twice what
    /// `scaling` keeps of it at the input's size, so the resize averages several pixels into each: a 4:3 photo fitted
    /// into 224×224 becomes 224×168, so 448×336 of it is enough (libjpeg's 1/8 of 12 MP, where twice the input on
    /// both sides, 448×448, needed 1/4 and four times the pixels).
    public static func decodeSize(
        of image: (width: Int, height: Int), input: (width: Int, height: Int), scaling: Scaling
    ) -> (width: Int, height: Int) {
        guard image.width > 0, image.height > 0 else { return (2 * input.width, 2 * input.height) }
        let w = Double(image.width), h = Double(image.height)
        let scale: Double
        switch scaling {
        case .fill: return (2 * input.width, 2 * input.height)
        case .fit: scale = min(Double(input.width) / w, Double(input.height) / h)
        case .centerCrop: scale = max(Double(input.width) / w, Double(input.height) / h)
        }
        // Up, but not for a rounding error's sake (2 · 3000 · 224/3000 is 448.00000000000006).
        return (Int((2 * w * scale - 1e-6).rounded(.up)), Int((2 * h * scale - 1e-6).rounded(.up)))
    }

    public static func input(_ image: RGBImage, width: Int, height: Int, scaling: Scaling) throws -> (
        pixels: [Float], placement: Placement
    ) {
        var source = image
        var placement = Placement(
            scaleX: Double(width) / Double(image.width), scaleY: Double(height) / Double(image.height),
            offsetX: 0, offsetY: 0)
        var targetWidth = width, targetHeight = height
        switch scaling {
        case .fill:
            break
        case .fit:
            let scale = min(Double(width) / Double(image.width), Double(height) / Double(image.height))
            targetWidth = max(1, Int((Double(image.width) * scale).rounded()))
            targetHeight = max(1, Int((Double(image.height) * scale).rounded()))
            placement = Placement(
                scaleX: Double(targetWidth) / Double(image.width),
                scaleY: Double(targetHeight) / Double(image.height),
                offsetX: Double((width - targetWidth) / 2), offsetY: Double((height - targetHeight) / 2))
        case .centerCrop:
            let scale = max(Double(width) / Double(image.width), Double(height) / Double(image.height))
            let cropWidth = min(image.width, max(1, Int((Double(width) / scale).rounded())))
            let cropHeight = min(image.height, max(1, Int((Double(height) / scale).rounded())))
            let left = (image.width - cropWidth) / 2, top = (image.height - cropHeight) / 2
            source = image.cropped(x: left, y: top, width: cropWidth, height: cropHeight)
            placement = Placement(
                scaleX: Double(width) / Double(cropWidth), scaleY: Double(height) / Double(cropHeight),
                offsetX: -Double(left) * Double(width) / Double(cropWidth),
                offsetY: -Double(top) * Double(height) / Double(cropHeight))
        }
        let resized = try resize(source, width: targetWidth, height: targetHeight)
        guard targetWidth != width || targetHeight != height else { return (resized, placement) }
        // Letterbox: paste the resized image into the middle of a black canvas.
        var canvas = [Float](repeating: 0, count: 3 * width * height)
        let ox = Int(placement.offsetX), oy = Int(placement.offsetY)
        for c in 0..<3 {
            for y in 0..<targetHeight {
                for x in 0..<targetWidth {
                    canvas[(c * height + y + oy) * width + x + ox] = resized[(c * targetHeight + y) * targetWidth + x]
                }
            }
        }
        return (canvas, placement)
    }

    /// CHW floats in [0, 1] of `image` resized to width × height.
    static func resize(_ image: RGBImage, width: Int, height: Int) throws -> [Float] {
        let planeSize = image.width * image.height
        var chw = [Float](repeating: 0, count: 3 * planeSize)
        image.pixels.withUnsafeBufferPointer { rgb in
            for i in 0..<planeSize {
                chw[i] = Float(rgb[3 * i]) / 255
                chw[planeSize + i] = Float(rgb[3 * i + 1]) / 255
                chw[2 * planeSize + i] = Float(rgb[3 * i + 2]) / 255
            }
        }
        if image.width == width && image.height == height { return chw }
        let tensor = try Tensor(chw, shape: [1, 3, image.height, image.width])
        let shrinking = width < image.width || height < image.height
        return try tensor.resized(height: height, width: width, antialias: shrinking).clamped(min: 0).clamped(max: 1)
            .floats()
    }
}

extension RGBImage {
    public func cropped(x: Int, y: Int, width: Int, height: Int) -> RGBImage {
        var out = [UInt8](repeating: 0, count: width * height * 3)
        for row in 0..<height {
            let s = ((y + row) * self.width + x) * 3
            out.replaceSubrange(row * width * 3..<(row + 1) * width * 3, with: pixels[s..<s + width * 3])
        }
        return RGBImage(width: width, height: height, pixels: out)
    }
}
