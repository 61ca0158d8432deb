internal import CProtobufC

/// What generated message types implement so `ProtobufCCodec` can move them in and out of protobuf-c.
protocol ProtobufCBridged: ProtoMessage {
    /// The message's protobuf-c layout, looked up once.
    static var protoSchema: MessageSchema { get }
    /// Reads every field from an unpacked C message.
    init(reading reader: ProtoReader)
    /// Writes every field into a freshly initialised C message.
    func write(to writer: ProtoWriter)
}

/// Encodes and decodes generated messages with protobuf-c's own packer and parser.
enum ProtobufCCodec {
    /// Builds the C message in an arena, then `protobuf_c_message_pack`s it.
    static func encode<Message: ProtobufCBridged>(_ message: Message) -> [UInt8] {
        let arena = Arena()
        let schema = Message.protoSchema
        let cMessage = ProtoWriter.newMessage(schema, in: arena)
        message.write(to: ProtoWriter(message: cMessage, schema: schema, arena: arena))
        return withExtendedLifetime(arena) {
            let packable = UnsafePointer(cMessage.assumingMemoryBound(to: ProtobufCMessage.self))
            let size = protobuf_c_message_get_packed_size(packable)
            return [UInt8](unsafeUninitializedCapacity: size) { buffer, count in
                guard let base = buffer.baseAddress else { return }
                count = protobuf_c_message_pack(packable, base)
                precondition(count == size, "protobuf-c packed \(count) bytes, sized \(size)")
            }
        }
    }

    /// `protobuf_c_message_unpack`s the bytes, reads the C message into Swift values, frees it.
    static func decode<Message: ProtobufCBridged>(_ bytes: [UInt8]) throws -> Message {
        let schema = Message.protoSchema
        let unpacked = bytes.withUnsafeBufferPointer { buffer in
            protobuf_c_message_unpack(schema.descriptor, nil, buffer.count, buffer.baseAddress)
        }
        guard let unpacked else { throw SchemaError(messageName: schema.name, byteCount: bytes.count) }
        defer { protobuf_c_message_free_unpacked(unpacked, nil) }
        return Message(reading: ProtoReader(message: UnsafeRawPointer(unpacked), schema: schema))
    }
}
