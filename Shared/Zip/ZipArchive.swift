import Base
import CZlib
import Foundation

/// How much a zip may claim to hold before anything of it is inflated: each user sets its own (the Health import's
/// export.xml reaches several GB, a model's archive a few hundred MB); all sit far below what a zip bomb (a few KB
/// claiming terabytes) claims. Declared sizes are what readers (ours, libtorch's miniz) allocate and inflate to.
public struct ZipLimits: Sendable {
    /// The most one entry may inflate to.
    public var maxEntryBytes: UInt64 = 16 << 30
    /// The most all entries together may declare.
    public var maxTotalBytes: UInt64 = 32 << 30
    /// The most entries (an export has export.xml, export_cda.xml and a file per workout route or ECG).
    public var maxEntries = 1_000_000

    public init(maxEntryBytes: UInt64 = 16 << 30, maxTotalBytes: UInt64 = 32 << 30, maxEntries: Int = 1_000_000) {
        self.maxEntryBytes = maxEntryBytes
        self.maxTotalBytes = maxTotalBytes
        self.maxEntries = maxEntries
    }

    public static let standard = ZipLimits()
}

/// A zip that cannot be read, or that claims more than its limits allow.
public struct ZipError: CategorizedError, CustomStringConvertible {
    public let category: ErrorCategory
    public let message: String
    public var description: String { message }

    static func invalid(_ message: String) -> ZipError { ZipError(category: .invalidArgument, message: message) }
}

/// Bytes a zip is read from at any offset: a file, or an upload held in memory.
public protocol ZipSource: AnyObject {
    var size: UInt64 { get }
    /// Up to `count` bytes at `offset` (fewer only at the end).
    func read(at offset: UInt64, count: Int) throws -> [UInt8]
}

/// A zip in a file.
public final class FileZipSource: ZipSource {
    private let file: FileHandle
    public let size: UInt64

    public init?(path: String) {
        guard let file = FileHandle(forReadingAtPath: path), let size = try? file.seekToEnd() else { return nil }
        self.file = file
        self.size = size
    }

    deinit { try? file.close() }

    public func read(at offset: UInt64, count: Int) throws -> [UInt8] {
        try file.seek(toOffset: offset)
        return [UInt8](try file.read(upToCount: count) ?? Data())
    }
}

/// A zip held in memory.
public final class DataZipSource: ZipSource {
    private let data: Data
    public var size: UInt64 { UInt64(data.count) }

    public init(_ data: Data) { self.data = data }

    public func read(at offset: UInt64, count: Int) throws -> [UInt8] {
        guard offset < size else { return [] }
        let start = data.startIndex + Int(offset)
        return [UInt8](data[start..<min(data.endIndex, start + count)])
    }
}

/// One file in a zip, as its central directory describes it.
public struct ZipEntry: Sendable {
    public var name: String
    /// 0 stored, 8 deflated.
    public var method: UInt16
    public var flags: UInt16
    public var crc32: UInt32
    public var compressedSize: UInt64
    /// What it inflates to (declared, and checked against `ZipLimits`).
    public var size: UInt64
    public var localHeaderOffset: UInt64
}

/// A zip archive read from its central directory (zip64 included), small enough to write ourselves over zlib's
/// raw inflate rather than wrap minizip (not installed) or run `unzip`. The Health import streams one entry of a
/// user's export.zip through it; the classification service inspects a TorchScript model's archive with it
/// before libtorch reads one byte (libtorch's miniz allocates what an entry declares).
///
/// Every entry's declared sizes are checked against `ZipLimits` when the archive opens, before any inflating;
/// an entry that inflates past its declared size, or to bytes whose CRC-32 differs, fails while being read.
public final class ZipArchive {
    /// How errors name the archive (its path, or what it was uploaded as).
    public let path: String
    public let entries: [ZipEntry]
    fileprivate let source: any ZipSource
    private var fileSize: UInt64 { source.size }

    /// Whether the file starts as a zip does (a local file header, or the end record of an empty zip).
    public static func isZip(atPath path: String) -> Bool {
        guard let source = FileZipSource(path: path) else { return false }
        return isZip((try? source.read(at: 0, count: 4)) ?? [])
    }

    /// Whether `prefix` starts as a zip does.
    public static func isZip<Bytes: Collection<UInt8>>(_ prefix: Bytes) -> Bool {
        let magic = Array(prefix.prefix(4))
        return magic == [0x50, 0x4b, 0x03, 0x04] || magic == [0x50, 0x4b, 0x05, 0x06]
    }

    /// The zip at `path`; NOT_FOUND when it cannot be opened.
    public convenience init(path: String, limits: ZipLimits = .standard) throws {
        guard let source = FileZipSource(path: path) else {
            throw ZipError(category: .notFound, message: "cannot open \(path)")
        }
        try self.init(source: source, name: path, limits: limits)
    }

    /// The zip in `source`, called `name` in errors.
    public init(source: any ZipSource, name: String, limits: ZipLimits = .standard) throws {
        path = name
        self.source = source
        entries = try Self.readDirectory(source, path: name, limits: limits)
    }

    private static func broken(_ path: String, _ reason: String) -> ZipError {
        ZipError.invalid("\(path): not a readable zip: \(reason)")
    }

    private static func readDirectory(_ file: any ZipSource, path: String, limits: ZipLimits) throws -> [ZipEntry] {
        let size = file.size
        // The end of central directory record: 22 bytes, then a comment of up to 65,535.
        let tailLength = min(size, 22 + 65_535)
        let tail = try file.read(at: size - tailLength, count: Int(tailLength))
        guard tail.count >= 22,
            let end = stride(from: tail.count - 22, through: 0, by: -1).first(where: { tail.le32($0) == 0x0605_4b50 })
        else { throw broken(path, "no end of central directory record") }
        var count = UInt64(tail.le16(end + 10))
        var directorySize = UInt64(tail.le32(end + 12))
        var directoryOffset = UInt64(tail.le32(end + 16))
        // Zip64: the end record's fields are 0xFFFF… and the real ones are in the zip64 end record its locator names.
        if count == 0xFFFF || directorySize == 0xFFFF_FFFF || directoryOffset == 0xFFFF_FFFF {
            let locatorAt = size - tailLength + UInt64(end)
            guard locatorAt >= 20 else { throw broken(path, "no zip64 locator") }
            let locator = try file.read(at: locatorAt - 20, count: 20)
            guard locator.count == 20, locator.le32(0) == 0x0706_4b50 else { throw broken(path, "no zip64 locator") }
            let recordAt = locator.le64(8)
            guard recordAt < size else { throw broken(path, "the zip64 end record lies past the end of the file") }
            let record = try file.read(at: recordAt, count: 56)
            guard record.count == 56, record.le32(0) == 0x0606_4b50 else { throw broken(path, "no zip64 end record") }
            count = record.le64(32)
            directorySize = record.le64(40)
            directoryOffset = record.le64(48)
        }
        guard count <= UInt64(limits.maxEntries) else {
            throw ZipError(
                category: .resourceExhausted,
                message: "\(path): \(count) entries, over the \(limits.maxEntries) it may have")
        }
        guard directoryOffset <= size, directorySize <= size - directoryOffset, directorySize <= 256 << 20 else {
            throw broken(path, "the central directory lies outside the file (truncated?)")
        }
        let directory = try file.read(at: directoryOffset, count: Int(directorySize))
        guard directory.count == Int(directorySize) else { throw broken(path, "the central directory is cut short") }

        var entries: [ZipEntry] = []
        var position = 0
        var total: UInt64 = 0
        for _ in 0..<count {
            guard position + 46 <= directory.count, directory.le32(position) == 0x0201_4b50 else {
                throw broken(path, "central directory entry #\(entries.count) is damaged")
            }
            let nameLength = Int(directory.le16(position + 28)), extraLength = Int(directory.le16(position + 30))
            let commentLength = Int(directory.le16(position + 32))
            let next = position + 46 + nameLength + extraLength + commentLength
            guard next <= directory.count else {
                throw broken(path, "central directory entry #\(entries.count) is cut short")
            }
            var entry = ZipEntry(
                name: String(decoding: directory[(position + 46)..<(position + 46 + nameLength)], as: UTF8.self),
                method: directory.le16(position + 10), flags: directory.le16(position + 8),
                crc32: directory.le32(position + 16),
                compressedSize: UInt64(directory.le32(position + 20)), size: UInt64(directory.le32(position + 24)),
                localHeaderOffset: UInt64(directory.le32(position + 42)))
            // The zip64 extra field holds, in this order, the fields that are 0xFFFFFFFF above.
            var extra = position + 46 + nameLength
            let extraEnd = extra + extraLength
            while extra + 4 <= extraEnd {
                let id = directory.le16(extra), length = Int(directory.le16(extra + 2))
                guard extra + 4 + length <= extraEnd else { break }
                if id == 0x0001 {
                    var field = extra + 4
                    func next64() -> UInt64? {
                        guard field + 8 <= extra + 4 + length else { return nil }
                        defer { field += 8 }
                        return directory.le64(field)
                    }
                    if entry.size == 0xFFFF_FFFF { entry.size = next64() ?? entry.size }
                    if entry.compressedSize == 0xFFFF_FFFF { entry.compressedSize = next64() ?? entry.compressedSize }
                    if entry.localHeaderOffset == 0xFFFF_FFFF {
                        entry.localHeaderOffset = next64() ?? entry.localHeaderOffset
                    }
                }
                extra += 4 + length
            }
            guard entry.size <= limits.maxEntryBytes else {
                throw ZipError(
                    category: .resourceExhausted,
                    message:
                        "\(path): \(entry.name) would inflate to \(Self.gib(entry.size)), over the \(Self.gib(limits.maxEntryBytes)) one entry may; "
                        + "refused before inflating anything (a zip bomb?)")
            }
            total += entry.size
            guard total <= limits.maxTotalBytes else {
                throw ZipError(
                    category: .resourceExhausted,
                    message:
                        "\(path): its entries would inflate to more than \(Self.gib(limits.maxTotalBytes)) together; "
                        + "refused before inflating anything (a zip bomb?)")
            }
            entries.append(entry)
            position = next
        }
        return entries
    }

    static func gib(_ bytes: UInt64) -> String {
        bytes < 1 << 30
            ? String(format: "%.1f MiB", Double(bytes) / Double(1 << 20))
            : String(format: "%.1f GiB", Double(bytes) / Double(1 << 30))
    }

    /// A reader of `entry`'s bytes, inflated as they are read.
    public func reader(for entry: ZipEntry) throws -> ZipEntryReader {
        guard entry.flags & 1 == 0 else { throw ZipError.invalid("\(path): \(entry.name) is encrypted") }
        guard entry.method == 0 || entry.method == 8 else {
            throw ZipError.invalid(
                "\(path): \(entry.name) is compressed with method \(entry.method); only stored and deflated entries are read"
            )
        }
        guard entry.localHeaderOffset <= fileSize - min(fileSize, 30) else {
            throw Self.broken(path, "\(entry.name) starts past the end of the file")
        }
        let header = try source.read(at: entry.localHeaderOffset, count: 30)
        guard header.count == 30, header.le32(0) == 0x0403_4b50 else {
            throw Self.broken(path, "\(entry.name) has no local header")
        }
        let dataStart = entry.localHeaderOffset + 30 + UInt64(header.le16(26)) + UInt64(header.le16(28))
        guard dataStart <= fileSize, entry.compressedSize <= fileSize - dataStart else {
            throw Self.broken(path, "\(entry.name)'s data lies past the end of the file (truncated?)")
        }
        if entry.method == 0, entry.compressedSize != entry.size {
            throw Self.broken(path, "\(entry.name) is stored, yet its sizes differ")
        }
        return try ZipEntryReader(archive: self, entry: entry, dataStart: dataStart)
    }
}

/// Inflates one entry as it is read, in the caller's chunk sizes. It never yields more than the entry declared
/// (the size the limits were checked against): an entry that inflates past it fails, so a lying directory cannot
/// smuggle a bomb past the limits. At the end, the size and the CRC-32 must match what the directory declared.
public final class ZipEntryReader {
    /// Kept so that its file stays open while this reads it.
    private let archive: ZipArchive
    private var source: any ZipSource { archive.source }
    /// Where the next compressed bytes are read.
    private var offset: UInt64
    private let entry: ZipEntry
    private let path: String
    private var compressedLeft: UInt64
    private var produced: UInt64 = 0
    private var crc: UInt = 0
    private var stream = z_stream()
    private var input: [UInt8] = []
    private var finished = false

    init(archive: ZipArchive, entry: ZipEntry, dataStart: UInt64) throws {
        self.archive = archive
        self.entry = entry
        path = archive.path
        compressedLeft = entry.compressedSize
        offset = dataStart
        if entry.method == 8 {
            // Raw deflate (negative window bits): a zip entry has no zlib header.
            guard inflateInit2_(&stream, -MAX_WBITS, zlibVersion(), Int32(MemoryLayout<z_stream>.size)) == Z_OK else {
                throw ZipError(category: .internal, message: "zlib's inflateInit2 failed")
            }
        }
    }

    deinit { if entry.method == 8 { inflateEnd(&stream) } }

    /// The entry's declared (and checked) size.
    public var size: UInt64 { entry.size }

    private func fail(_ reason: String) -> ZipError {
        ZipError.invalid("\(path): \(entry.name) \(reason); nothing was imported")
    }

    /// Up to `count` more bytes of the entry; empty at its end.
    public func read(upTo count: Int) throws -> Data {
        guard !finished else { return Data() }
        var output = [UInt8](repeating: 0, count: count)
        var filled = 0
        if entry.method == 0 {
            let want = Int(min(UInt64(count), compressedLeft))
            let data = want == 0 ? [] : try source.read(at: offset, count: want)
            guard data.count == want else { throw fail("is cut short") }
            offset += UInt64(want)
            compressedLeft -= UInt64(want)
            output.replaceSubrange(0..<want, with: data)
            filled = want
            if compressedLeft == 0 { finished = true }
        } else {
            while filled < count, !finished {
                if input.isEmpty, compressedLeft > 0 {
                    let want = Int(min(UInt64(256 << 10), compressedLeft))
                    input = try source.read(at: offset, count: want)
                    guard input.count == want else { throw fail("is cut short") }
                    offset += UInt64(want)
                    compressedLeft -= UInt64(want)
                }
                let lastInput = compressedLeft == 0
                let (status, consumed, written) = input.withUnsafeMutableBufferPointer { inBuffer in
                    output.withUnsafeMutableBufferPointer { outBuffer in
                        stream.next_in = inBuffer.baseAddress
                        stream.avail_in = UInt32(inBuffer.count)
                        stream.next_out = outBuffer.baseAddress! + filled
                        stream.avail_out = UInt32(count - filled)
                        let status = inflate(&stream, Z_NO_FLUSH)
                        return (status, inBuffer.count - Int(stream.avail_in), count - filled - Int(stream.avail_out))
                    }
                }
                input.removeFirst(consumed)
                filled += written
                switch status {
                case Z_STREAM_END: finished = true
                case Z_OK: break
                case Z_BUF_ERROR where written == 0 && consumed == 0:
                    if lastInput && input.isEmpty { throw fail("ends before its compressed data does (truncated?)") }
                default: throw fail("is not valid deflate data (zlib status \(status))")
                }
                if produced + UInt64(filled) > entry.size {
                    throw fail("inflates past the \(entry.size) bytes its directory declared (a zip bomb?)")
                }
            }
        }
        produced += UInt64(filled)
        guard produced <= entry.size else {
            throw fail("inflates past the \(entry.size) bytes its directory declared (a zip bomb?)")
        }
        // (crc32 with no buffer answers its initial value, not `crc`: only call it with bytes.)
        if filled > 0 { crc = output.withUnsafeBufferPointer { crc32(crc, $0.baseAddress, UInt32(filled)) } }
        if finished {
            guard produced == entry.size else {
                throw fail("holds \(produced) bytes, not the \(entry.size) its directory declared")
            }
            guard UInt32(truncatingIfNeeded: crc) == entry.crc32 else {
                throw fail("fails its CRC-32 check (damaged?)")
            }
        }
        return Data(output[0..<filled])
    }
}

extension [UInt8] {
    /// Little-endian integers at `offset`, as zip writes them.
    func le16(_ offset: Int) -> UInt16 { UInt16(self[offset]) | UInt16(self[offset + 1]) << 8 }
    func le32(_ offset: Int) -> UInt32 { UInt32(le16(offset)) | UInt32(le16(offset + 2)) << 16 }
    func le64(_ offset: Int) -> UInt64 { UInt64(le32(offset)) | UInt64(le32(offset + 4)) << 32 }
}
