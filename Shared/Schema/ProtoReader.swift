/// Reads the fields of an unpacked protobuf-c message by field number; used by generated `init(reading:)`.
/// The method follows from the Swift type: `value` for fields without presence, `optional` for proto3
/// `optional` fields and message fields, `repeated` for repeated fields.
@usableFromInline package struct ProtoReader {
    @usableFromInline package let message: UnsafeRawPointer
    @usableFromInline package let schema: MessageSchema

    @inlinable package init(message: UnsafeRawPointer, schema: MessageSchema) {
        self.message = message
        self.schema = schema
    }

    @inlinable package func value<Value: ProtoScalar>(_ number: UInt32) -> Value {
        Value.load(from: message + schema.field(number, Value.storage, .value).offset)
    }

    @inlinable package func value<Value: ProtoEnum>(_ number: UInt32) -> Value {
        Value(rawValue: Int32.load(from: message + schema.field(number, .enumValue, .value).offset))
    }

    @inlinable package func optional<Value: ProtoScalar>(_ number: UInt32) -> Value? {
        let field = schema.field(number, Value.storage, .optional)
        return isPresent(field) ? Value.load(from: message + field.offset) : nil
    }

    @inlinable package func optional<Value: ProtoEnum>(_ number: UInt32) -> Value? {
        let field = schema.field(number, .enumValue, .optional)
        return isPresent(field) ? Value(rawValue: Int32.load(from: message + field.offset)) : nil
    }

    @inlinable package func optional<Value: ProtobufCBridged>(_ number: UInt32) -> Value? {
        let field = schema.messageField(number, .optional, Value.self)
        guard isPresent(field), let child = message.load(fromByteOffset: field.offset, as: UnsafeRawPointer?.self)
        else { return nil }
        return Value(reading: ProtoReader(message: child, schema: Value.protoSchema))
    }

    @inlinable package func repeated<Value: ProtoScalar>(_ number: UInt32) -> [Value] {
        elements(schema.field(number, Value.storage, .repeated), stride: Value.stride, Value.load)
    }

    @inlinable package func repeated<Value: ProtoEnum>(_ number: UInt32) -> [Value] {
        elements(schema.field(number, .enumValue, .repeated), stride: Int32.stride) {
            Value(rawValue: Int32.load(from: $0))
        }
    }

    @inlinable package func repeated<Value: ProtobufCBridged>(_ number: UInt32) -> [Value] {
        let childSchema = Value.protoSchema
        return elements(
            schema.messageField(number, .repeated, Value.self), stride: MemoryLayout<UnsafeRawPointer>.stride
        ) {
            Value(reading: ProtoReader(message: $0.load(as: UnsafeRawPointer.self), schema: childSchema))
        }
    }

    /// Oneof members are present when the case says so; other fields always (a message when non-NULL).
    @inlinable package func isPresent(_ field: MessageSchema.Field) -> Bool {
        !field.isOneofMember || message.load(fromByteOffset: field.quantifierOffset, as: UInt32.self) == field.number
    }

    @inlinable package func elements<Element>(
        _ field: MessageSchema.Field, stride: Int, _ load: (UnsafeRawPointer) -> Element
    ) -> [Element] {
        let count = message.load(fromByteOffset: field.quantifierOffset, as: Int.self)
        guard count > 0, let base = message.load(fromByteOffset: field.offset, as: UnsafeRawPointer?.self) else {
            return []
        }
        return (0..<count).map { load(base + $0 * stride) }
    }
}
