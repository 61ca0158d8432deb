internal import CProtobufC

/// Fills a protobuf-c message that lives in an `Arena`; used by generated `write(to:)`. One `set`
/// overload per Swift shape: plain values, optionals (proto3 `optional` and message fields), arrays.
@usableFromInline package struct ProtoWriter {
    @usableFromInline package let message: UnsafeMutableRawPointer
    @usableFromInline package let schema: MessageSchema
    @usableFromInline package let arena: Arena

    @inlinable package init(message: UnsafeMutableRawPointer, schema: MessageSchema, arena: Arena) {
        self.message = message
        self.schema = schema
        self.arena = arena
    }

    /// A C message of `schema`'s type in `arena`, initialised by `protobuf_c_message_init`.
    @usableFromInline package static func newMessage(_ schema: MessageSchema, in arena: Arena)
        -> UnsafeMutableRawPointer
    {
        let message = arena.allocate(schema.size)
        protobuf_c_message_init(schema.descriptor, message)
        return message
    }

    @inlinable package func set<Value: ProtoScalar>(_ number: UInt32, _ value: Value) {
        value.store(at: message + schema.field(number, Value.storage, .value).offset, arena: arena)
    }

    @inlinable package func set<Value: ProtoEnum>(_ number: UInt32, _ value: Value) {
        value.rawValue.store(at: message + schema.field(number, .enumValue, .value).offset, arena: arena)
    }

    @inlinable package func set<Value: ProtoScalar>(_ number: UInt32, _ value: Value?) {
        let field = schema.field(number, Value.storage, .optional)
        guard let value else { return }
        value.store(at: message + field.offset, arena: arena)
        markPresent(field)
    }

    @inlinable package func set<Value: ProtoEnum>(_ number: UInt32, _ value: Value?) {
        let field = schema.field(number, .enumValue, .optional)
        guard let value else { return }
        value.rawValue.store(at: message + field.offset, arena: arena)
        markPresent(field)
    }

    @inlinable package func set<Value: ProtobufCBridged>(_ number: UInt32, _ value: Value?) {
        let field = schema.messageField(number, .optional, Value.self)
        guard let value else { return }
        message.storeBytes(of: child(value), toByteOffset: field.offset, as: UnsafeMutableRawPointer.self)
        markPresent(field)
    }

    @inlinable package func set<Value: ProtoScalar>(_ number: UInt32, _ values: [Value]) {
        let field = schema.field(number, Value.storage, .repeated)
        storeElements(field, values, stride: Value.stride) { $1.store(at: $0, arena: arena) }
    }

    @inlinable package func set<Value: ProtoEnum>(_ number: UInt32, _ values: [Value]) {
        let field = schema.field(number, .enumValue, .repeated)
        storeElements(field, values, stride: Int32.stride) { $1.rawValue.store(at: $0, arena: arena) }
    }

    @inlinable package func set<Value: ProtobufCBridged>(_ number: UInt32, _ values: [Value]) {
        let field = schema.messageField(number, .repeated, Value.self)
        storeElements(field, values, stride: MemoryLayout<UnsafeMutableRawPointer>.stride) {
            $0.storeBytes(of: child($1), as: UnsafeMutableRawPointer.self)
        }
    }

    @inlinable package func child<Value: ProtobufCBridged>(_ value: Value) -> UnsafeMutableRawPointer {
        let childSchema = Value.protoSchema
        let child = Self.newMessage(childSchema, in: arena)
        value.write(to: ProtoWriter(message: child, schema: childSchema, arena: arena))
        return child
    }

    @inlinable package func markPresent(_ field: MessageSchema.Field) {
        guard field.isOneofMember else { return }
        message.storeBytes(of: field.number, toByteOffset: field.quantifierOffset, as: UInt32.self)
    }

    @inlinable package func storeElements<Element>(
        _ field: MessageSchema.Field, _ values: [Element], stride: Int,
        _ store: (UnsafeMutableRawPointer, Element) -> Void
    ) {
        guard !values.isEmpty else { return }
        let base = arena.allocate(values.count * stride)
        for (index, value) in values.enumerated() { store(base + index * stride, value) }
        message.storeBytes(of: values.count, toByteOffset: field.quantifierOffset, as: Int.self)
        message.storeBytes(of: base, toByteOffset: field.offset, as: UnsafeMutableRawPointer.self)
    }
}
