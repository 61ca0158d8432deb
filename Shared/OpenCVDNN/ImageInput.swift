import OpenCVShim

/// 8-bit RGB pixels, rows top to bottom: what a network's image input is made from.
public struct RGBPixels: Sendable {
    public let width: Int
    public let height: Int
    /// width × height × 3 bytes.
    public let bytes: [UInt8]

    public init(width: Int, height: Int, bytes: [UInt8]) {
        precondition(width > 0 && height > 0 && bytes.count == width * height * 3, "RGB pixels of the wrong size")
        self.width = width
        self.height = height
        self.bytes = bytes
    }
}

/// How pixels become a network's input: channel order and per-value normalisation (p / 255 - mean) / std.
public struct ImageNormalisation: Sendable, Hashable {
    public var bgr: Bool
    public var mean: Float
    public var std: Float

    public init(bgr: Bool, mean: Float, std: Float) {
        self.bgr = bgr
        self.mean = mean
        self.std = std
    }
}

extension RGBPixels {
    /// A channel-first input tensor of `canvasWidth` × `canvasHeight`: the rectangle `crop` (x, y, width, height)
    /// resized to `size` at the canvas's top-left, the rest 0 (mid-grey after normalisation). Done by OpenCV, which
    /// resizes by area when shrinking (a phone photo to a network's few hundred pixels without aliasing).
    public func networkInput(
        crop: (x: Int, y: Int, width: Int, height: Int), size: (width: Int, height: Int),
        canvasWidth: Int, canvasHeight: Int, normalisation: ImageNormalisation
    ) throws -> [Float] {
        var output = [Float](repeating: 0, count: 3 * canvasWidth * canvasHeight)
        let status = bytes.withUnsafeBufferPointer { rgb in
            output.withUnsafeMutableBufferPointer { out in
                dnn_image_input(
                    rgb.baseAddress, Int32(width), Int32(height), Int32(crop.x), Int32(crop.y), Int32(crop.width),
                    Int32(crop.height), Int32(size.width), Int32(size.height), Int32(canvasWidth), Int32(canvasHeight),
                    normalisation.bgr ? 1 : 0, normalisation.mean, normalisation.std, out.baseAddress)
            }
        }
        guard status == 0 else { throw DNNError(message: String(cString: dnn_last_error())) }
        return output
    }
}
