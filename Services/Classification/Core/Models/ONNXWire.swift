/// The protobuf wire format of the few onnx.proto messages an exported model needs, written by hand.
///
/// Why not Proto/generate.sh: ONNX's published onnx.proto (github.com/onnx/onnx, Apache License 2.0) is proto2 in
/// package `onnx`, and schema-gen refuses proto2 and files outside Proto/menagerie; protobuf-c would also need the
/// whole model in C structs before one byte is written. An exported model is write-only here (OpenCV's DNN module
/// reads it back), so the messages below — their field numbers as onnx.proto numbers them — are all it takes.
enum ONNXWire {
    /// One message's bytes, fields appended in the order written.
    struct Message {
        var bytes: [UInt8] = []

        mutating func varint(_ field: Int, _ value: UInt64) {
            key(field, 0)
            append(value)
        }
        mutating func int(_ field: Int, _ value: Int) { varint(field, UInt64(bitPattern: Int64(value))) }
        mutating func float(_ field: Int, _ value: Float) {
            key(field, 5)
            withUnsafeBytes(of: value.bitPattern.littleEndian) { bytes += $0 }
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

    /// TensorProto.DataType.FLOAT.
    static let float32 = 1

    /// TensorProto: dims = 1, data_type = 2, name = 8, raw_data = 9 (little-endian float32).
    static func tensor(_ name: String, shape: [Int], values: [Float]) -> Message {
        var t = Message()
        for d in shape { t.int(1, d) }
        t.int(2, float32)
        t.string(8, name)
        var raw = [UInt8]()
        raw.reserveCapacity(values.count * 4)
        for v in values { withUnsafeBytes(of: v.bitPattern.littleEndian) { raw += $0 } }
        t.bytes(9, raw)
        return t
    }

    /// An int64 TensorProto (data_type 7): the shapes and indices Reshape and Slice take as inputs.
    static func int64Tensor(_ name: String, _ values: [Int]) -> Message {
        var t = Message()
        t.int(1, values.count)
        t.int(2, 7)
        t.string(8, name)
        var raw = [UInt8]()
        for v in values { withUnsafeBytes(of: Int64(v).littleEndian) { raw += $0 } }
        t.bytes(9, raw)
        return t
    }

    /// An AttributeProto's value: INT (i = 3, type 2), FLOAT (f = 2, type 1), INTS (ints = 8, type 7), STRING (s = 4,
    /// type 3).
    enum Attribute {
        case int(Int), float(Float), ints([Int]), string(String)
    }

    /// NodeProto: input = 1, output = 2, name = 3, op_type = 4, attribute = 5 (AttributeProto: name = 1, type = 20).
    static func node(_ op: String, _ inputs: [String], _ output: String, _ attributes: [(String, Attribute)] = [])
        -> Message
    {
        var n = Message()
        for i in inputs { n.string(1, i) }
        n.string(2, output)
        n.string(3, output)
        n.string(4, op)
        for (name, value) in attributes {
            var a = Message()
            a.string(1, name)
            switch value {
            case .int(let i):
                a.int(3, i)
                a.int(20, 2)
            case .float(let f):
                a.float(2, f)
                a.int(20, 1)
            case .ints(let list):
                for i in list { a.int(8, i) }
                a.int(20, 7)
            case .string(let text):
                a.string(4, text)
                a.int(20, 3)
            }
            n.message(5, a)
        }
        return n
    }

    /// ValueInfoProto (name = 1, type = 2) of a float tensor: TypeProto.tensor_type = 1 {elem_type = 1,
    /// shape = 2 {dim = 1 {dim_value = 1}}}.
    static func valueInfo(_ name: String, shape: [Int], doc: String) -> Message {
        var dims = Message()
        for d in shape {
            var dim = Message()
            dim.int(1, d)
            dims.message(1, dim)
        }
        var tensorType = Message()
        tensorType.int(1, float32)
        tensorType.message(2, dims)
        var type = Message()
        type.message(1, tensorType)
        var info = Message()
        info.string(1, name)
        info.message(2, type)
        info.string(3, doc)
        return info
    }

    /// ModelProto: ir_version = 1, producer_name = 2, producer_version = 3, doc_string = 6, graph = 7, opset_import = 8
    /// (OperatorSetIdProto: domain = 1, version = 2), metadata_props = 14 (StringStringEntryProto: key = 1,
    /// value = 2); GraphProto: node = 1, name = 2, initializer = 5, input = 11, output = 12.
    static func model(
        name: String, doc: String, nodes: [Message], initializers: [Message], inputs: [Message],
        outputs: [Message], metadata: [(String, String)]
    ) -> [UInt8] {
        var graph = Message()
        for n in nodes { graph.message(1, n) }
        graph.string(2, name)
        for i in initializers { graph.message(5, i) }
        for i in inputs { graph.message(11, i) }
        for o in outputs { graph.message(12, o) }
        var opset = Message()
        opset.string(1, "")
        opset.int(2, opsetVersion)
        var model = Message()
        model.int(1, irVersion)
        model.string(2, "menagerie")
        model.string(3, "1")
        model.string(6, doc)
        model.message(7, graph)
        model.message(8, opset)
        for (key, value) in metadata {
            var entry = Message()
            entry.string(1, key)
            entry.string(2, value)
            model.message(14, entry)
        }
        return model.bytes
    }

    /// IR version 7 with the default domain at opset 13: what onnxruntime, OpenCV 4.6+ and Core ML's converters all
    /// read, and every operator the export writes is unchanged in it.
    static let irVersion = 7
    static let opsetVersion = 13

    /// A ModelProto's metadata_props (field 14), read by walking its top-level fields and skipping every other one;
    /// empty for bytes that are no protobuf (OpenCV says what is wrong with them when the model is loaded).
    static func metadata(_ bytes: [UInt8]) -> [String: String] {
        var reader = Reader(bytes: bytes[...])
        var entries: [String: String] = [:]
        while let (field, value) = reader.field() {
            guard field == 14, case .bytes(let entry) = value else { continue }
            var inner = Reader(bytes: entry)
            var key: String?, text: String?
            while let (f, v) = inner.field() {
                if case .bytes(let b) = v {
                    if f == 1 {
                        key = String(decoding: b, as: UTF8.self)
                    } else if f == 2 {
                        text = String(decoding: b, as: UTF8.self)
                    }
                }
            }
            if !inner.failed, let key, let text { entries[key] = text }
        }
        return reader.failed ? [:] : entries
    }

    /// Where the first tensor that keeps its data in an external file says it is (TensorProto.external_data = 13, its
    /// "location" entry), or nil when every tensor holds its own. A model is imported as one file: an external
    /// tensor's location names a path on the server (`../../etc/passwd`, a multi-GB file) that nothing may read on a
    /// client's say. Walks every place a tensor can be — ModelProto.graph (7) and functions (25); GraphProto.node (1),
    /// initializer (5), sparse_initializer (15); NodeProto.attribute (5); AttributeProto.t (5), g (6), tensors (10),
    /// graphs (11), sparse_tensor (22), sparse_tensors (23); SparseTensorProto.values (1), indices (2); FunctionProto.node
    /// (7) — to a nesting depth of 64 (deeper is refused too: no real model nests so).
    static func externalDataLocation(_ bytes: [UInt8]) -> String? {
        enum Kind { case model, graph, node, attribute, sparse, tensor, function }
        func walk(_ bytes: ArraySlice<UInt8>, _ kind: Kind, depth: Int) -> String? {
            guard depth < 64 else { return "(nested deeper than 64 levels)" }
            var reader = Reader(bytes: bytes)
            while let (field, value) = reader.field() {
                guard case .bytes(let inner) = value else { continue }
                let next: Kind? =
                    switch (kind, field) {
                    case (.model, 7), (.attribute, 6), (.attribute, 11): .graph
                    case (.model, 25): .function
                    case (.graph, 1), (.function, 7): .node
                    case (.graph, 5), (.attribute, 5), (.attribute, 10), (.sparse, 1), (.sparse, 2): .tensor
                    case (.graph, 15), (.attribute, 22), (.attribute, 23): .sparse
                    case (.node, 5): .attribute
                    default: nil
                    }
                if kind == .tensor, field == 13 {
                    var entry = Reader(bytes: inner)
                    var key = "", text = ""
                    while let (f, v) = entry.field() {
                        if case .bytes(let b) = v {
                            if f == 1 {
                                key = String(decoding: b, as: UTF8.self)
                            } else if f == 2 {
                                text = String(decoding: b, as: UTF8.self)
                            }
                        }
                    }
                    if key == "location" || entry.failed { return text.isEmpty ? "(no location given)" : text }
                    continue
                }
                if let next, let found = walk(inner, next, depth: depth + 1) { return found }
            }
            return nil
        }
        return walk(bytes[...], .model, depth: 0)
    }

    struct Reader {
        var bytes: ArraySlice<UInt8>
        var failed = false
        enum Value { case scalar, bytes(ArraySlice<UInt8>) }

        mutating func varint() -> UInt64? {
            var value: UInt64 = 0, shift: UInt64 = 0
            while let byte = bytes.first, shift < 64 {
                bytes.removeFirst()
                value |= UInt64(byte & 0x7F) << shift
                if byte < 0x80 { return value }
                shift += 7
            }
            return nil
        }

        /// The next field, or nil at the end or on malformed bytes (then `failed`).
        mutating func field() -> (Int, Value)? {
            guard !bytes.isEmpty, !failed else { return nil }
            guard let key = varint() else {
                failed = true
                return nil
            }
            switch key & 7 {
            case 0:
                guard varint() != nil else {
                    failed = true
                    return nil
                }
                return (Int(key >> 3), .scalar)
            case 1, 5:
                let size = key & 7 == 1 ? 8 : 4
                guard bytes.count >= size else {
                    failed = true
                    return nil
                }
                bytes.removeFirst(size)
                return (Int(key >> 3), .scalar)
            case 2:
                guard let length = varint(), length <= UInt64(bytes.count) else {
                    failed = true
                    return nil
                }
                let value = bytes.prefix(Int(length))
                bytes.removeFirst(Int(length))
                return (Int(key >> 3), .bytes(value))
            default:
                failed = true
                return nil
            }
        }
    }
}
