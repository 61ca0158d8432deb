import OpenCVShim
import Synchronization

/// A failure inside OpenCV's DNN module, with its message.
public struct DNNError: Error, CustomStringConvertible, Sendable {
    public let message: String
    public var description: String { message }
}

/// An ONNX model run by OpenCV's DNN module. OpenCV's networks are not thread-safe, so forwards take turns: code
/// that runs one on several threads at once gives each thread its own instance (the mutex is then never contended).
public final class ONNXNetwork: Sendable {
    private let handle: Mutex<dnn_network?>

    /// Parses the model; a file that is not ONNX, or uses operators OpenCV lacks, throws.
    public init(bytes: [UInt8]) throws {
        var network: dnn_network?
        let status = bytes.withUnsafeBufferPointer { dnn_load_onnx($0.baseAddress, $0.count, &network) }
        guard status == 0, let network else { throw DNNError(message: String(cString: dnn_last_error())) }
        handle = Mutex(network)
    }

    deinit { handle.withLock { if let network = $0 { dnn_free(network) } } }

    /// The first output (values and shape) for an input tensor of `shape`.
    public func forward(_ input: [Float], shape: [Int]) throws -> (values: [Float], shape: [Int]) {
        precondition(input.count == shape.reduce(1, *), "the input does not fill its shape")
        return try handle.withLock { network in
            var output: UnsafeMutablePointer<Float>?
            var outShape = [Int32](repeating: 0, count: 8)
            var outDims: Int32 = 8
            let sizes = shape.map { Int32($0) }
            let status = input.withUnsafeBufferPointer { values in
                sizes.withUnsafeBufferPointer { dims in
                    dnn_forward(
                        network, values.baseAddress, dims.baseAddress, Int32(dims.count), &output, &outShape, &outDims)
                }
            }
            guard status == 0, let output else { throw DNNError(message: String(cString: dnn_last_error())) }
            defer { dnn_free_floats(output) }
            let resultShape = outShape.prefix(Int(outDims)).map(Int.init)
            let count = resultShape.reduce(1, *)
            return (Array(UnsafeBufferPointer(start: output, count: count)), resultShape)
        }
    }
}
