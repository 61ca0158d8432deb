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
///
/// `encode` and `decode` are `@inlinable`, so each message type's copy is specialized where the message is
/// generated (its API module): an unspecialized generic would move every decoded message through value witness
/// tables, which doubled the decode cost of a small envelope. What touches C stays behind the non-generic
/// functions below.
@usableFromInline package enum ProtobufCCodec {
    /// Builds the C message in an arena, then `protobuf_c_message_pack`s it into the memory that
    /// `destination` provides for its packed size.
    @inlinable package static func encode<Message: ProtobufCBridged>(
        _ message: Message, into destination: (Int, (UnsafeMutableRawBufferPointer) -> Void) -> Void
    ) {
        _ = encode(message, refusingNUL: false, into: destination)
    }

    /// `encode`, refusing a message with a string holding a NUL (protobuf-c's `char *` would end it there, and the
    /// receiver would read `a` for `a\0b`): `destination` is not called and the error says which message.
    @inlinable package static func encodeRefusingNUL<Message: ProtobufCBridged>(
        _ message: Message, into destination: (Int, (UnsafeMutableRawBufferPointer) -> Void) -> Void
    ) throws(SchemaError) {
        guard encode(message, refusingNUL: true, into: destination) else {
            throw SchemaError(
                messageName: Message.protoName, byteCount: 0,
                reason: "a string field contains a NUL character, which the encoding would cut there", encoding: true)
        }
    }

    /// Builds and packs `message`; false (nothing packed) when `refusingNUL` and a string held a NUL.
    @inlinable package static func encode<Message: ProtobufCBridged>(
        _ message: Message, refusingNUL: Bool, into destination: (Int, (UnsafeMutableRawBufferPointer) -> Void) -> Void
    ) -> Bool {
        var packed = true
        withArena { arena in
            let schema = Message.protoSchema
            let cMessage = ProtoWriter.newMessage(schema, in: arena)
            message.write(to: ProtoWriter(message: cMessage, schema: schema, arena: arena))
            if refusingNUL, sawEmbeddedNUL(arena) {
                packed = false
                return
            }
            let size = packedSize(cMessage)
            destination(size) { buffer in
                precondition(buffer.count == size, "protobuf-c needs \(size) bytes, got \(buffer.count)")
                guard size > 0 else { return }
                pack(cMessage, into: buffer)
            }
        }
        return packed
    }

    /// `protobuf_c_message_unpack`s the bytes into an arena and reads the C message into Swift values.
    /// The arena frees the unpacked message as a whole (instead of `protobuf_c_message_free_unpacked`
    /// freeing it piece by piece), also when unpacking fails halfway.
    ///
    /// A string field with a NUL inside is refused (protobuf-c, and C code after it, would cut the
    /// text there: `zel\0xyz` read as `zel`) unless `allowingNUL`, for a caller that answers it itself.
    @inlinable package static func decode<Message: ProtobufCBridged>(
        _ bytes: UnsafeRawBufferPointer, allowingNUL: Bool = false
    ) throws -> Message {
        let schema = Message.protoSchema
        var message: Message?
        try withArena { arena in
            guard let unpacked = unpack(bytes, schema, arena) else {
                throw SchemaError(messageName: schema.name, byteCount: bytes.count)
            }
            message = Message(reading: ProtoReader(message: unpacked, schema: schema))
            if !allowingNUL, sawEmbeddedNUL(arena) {
                throw SchemaError(
                    messageName: schema.name, byteCount: bytes.count, reason: "a string field contains a NUL character")
            }
        }
        return message.unsafelyUnwrapped
    }

    /// Runs `body` with a fresh arena (non-generic, so the generic callers need none of its internals).
    @usableFromInline package static func withArena(_ body: (Arena) throws -> Void) rethrows {
        try Arena.with(body)
    }

    @usableFromInline package static func packedSize(_ message: UnsafeMutableRawPointer) -> Int {
        protobuf_c_message_get_packed_size(UnsafePointer(message.assumingMemoryBound(to: ProtobufCMessage.self)))
    }

    /// Packs `message` into `buffer`, which has exactly its packed size.
    @usableFromInline package static func pack(
        _ message: UnsafeMutableRawPointer, into buffer: UnsafeMutableRawBufferPointer
    ) {
        let packed = protobuf_c_message_pack(
            UnsafePointer(message.assumingMemoryBound(to: ProtobufCMessage.self)),
            buffer.baseAddress!.assumingMemoryBound(to: UInt8.self))
        precondition(packed == buffer.count, "protobuf-c packed \(packed) bytes, sized \(buffer.count)")
    }

    /// The unpacked C message, or nil when the bytes are not a valid encoding of `schema`'s message.
    @usableFromInline package static func unpack(
        _ bytes: UnsafeRawBufferPointer, _ schema: MessageSchema, _ arena: Arena
    ) -> UnsafeRawPointer? {
        var allocator = arena.protobufCAllocator
        let unpacked = protobuf_c_message_unpack(
            schema.descriptor, &allocator, bytes.count, bytes.baseAddress?.assumingMemoryBound(to: UInt8.self))
        return unpacked.map { UnsafeRawPointer($0) }
    }

    @usableFromInline package static func sawEmbeddedNUL(_ arena: Arena) -> Bool { arena.sawEmbeddedNUL }
}
