internal import CProtobufC

/// The protobuf-c layout of one message type: its descriptor and, per field, where and how the
/// C struct stores it. Built once per generated type (a `static let`) and shared by every encode/decode.
// immutable; the descriptor is static C data
@usableFromInline package final class MessageSchema: @unchecked Sendable {
    /// How a field's value is represented in the C struct.
    @usableFromInline package enum Storage: Equatable {
        case int32, uint32, int64, uint64, float, double, bool, enumValue, string, bytes, message
    }

    /// How generated code sees the field: a plain value, a Swift optional or an array.
    @usableFromInline package enum Shape: Equatable {
        /// A proto3 field without presence.
        case value
        /// A proto3 `optional` field, which protoc-c sees as the only member of a oneof (see
        /// Proto/generate.sh), or a singular message field (absent when its pointer is NULL).
        case optional
        /// `n_<field>` at `quantifierOffset`, an array pointer at `offset`.
        case repeated
    }

    @usableFromInline package struct Field {
        @usableFromInline package let number: UInt32
        @usableFromInline package let storage: Storage
        @usableFromInline package let shape: Shape
        /// Presence is the oneof case at `quantifierOffset` being equal to `number`.
        @usableFromInline package let isOneofMember: Bool
        @usableFromInline package let offset: Int
        @usableFromInline package let quantifierOffset: Int
        /// For message fields: the element type's descriptor.
        @usableFromInline let messageDescriptor: UnsafeRawPointer?
    }

    @usableFromInline package let name: String
    let descriptor: UnsafePointer<ProtobufCMessageDescriptor>
    /// `sizeof` the C struct.
    @usableFromInline package let size: Int
    /// In descriptor order (by field number).
    @usableFromInline let fields: [Field]
    /// Field number → index in `fields`, for numbers up to `fields.count * 4` (dense tables for the usual
    /// small, mostly consecutive numbers); protobuf-c finds larger ones.
    @usableFromInline let indexByNumber: [Int32]

    /// The layout of the message `name`, from the protobuf-c descriptor that its C target's registry (generated
    /// by Proto/generate.sh) answers for that name.
    @usableFromInline package init(named name: String, descriptor: UnsafeRawPointer?) {
        guard let descriptor = descriptor?.assumingMemoryBound(to: ProtobufCMessageDescriptor.self) else {
            preconditionFailure("no protobuf-c descriptor for \(name): run Proto/generate.sh")
        }
        self.name = name
        self.descriptor = descriptor
        size = descriptor.pointee.sizeof_message
        let count = Int(descriptor.pointee.n_fields)
        fields = UnsafeBufferPointer(start: descriptor.pointee.fields, count: count).map(Field.init)
        var table = [Int32](repeating: -1, count: count * 4 + 1)
        for (index, field) in fields.enumerated() where Int(field.number) < table.count {
            table[Int(field.number)] = Int32(index)
        }
        indexByNumber = table
    }

    /// The field `number`, checked against what the generated code expects (a mismatch means the
    /// generated Swift and C are out of sync: run Proto/generate.sh).
    /// Inlined into generated code (every field read and write asks it), the C lookup kept out of line.
    @inlinable package func field(_ number: UInt32, _ storage: Storage, _ shape: Shape) -> Field {
        let field = fields[index(of: number)]
        precondition(
            field.storage == storage && field.shape == shape,
            "\(name) field \(number) is \(field.shape) \(field.storage), not \(shape) \(storage): run Proto/generate.sh"
        )
        return field
    }

    /// A message field, also checked to hold `Value`.
    @inlinable package func messageField<Value: ProtobufCBridged>(_ number: UInt32, _ shape: Shape, _ type: Value.Type)
        -> Field
    {
        let field = field(number, .message, shape)
        precondition(
            field.messageDescriptor == Value.protoSchema.descriptorAddress,
            "\(name) field \(number) does not hold \(Value.protoName): run Proto/generate.sh")
        return field
    }

    @inlinable func index(of number: UInt32) -> Int {
        if Int(number) < indexByNumber.count {
            let index = indexByNumber[Int(number)]
            if index >= 0 { return Int(index) }
        }
        return sparseIndex(of: number)
    }

    /// A number past the dense table: protobuf-c's binary search.
    @usableFromInline func sparseIndex(of number: UInt32) -> Int {
        if let field = protobuf_c_message_descriptor_get_field(descriptor, number) {
            return descriptor.pointee.fields.distance(to: field)
        }
        preconditionFailure("\(name) has no field \(number): run Proto/generate.sh")
    }

    /// The descriptor's address, for checking a message field's type.
    @usableFromInline var descriptorAddress: UnsafeRawPointer { UnsafeRawPointer(descriptor) }
}

extension MessageSchema.Field {
    init(_ descriptor: ProtobufCFieldDescriptor) {
        number = descriptor.id
        offset = Int(descriptor.offset)
        quantifierOffset = Int(descriptor.quantifier_offset)
        messageDescriptor = descriptor.type == PROTOBUF_C_TYPE_MESSAGE ? descriptor.descriptor : nil
        switch descriptor.type {
        case PROTOBUF_C_TYPE_INT32, PROTOBUF_C_TYPE_SINT32, PROTOBUF_C_TYPE_SFIXED32: storage = .int32
        case PROTOBUF_C_TYPE_UINT32, PROTOBUF_C_TYPE_FIXED32: storage = .uint32
        case PROTOBUF_C_TYPE_INT64, PROTOBUF_C_TYPE_SINT64, PROTOBUF_C_TYPE_SFIXED64: storage = .int64
        case PROTOBUF_C_TYPE_UINT64, PROTOBUF_C_TYPE_FIXED64: storage = .uint64
        case PROTOBUF_C_TYPE_FLOAT: storage = .float
        case PROTOBUF_C_TYPE_DOUBLE: storage = .double
        case PROTOBUF_C_TYPE_BOOL: storage = .bool
        case PROTOBUF_C_TYPE_ENUM: storage = .enumValue
        case PROTOBUF_C_TYPE_STRING: storage = .string
        case PROTOBUF_C_TYPE_BYTES: storage = .bytes
        case PROTOBUF_C_TYPE_MESSAGE: storage = .message
        default: preconditionFailure("unknown protobuf-c type \(descriptor.type.rawValue) of field \(descriptor.id)")
        }
        isOneofMember = descriptor.flags & PROTOBUF_C_FIELD_FLAG_ONEOF.rawValue != 0
        switch descriptor.label {
        case PROTOBUF_C_LABEL_REPEATED: shape = .repeated
        case PROTOBUF_C_LABEL_NONE: shape = isOneofMember || storage == .message ? .optional : .value
        default: preconditionFailure("field \(descriptor.id) has a proto2 label; Schema supports proto3 only")
        }
    }
}
