import CMalloc

/// How a service asks glibc's allocator to give memory back.
///
/// glibc's malloc raises its mmap threshold each time a large mapped buffer is freed (up to
/// 32 MiB); from then on large buffers come from the heap, whose pages stay with the process after
/// they are freed. A burst of large answers nobody read (server streams whose clients grant no
/// window) then left a health replica's RSS far above what was live once every client had gone:
/// 39 → 84 MiB with the default, 52 MiB with a fixed threshold, so that buffers from 128 KiB up
/// keep their own mappings and return to the system when freed.
enum AllocatorTuning {
    /// Buffers at least this large get their own mapping: glibc's starting threshold, held fixed.
    static let mmapThreshold: Int32 = 128 << 10

    static func apply() {
        _ = mallopt(M_MMAP_THRESHOLD, mmapThreshold)
    }
}
