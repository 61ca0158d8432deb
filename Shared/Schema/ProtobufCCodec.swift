internal import CProtobufC

/// What generated message types implement so `ProtobufCCodec` can move them in and out of protobuf-c.
@usableFromInline package protocol ProtobufCBridged: ProtoMessage {
    /// The message's protobuf-c layout, looked up once.
    static var protoSchema: MessageSchema { get }
    /// Reads every field from an unpacked C message.
    init(reading reader: ProtoReader)
    /// Writes every field into a freshly initialised C message.
    func write(to writer: ProtoWriter)
}

/// Encodes and decodes generated messages with protobuf-c's own packer and parser.
@usableFromInline package enum ProtobufCCodec {
    /// Builds the C message in an arena, then `protobuf_c_message_pack`s it into the memory that
    /// `destination` provides for its packed size.
    @usableFromInline package static func encode<Message: ProtobufCBridged>(
        _ message: Message, into destination: (Int, (UnsafeMutableRawBufferPointer) -> Void) -> Void
    ) {
        Arena.with { arena in
            let schema = Message.protoSchema
            let cMessage = ProtoWriter.newMessage(schema, in: arena)
            message.write(to: ProtoWriter(message: cMessage, schema: schema, arena: arena))
            let packable = UnsafePointer(cMessage.assumingMemoryBound(to: ProtobufCMessage.self))
            let size = protobuf_c_message_get_packed_size(packable)
            destination(size) { buffer in
                precondition(buffer.count == size, "protobuf-c needs \(size) bytes, got \(buffer.count)")
                guard size > 0 else { return }
                let packed = protobuf_c_message_pack(packable, buffer.baseAddress!.assumingMemoryBound(to: UInt8.self))
                precondition(packed == size, "protobuf-c packed \(packed) bytes, sized \(size)")
            }
        }
    }

    /// `protobuf_c_message_unpack`s the bytes into an arena and reads the C message into Swift values.
    /// The arena frees the unpacked message as a whole (instead of `protobuf_c_message_free_unpacked`
    /// freeing it piece by piece), also when unpacking fails halfway.
    ///
    /// A string field with a NUL inside is refused (protobuf-c, and C code after it, would cut the
    /// text there: `zel\0xyz` read as `zel`) unless `allowingNUL`, for a caller that answers it itself.
    @usableFromInline package static func decode<Message: ProtobufCBridged>(_ bytes: UnsafeRawBufferPointer, allowingNUL: Bool = false) throws -> Message {
        let schema = Message.protoSchema
        return try Arena.with { arena in
            var allocator = arena.protobufCAllocator
            let unpacked = protobuf_c_message_unpack(
                schema.descriptor, &allocator, bytes.count, bytes.baseAddress?.assumingMemoryBound(to: UInt8.self))
            guard let unpacked else { throw SchemaError(messageName: schema.name, byteCount: bytes.count) }
            let message = Message(reading: ProtoReader(message: UnsafeRawPointer(unpacked), schema: schema))
            if !allowingNUL, arena.sawEmbeddedNUL {
                throw SchemaError(messageName: schema.name, byteCount: bytes.count, reason: "a string field contains a NUL character")
            }
            return message
        }
    }
}
