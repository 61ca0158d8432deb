import Schema

extension RpcV1.Frame {
    /// Decodes a frame's envelope keeping NULs inside its strings (`init(serializedBytes:)` refuses
    /// them), so that a server can answer a call whose method or metadata has one with
    /// INVALID_ARGUMENT under its id instead of failing the whole connection.
    package init(envelopeKeepingNUL bytes: UnsafeRawBufferPointer) throws {
        self = try ProtobufCCodec.decode(bytes, allowingNUL: true)
    }
}
