import Dispatch

/// Frees large buffers on a background thread instead of the loop's. Freeing a buffer of a MiB or
/// more unmaps its pages, about 0.7 ms for 16 MiB that were written; 15 connections holding
/// almost complete 16 MiB frames, closed together, took an 11 ms loop turn (abuse benchmark).
package enum LargeBuffers {
    /// Smaller buffers are freed at once: malloc keeps them for reuse and their freeing is cheap.
    package static let threshold = 1 << 20
    private static let queue = DispatchQueue(label: "menagerie.large-buffers", qos: .utility)

    /// Frees `base`, allocated with `UnsafeMutableRawPointer.allocate`, of `capacity` bytes.
    package static func deallocate(_ base: UnsafeMutableRawPointer, capacity: Int) {
        guard capacity >= threshold else { return base.deallocate() }
        let buffer = Buffer(base: base)
        queue.async { buffer.base.deallocate() }
    }

    /// Lets go of `arrays` on the background thread when together they reach the threshold: they may be the last
    /// references to bodies written from their own memory (a large answer whose handler is long gone), and their
    /// storage would otherwise be unmapped on the loop thread that completed the write.
    package static func release(_ arrays: [[UInt8]]) {
        guard arrays.reduce(0, { $0 + $1.count }) >= threshold else { return }
        queue.async { withExtendedLifetime(arrays) {} }
    }

    /// Handed to the background thread, and touched by nothing else once freed there.
    private struct Buffer: @unchecked Sendable {
        let base: UnsafeMutableRawPointer
    }
}
