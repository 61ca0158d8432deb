/// A photo prepared for a detector: decoded no larger than the detector's letterboxed input keeps of it, twice over
/// (`Preprocessing.decodeSize`), as Classify decodes — a 12 MP JPEG for a 160-pixel yolo decodes at libjpeg's 1/8 —
/// with what maps the boxes found in it back to the photo's own upright pixels, as if it had been decoded whole.
public struct PhotoDetection: Sendable {
    public let image: RGBImage
    /// The photo's upright size (not the decoded one).
    public let width: Int
    public let height: Int

    /// Decodes `bytes` reduced for `detector`; decoding errors are `RGBImage.decode`'s.
    public init(
        _ bytes: [UInt8], for detector: any ObjectDetector, name: String = "image",
        pixelLimit: Int = RGBImage.defaultPixelLimit
    ) throws {
        let upright = try? RGBImage.size(of: bytes, name: name)
        let input = (width: detector.header.inputWidth, height: detector.header.inputHeight)
        let atLeast = upright.map { Preprocessing.decodeSize(of: $0, input: input, scaling: .fit) }
        image = try RGBImage.decode(bytes, name: name, pixelLimit: pixelLimit, atLeast: atLeast)
        width = upright?.width ?? image.width
        height = upright?.height ?? image.height
    }

    /// Boxes found in `image` in the photo's pixels.
    public func mapped(_ found: [Detection]) -> [Detection] {
        let sx = Double(width) / Double(image.width), sy = Double(height) / Double(image.height)
        return found.map { d in
            var mapped = d
            mapped.box = Box(x: d.box.x * sx, y: d.box.y * sy, width: d.box.width * sx, height: d.box.height * sy)
            return mapped
        }
    }
}
