import CMalloc

/// How a process asks glibc's allocator to give memory back: the one place that calls into `malloc.h`.
public enum Allocator {
    /// Buffers at least this large get their own mapping: glibc's starting threshold, held fixed.
    ///
    /// glibc's malloc raises its mmap threshold each time a large mapped buffer is freed (up to 32 MiB); from then on
    /// large buffers come from the heap, whose pages stay with the process after they are freed. A burst of large
    /// answers nobody read (server streams whose clients grant no window) then left a health replica's RSS far above
    /// what was live once every client had gone: 39 → 84 MiB with the default, 52 MiB with a fixed threshold, so
    /// that buffers from 128 KiB up keep their own mappings and return to the system when freed.
    public static let mmapThreshold: Int32 = 128 << 10

    /// Fixes the mmap threshold (a service does it once at start).
    public static func tune() {
        _ = mallopt(M_MMAP_THRESHOLD, mmapThreshold)
    }

    /// Gives the free pages of every arena back to the system. The many small allocations of one large piece of work
    /// (a 36-megapixel photo's recognition: Tesseract's and OpenCV's, each under the mmap threshold, on the lane's
    /// threads' own arenas) stay with the process once freed; after such work RSS came back down only with this.
    /// Costs a walk of the arenas (about a millisecond): for after large work, not after every call.
    public static func returnFreedMemory() {
        _ = malloc_trim(0)
    }
}
