import Foundation

/// Writes small ONNX models by hand (the protobuf wire format of onnx.proto's few messages they need), so tests
/// have ONNX files without downloading anything or needing Python's onnx package.
enum ONNXBuilder {
    struct Message {
        var bytes: [UInt8] = []

        mutating func varint(_ field: Int, _ value: UInt64) {
            key(field, 0)
            append(value)
        }
        mutating func bytes(_ field: Int, _ data: [UInt8]) {
            key(field, 2)
            append(UInt64(data.count))
            bytes += data
        }
        mutating func string(_ field: Int, _ text: String) { bytes(field, Array(text.utf8)) }
        mutating func message(_ field: Int, _ message: Message) { bytes(field, message.bytes) }

        private mutating func key(_ field: Int, _ wire: Int) { append(UInt64(field << 3 | wire)) }
        private mutating func append(_ value: UInt64) {
            var v = value
            while v >= 0x80 {
                bytes.append(UInt8(v & 0x7F) | 0x80)
                v >>= 7
            }
            bytes.append(UInt8(v))
        }
    }

    static func tensor(_ name: String, dims: [Int], floats: [Float]) -> Message {
        var t = Message()
        for d in dims { t.varint(1, UInt64(d)) }
        t.varint(2, 1)  // FLOAT
        t.string(8, name)
        t.bytes(9, floats.flatMap { value in withUnsafeBytes(of: value.bitPattern.littleEndian) { Array($0) } })
        return t
    }

    static func int64Tensor(_ name: String, _ values: [Int64]) -> Message {
        var t = Message()
        t.varint(1, UInt64(values.count))
        t.varint(2, 7)  // INT64
        t.string(8, name)
        t.bytes(9, values.flatMap { value in withUnsafeBytes(of: value.littleEndian) { Array($0) } })
        return t
    }

    static func node(_ op: String, _ inputs: [String], _ outputs: [String], ints: [String: Int] = [:]) -> Message {
        var n = Message()
        for i in inputs { n.string(1, i) }
        for o in outputs { n.string(2, o) }
        n.string(3, "\(op)_\(outputs[0])")
        n.string(4, op)
        for (name, value) in ints.sorted(by: { $0.key < $1.key }) {
            var a = Message()
            a.string(1, name)
            a.varint(3, UInt64(bitPattern: Int64(value)))
            a.varint(20, 2)  // INT
            n.message(5, a)
        }
        return n
    }

    static func valueInfo(_ name: String, _ shape: [Int]) -> Message {
        var dims = Message()
        for d in shape {
            var dim = Message()
            dim.varint(1, UInt64(d))
            dims.message(1, dim)
        }
        var tensorType = Message()
        tensorType.varint(1, 1)  // FLOAT
        tensorType.message(2, dims)
        var type = Message()
        type.message(1, tensorType)
        var info = Message()
        info.string(1, name)
        info.message(2, type)
        return info
    }

    static func model(nodes: [Message], initializers: [Message], input: Message, output: Message) -> [UInt8] {
        var graph = Message()
        for n in nodes { graph.message(1, n) }
        graph.string(2, "test")
        for i in initializers { graph.message(5, i) }
        graph.message(11, input)
        graph.message(12, output)
        var opset = Message()
        opset.string(1, "")
        opset.varint(2, 13)
        var model = Message()
        model.varint(1, 7)
        model.string(2, "menagerie-tests")
        model.message(7, graph)
        model.message(8, opset)
        return model.bytes
    }

    /// A classifier over `side`×`side` RGB input: mean of each channel, then `weights` (classes × 3) and `bias`.
    static func channelClassifier(side: Int, weights: [[Float]], bias: [Float]) -> [UInt8] {
        model(
            nodes: [
                node("GlobalAveragePool", ["x"], ["pooled"]),
                node("Flatten", ["pooled"], ["flat"], ints: ["axis": 1]),
                node("Gemm", ["flat", "W", "B"], ["y"], ints: ["transB": 1]),
            ],
            initializers: [
                tensor("W", dims: [weights.count, 3], floats: weights.flatMap { $0 }),
                tensor("B", dims: [bias.count], floats: bias),
            ],
            input: valueInfo("x", [1, 3, side, side]), output: valueInfo("y", [1, weights.count]))
    }

    /// A "detector" whose output is always `output` in the shape `shape` (e.g. YOLOv8's [1, 4 + classes, N]),
    /// whatever the image: channel means times zero weights plus the output as bias, reshaped.
    static func constantDetector(side: Int, output: [Float], shape: [Int]) -> [UInt8] {
        model(
            nodes: [
                node("GlobalAveragePool", ["x"], ["pooled"]),
                node("Flatten", ["pooled"], ["flat"], ints: ["axis": 1]),
                node("Gemm", ["flat", "W", "B"], ["flatOut"], ints: ["transB": 1]),
                node("Reshape", ["flatOut", "shape"], ["y"]),
            ],
            initializers: [
                tensor("W", dims: [output.count, 3], floats: [Float](repeating: 0, count: output.count * 3)),
                tensor("B", dims: [output.count], floats: output), int64Tensor("shape", shape.map(Int64.init)),
            ],
            input: valueInfo("x", [1, 3, side, side]), output: valueInfo("y", shape))
    }
}
