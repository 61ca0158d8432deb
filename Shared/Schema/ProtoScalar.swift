internal import CProtobufC

/// A Swift type that a protobuf-c scalar, string or bytes field is read into and written from.
@usableFromInline package protocol ProtoScalar {
    /// The C representation this Swift type maps to.
    static var storage: MessageSchema.Storage { get }
    /// Size of one element in a protobuf-c repeated array.
    static var stride: Int { get }
    /// Reads the C value at `address`.
    static func load(from address: UnsafeRawPointer) -> Self
    /// Writes the C value at `address`; strings and bytes are copied into `arena`.
    func store(at address: UnsafeMutableRawPointer, arena: Arena)
}

/// Scalars whose C representation is the Swift type itself.
@usableFromInline package protocol TrivialProtoScalar: ProtoScalar, BitwiseCopyable {}

extension TrivialProtoScalar {
    @inlinable package static var stride: Int { MemoryLayout<Self>.stride }
    @inlinable package static func load(from address: UnsafeRawPointer) -> Self { address.load(as: Self.self) }
    @inlinable package func store(at address: UnsafeMutableRawPointer, arena: Arena) {
        address.storeBytes(of: self, as: Self.self)
    }
}

extension Int32: TrivialProtoScalar { @inlinable package static var storage: MessageSchema.Storage { .int32 } }
extension UInt32: TrivialProtoScalar { @inlinable package static var storage: MessageSchema.Storage { .uint32 } }
extension Int64: TrivialProtoScalar { @inlinable package static var storage: MessageSchema.Storage { .int64 } }
extension UInt64: TrivialProtoScalar { @inlinable package static var storage: MessageSchema.Storage { .uint64 } }
extension Float: TrivialProtoScalar { @inlinable package static var storage: MessageSchema.Storage { .float } }
extension Double: TrivialProtoScalar { @inlinable package static var storage: MessageSchema.Storage { .double } }

extension Bool: ProtoScalar {
    @usableFromInline package static var storage: MessageSchema.Storage { .bool }
    @usableFromInline package static var stride: Int { MemoryLayout<protobuf_c_boolean>.stride }
    @usableFromInline package static func load(from address: UnsafeRawPointer) -> Bool {
        address.load(as: protobuf_c_boolean.self) != 0
    }
    @usableFromInline package func store(at address: UnsafeMutableRawPointer, arena: Arena) {
        address.storeBytes(of: self ? 1 : 0, as: protobuf_c_boolean.self)
    }
}

extension String: ProtoScalar {
    @usableFromInline package static var storage: MessageSchema.Storage { .string }
    @usableFromInline package static var stride: Int { MemoryLayout<UnsafePointer<CChar>?>.stride }

    /// Read whole, NULs included (see `Arena.decodedString`; decoding refuses them unless asked
    /// not to); invalid UTF-8 is repaired (U+FFFD), never trusted.
    @usableFromInline package static func load(from address: UnsafeRawPointer) -> String {
        guard let cString = address.load(as: UnsafePointer<CChar>?.self) else { return "" }
        return Arena.decodedString(cString)
    }

    @usableFromInline package func store(at address: UnsafeMutableRawPointer, arena: Arena) {
        address.storeBytes(of: arena.cString(self), as: UnsafeMutablePointer<CChar>?.self)
    }
}

extension [UInt8]: ProtoScalar {
    @usableFromInline package static var storage: MessageSchema.Storage { .bytes }
    @usableFromInline package static var stride: Int { MemoryLayout<ProtobufCBinaryData>.stride }

    @usableFromInline package static func load(from address: UnsafeRawPointer) -> [UInt8] {
        let data = address.load(as: ProtobufCBinaryData.self)
        guard let bytes = data.data, data.len > 0 else { return [] }
        return Array(UnsafeBufferPointer(start: bytes, count: data.len))
    }

    @usableFromInline package func store(at address: UnsafeMutableRawPointer, arena: Arena) {
        address.storeBytes(of: ProtobufCBinaryData(len: count, data: arena.bytes(self)), as: ProtobufCBinaryData.self)
    }
}
