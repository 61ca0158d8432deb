/// A bump allocator for the C message tree of one encode: structs, arrays, strings and byte buffers
/// are carved from a few chunks and all freed when the arena is released.
final class Arena {
    private static let alignment = 16
    private var chunks: [UnsafeMutableRawPointer] = []
    private var cursor: UnsafeMutableRawPointer?
    private var remaining = 0
    private var chunkSize = 1024

    deinit {
        for chunk in chunks { chunk.deallocate() }
    }

    /// `byteCount` bytes aligned for any C type, valid until the arena is released.
    func allocate(_ byteCount: Int) -> UnsafeMutableRawPointer {
        let size = (max(byteCount, 1) + Self.alignment - 1) & ~(Self.alignment - 1)
        if size > chunkSize / 2 {
            // Large buffers (payloads) get their own chunk; the current one keeps serving small requests.
            return newChunk(size)
        }
        if size > remaining {
            cursor = newChunk(chunkSize)
            remaining = chunkSize
            chunkSize = min(chunkSize * 2, 64 * 1024)
        }
        let pointer = cursor.unsafelyUnwrapped
        cursor = pointer + size
        remaining -= size
        return pointer
    }

    /// A copy of `bytes` followed by a NUL, for protobuf-c's `char *` strings.
    func cString(_ string: String) -> UnsafeMutablePointer<CChar> {
        var string = string
        return string.withUTF8 { utf8 in
            let pointer = allocate(utf8.count + 1)
            if let base = utf8.baseAddress { pointer.copyMemory(from: base, byteCount: utf8.count) }
            pointer.storeBytes(of: 0, toByteOffset: utf8.count, as: UInt8.self)
            return pointer.bindMemory(to: CChar.self, capacity: utf8.count + 1)
        }
    }

    /// A copy of `bytes`, or nil when empty.
    func copy(_ bytes: [UInt8]) -> UnsafeMutablePointer<UInt8>? {
        guard !bytes.isEmpty else { return nil }
        let pointer = allocate(bytes.count)
        bytes.withUnsafeBytes { pointer.copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
        return pointer.bindMemory(to: UInt8.self, capacity: bytes.count)
    }

    private func newChunk(_ size: Int) -> UnsafeMutableRawPointer {
        let chunk = UnsafeMutableRawPointer.allocate(byteCount: size, alignment: Self.alignment)
        chunks.append(chunk)
        return chunk
    }
}
