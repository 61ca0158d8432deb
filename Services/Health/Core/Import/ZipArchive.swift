import CZlib
import Foundation

/// How much a zip may claim to hold before anything of it is inflated. The Health app's "Export All Health Data"
/// writes `export.zip`, whose `export.xml` reaches several GB for years of a watch's data (1,000,000 records are
/// about 230 MB); the caps sit far above that and far below what a zip bomb (a few KB claiming terabytes) claims.
/// The import never writes the inflated bytes anywhere, so the caps bound the time one spends, not disk space.
public struct ZipLimits: Sendable {
    /// The most one entry may inflate to.
    public var maxEntryBytes: UInt64 = 16 << 30
    /// The most all entries together may declare.
    public var maxTotalBytes: UInt64 = 32 << 30
    /// The most entries (an export has export.xml, export_cda.xml and a file per workout route or ECG).
    public var maxEntries = 1_000_000

    public init() {}
    public static let standard = ZipLimits()
}

/// One file in a zip, as its central directory describes it.
struct ZipEntry {
    var name: String
    var method: UInt16
    var flags: UInt16
    var crc32: UInt32
    var compressedSize: UInt64
    var size: UInt64
    var localHeaderOffset: UInt64
}

/// A zip archive read from its central directory (zip64 included), small enough to write ourselves over zlib's
/// raw inflate rather than wrap minizip (not installed) or run `unzip`: the import needs one entry, streamed.
///
/// Every entry's declared sizes are checked against `ZipLimits` when the archive opens, before any inflating;
/// an entry that inflates past its declared size, or to bytes whose CRC-32 differs, fails while being read.
final class ZipArchive {
    let path: String
    let entries: [ZipEntry]
    fileprivate let file: FileHandle
    private let fileSize: UInt64

    /// Whether the file starts as a zip does (a local file header, or the end record of an empty zip).
    static func isZip(atPath path: String) -> Bool {
        guard let file = FileHandle(forReadingAtPath: path) else { return false }
        defer { try? file.close() }
        let magic = [UInt8]((try? file.read(upToCount: 4)) ?? Data())
        return magic == [0x50, 0x4b, 0x03, 0x04] || magic == [0x50, 0x4b, 0x05, 0x06]
    }

    init(path: String, limits: ZipLimits = .standard) throws {
        guard let file = FileHandle(forReadingAtPath: path) else { throw HealthError.notFound("cannot open \(path)") }
        self.path = path
        self.file = file
        do {
            fileSize = try file.seekToEnd()
            entries = try Self.readDirectory(file, size: fileSize, path: path, limits: limits)
        } catch {
            try? file.close()
            throw error
        }
    }

    deinit { try? file.close() }

    private static func broken(_ path: String, _ reason: String) -> HealthError {
        HealthError.invalid("\(path): not a readable zip: \(reason)")
    }

    private static func readDirectory(_ file: FileHandle, size: UInt64, path: String, limits: ZipLimits) throws -> [ZipEntry] {
        // The end of central directory record: 22 bytes, then a comment of up to 65,535.
        let tailLength = min(size, 22 + 65_535)
        try file.seek(toOffset: size - tailLength)
        let tail = [UInt8](try file.read(upToCount: Int(tailLength)) ?? Data())
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
            try file.seek(toOffset: locatorAt - 20)
            let locator = [UInt8](try file.read(upToCount: 20) ?? Data())
            guard locator.count == 20, locator.le32(0) == 0x0706_4b50 else { throw broken(path, "no zip64 locator") }
            let recordAt = locator.le64(8)
            guard recordAt < size else { throw broken(path, "the zip64 end record lies past the end of the file") }
            try file.seek(toOffset: recordAt)
            let record = [UInt8](try file.read(upToCount: 56) ?? Data())
            guard record.count == 56, record.le32(0) == 0x0606_4b50 else { throw broken(path, "no zip64 end record") }
            count = record.le64(32)
            directorySize = record.le64(40)
            directoryOffset = record.le64(48)
        }
        guard count <= UInt64(limits.maxEntries) else {
            throw HealthError(.resourceExhausted, "\(path): \(count) entries, over the \(limits.maxEntries) an export may have")
        }
        guard directoryOffset <= size, directorySize <= size - directoryOffset, directorySize <= 256 << 20 else {
            throw broken(path, "the central directory lies outside the file (truncated?)")
        }
        try file.seek(toOffset: directoryOffset)
        let directory = [UInt8](try file.read(upToCount: Int(directorySize)) ?? Data())
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
            guard next <= directory.count else { throw broken(path, "central directory entry #\(entries.count) is cut short") }
            var entry = ZipEntry(
                name: String(decoding: directory[(position + 46)..<(position + 46 + nameLength)], as: UTF8.self),
                method: directory.le16(position + 10), flags: directory.le16(position + 8), crc32: directory.le32(position + 16),
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
                    if entry.localHeaderOffset == 0xFFFF_FFFF { entry.localHeaderOffset = next64() ?? entry.localHeaderOffset }
                }
                extra += 4 + length
            }
            guard entry.size <= limits.maxEntryBytes else {
                throw HealthError(
                    .resourceExhausted,
                    "\(path): \(entry.name) would inflate to \(Self.gib(entry.size)), over the \(Self.gib(limits.maxEntryBytes)) one entry may; "
                        + "refused before inflating anything (a zip bomb?)")
            }
            total += entry.size
            guard total <= limits.maxTotalBytes else {
                throw HealthError(
                    .resourceExhausted,
                    "\(path): its entries would inflate to more than \(Self.gib(limits.maxTotalBytes)) together; "
                        + "refused before inflating anything (a zip bomb?)")
            }
            entries.append(entry)
            position = next
        }
        return entries
    }

    static func gib(_ bytes: UInt64) -> String { String(format: "%.1f GiB", Double(bytes) / Double(1 << 30)) }

    /// The Health export's `export.xml`: `apple_health_export/export.xml` as the Health app writes it, or one at any
    /// depth (a re-zipped folder), the shallowest first. macOS's `__MACOSX/` resource forks are not it.
    func exportXML() throws -> ZipEntry {
        let candidates = entries.filter {
            ($0.name == "export.xml" || $0.name.hasSuffix("/export.xml")) && !$0.name.hasPrefix("__MACOSX/")
        }
        guard let entry = candidates.min(by: { $0.name.split(separator: "/").count < $1.name.split(separator: "/").count }) else {
            let names = entries.prefix(5).map(\.name).joined(separator: ", ")
            throw HealthError.invalid(
                "\(path): no export.xml in this zip (it has \(entries.count) entries\(names.isEmpty ? "" : ": \(names)")); "
                    + "expected the Health app's export.zip with apple_health_export/export.xml")
        }
        return entry
    }

    /// A reader of `entry`'s bytes, inflated as they are read.
    func reader(for entry: ZipEntry) throws -> ZipEntryReader {
        guard entry.flags & 1 == 0 else { throw HealthError.invalid("\(path): \(entry.name) is encrypted") }
        guard entry.method == 0 || entry.method == 8 else {
            throw HealthError.invalid("\(path): \(entry.name) is compressed with method \(entry.method); only stored and deflated entries are read")
        }
        guard entry.localHeaderOffset <= fileSize - min(fileSize, 30) else { throw Self.broken(path, "\(entry.name) starts past the end of the file") }
        try file.seek(toOffset: entry.localHeaderOffset)
        let header = [UInt8](try file.read(upToCount: 30) ?? Data())
        guard header.count == 30, header.le32(0) == 0x0403_4b50 else { throw Self.broken(path, "\(entry.name) has no local header") }
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
final class ZipEntryReader {
    /// Kept so that its file stays open while this reads it.
    private let archive: ZipArchive
    private var file: FileHandle { archive.file }
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
        try archive.file.seek(toOffset: dataStart)
        if entry.method == 8 {
            // Raw deflate (negative window bits): a zip entry has no zlib header.
            guard inflateInit2_(&stream, -MAX_WBITS, zlibVersion(), Int32(MemoryLayout<z_stream>.size)) == Z_OK else {
                throw HealthError(.internal, "zlib's inflateInit2 failed")
            }
        }
    }

    deinit { if entry.method == 8 { inflateEnd(&stream) } }

    /// The entry's declared (and checked) size.
    var size: UInt64 { entry.size }

    private func fail(_ reason: String) -> HealthError { HealthError.invalid("\(path): \(entry.name) \(reason); nothing was imported") }

    /// Up to `count` more bytes of the entry; empty at its end.
    func read(upTo count: Int) throws -> Data {
        guard !finished else { return Data() }
        var output = [UInt8](repeating: 0, count: count)
        var filled = 0
        if entry.method == 0 {
            let want = Int(min(UInt64(count), compressedLeft))
            let data = want == 0 ? Data() : (try file.read(upToCount: want) ?? Data())
            guard data.count == want else { throw fail("is cut short") }
            compressedLeft -= UInt64(want)
            output.replaceSubrange(0..<want, with: data)
            filled = want
            if compressedLeft == 0 { finished = true }
        } else {
            while filled < count, !finished {
                if input.isEmpty, compressedLeft > 0 {
                    let want = Int(min(UInt64(256 << 10), compressedLeft))
                    input = [UInt8](try file.read(upToCount: want) ?? Data())
                    guard input.count == want else { throw fail("is cut short") }
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
        guard produced <= entry.size else { throw fail("inflates past the \(entry.size) bytes its directory declared (a zip bomb?)") }
        // (crc32 with no buffer answers its initial value, not `crc`: only call it with bytes.)
        if filled > 0 { crc = output.withUnsafeBufferPointer { crc32(crc, $0.baseAddress, UInt32(filled)) } }
        if finished {
            guard produced == entry.size else { throw fail("holds \(produced) bytes, not the \(entry.size) its directory declared") }
            guard UInt32(truncatingIfNeeded: crc) == entry.crc32 else { throw fail("fails its CRC-32 check (damaged?)") }
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
