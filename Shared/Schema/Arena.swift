internal import CProtobufC

#if canImport(Glibc)
    internal import Glibc
#endif

/// A bump allocator for the C message tree of one encode or decode: structs, arrays, strings and
/// byte buffers are carved from a stack buffer and, when that is full, from heap chunks, all freed
/// together when `Arena.with` returns. No reference counting, no per-allocation `free`.
@usableFromInline package struct Arena {
    private struct State {
        var cursor: UnsafeMutableRawPointer
        var remaining: Int
        var nextChunkSize: Int
        /// Heap chunks, linked through their first word.
        var chunks: UnsafeMutableRawPointer?
        /// A string read from (decoding) or copied into (encoding) this arena had a NUL before its end.
        var sawEmbeddedNUL = false
    }

    private static let alignment = 16
    private static let stackBytes = 1024
    private let state: UnsafeMutablePointer<State>

    /// Runs `body` with a fresh arena; everything allocated from it is freed afterwards.
    static func with<Result>(_ body: (Arena) throws -> Result) rethrows -> Result {
        try withUnsafeTemporaryAllocation(byteCount: stackBytes, alignment: alignment) { stack in
            try withUnsafeTemporaryAllocation(of: State.self, capacity: 1) { statePointer in
                let state = statePointer.baseAddress.unsafelyUnwrapped
                state.initialize(
                    to: State(
                        cursor: stack.baseAddress.unsafelyUnwrapped, remaining: stack.count,
                        nextChunkSize: 4 * stackBytes,
                        chunks: nil, sawEmbeddedNUL: false))
                defer {
                    var chunk = state.pointee.chunks
                    while let current = chunk {
                        chunk = current.load(as: UnsafeMutableRawPointer?.self)
                        current.deallocate()
                    }
                }
                return try body(Arena(state: state))
            }
        }
    }

    /// `byteCount` bytes aligned for any C type, valid until `with` returns.
    @usableFromInline package func allocate(_ byteCount: Int) -> UnsafeMutableRawPointer {
        let size = (max(byteCount, 1) + Self.alignment - 1) & ~(Self.alignment - 1)
        if size <= state.pointee.remaining {
            let pointer = state.pointee.cursor
            state.pointee.cursor = pointer + size
            state.pointee.remaining -= size
            return pointer
        }
        if size > state.pointee.nextChunkSize / 2 {
            // Large buffers (payloads) get a chunk of their own; the current one keeps serving small requests.
            return newChunk(size)
        }
        let chunkSize = state.pointee.nextChunkSize
        state.pointee.nextChunkSize = min(chunkSize * 2, 256 * 1024)
        let chunk = newChunk(chunkSize)
        state.pointee.cursor = chunk + size
        state.pointee.remaining = chunkSize - size
        return chunk
    }

    /// A NUL-terminated copy of `string`, for protobuf-c's `char *` strings. A NUL inside `string` would end the C
    /// string there (`a\0b` packed as `a`): it is noted (`sawEmbeddedNUL`), for the encode to refuse the message.
    func cString(_ string: String) -> UnsafeMutablePointer<CChar> {
        var string = string
        return string.withUTF8 { utf8 in
            let pointer = allocate(utf8.count + 1)
            if let base = utf8.baseAddress {
                pointer.copyMemory(from: base, byteCount: utf8.count)
                if memchr(base, 0, utf8.count) != nil { state.pointee.sawEmbeddedNUL = true }
            }
            pointer.storeBytes(of: 0, toByteOffset: utf8.count, as: UInt8.self)
            return pointer.bindMemory(to: CChar.self, capacity: utf8.count + 1)
        }
    }

    /// `bytes` for an encode's C message, or nil when empty: copied into the arena, or when large (a message's
    /// payload) its own storage, which protobuf-c then packs straight from. An encode's C message only lives while
    /// `ProtobufCCodec.encode` runs, and the Swift message it mirrors — whose stored arrays these are — is borrowed for
    /// all of that time, unmutated, so their storage neither moves nor goes away before the arena does.
    func bytes(_ bytes: [UInt8]) -> UnsafeMutablePointer<UInt8>? {
        bytes.withUnsafeBytes { source in
            guard let base = source.baseAddress, !source.isEmpty else { return nil }
            if source.count >= Self.largestCopiedBytes {
                return UnsafeMutablePointer(mutating: base.assumingMemoryBound(to: UInt8.self))
            }
            let pointer = allocate(source.count)
            pointer.copyMemory(from: base, byteCount: source.count)
            return pointer.bindMemory(to: UInt8.self, capacity: source.count)
        }
    }

    /// `bytes` fields this large are packed from their own storage: a 64 KiB payload's copy into the arena was one of
    /// the copies a large call made on its way out (docs/performance.md).
    static let largestCopiedBytes = 4096

    /// A protobuf-c allocator drawing from this arena, for `protobuf_c_message_unpack`: what it
    /// allocates is freed with the arena, so its `free` does nothing. Each allocation is preceded by
    /// a header (`decodeHeader` bytes) holding its size and the arena: protobuf-c keeps no length
    /// for strings (it allocates length + 1 bytes and NUL-terminates them), so this is how a string
    /// with a NUL inside is read whole and noticed (`decodedString`).
    var protobufCAllocator: ProtobufCAllocator {
        ProtobufCAllocator(
            alloc: { state, size in
                let arena = Arena(state: state.unsafelyUnwrapped.assumingMemoryBound(to: State.self))
                let block = arena.allocate(size + Arena.decodeHeader)
                block.storeBytes(of: size, as: Int.self)
                block.storeBytes(of: state, toByteOffset: MemoryLayout<Int>.stride, as: UnsafeMutableRawPointer?.self)
                return block + Arena.decodeHeader
            },
            free: { _, _ in },
            allocator_data: UnsafeMutableRawPointer(state))
    }

    /// Bytes before each block an unpack allocates (a multiple of the alignment).
    static let decodeHeader = 16

    /// Whether a string of this arena's decode had a NUL inside.
    var sawEmbeddedNUL: Bool { state.pointee.sawEmbeddedNUL }

    /// A string protobuf-c unpacked into a decoding arena, read whole (a NUL inside included, and
    /// then noted in the arena); protobuf-c's shared empty default reads as "".
    static func decodedString(_ cString: UnsafePointer<CChar>) -> String {
        if menagerie_is_protobuf_c_empty_string(cString) != 0 { return "" }
        let header = UnsafeRawPointer(cString) - decodeHeader
        let length = header.load(as: Int.self) - 1
        let bytes = UnsafeRawBufferPointer(start: cString, count: length)
        if length > 0, memchr(cString, 0, length) != nil,
            let state = header.load(fromByteOffset: MemoryLayout<Int>.stride, as: UnsafeMutableRawPointer?.self)
        {
            state.assumingMemoryBound(to: State.self).pointee.sawEmbeddedNUL = true
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// A heap chunk with `byteCount` usable bytes, linked for freeing.
    private func newChunk(_ byteCount: Int) -> UnsafeMutableRawPointer {
        let chunk = UnsafeMutableRawPointer.allocate(byteCount: byteCount + Self.alignment, alignment: Self.alignment)
        chunk.storeBytes(of: state.pointee.chunks, as: UnsafeMutableRawPointer?.self)
        state.pointee.chunks = chunk
        return chunk + Self.alignment
    }
}
