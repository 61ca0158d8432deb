import Base
import Foundation
import TLS

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// A failure of the blob store: its category (the status a caller gets) and a message. A blob is named by the
/// SHA-256 of its bytes in lowercase hexadecimal, so every check below is against that name.
public struct BlobError: CategorizedError, Equatable, CustomStringConvertible {
    public let category: ErrorCategory
    public let message: String

    public init(_ category: ErrorCategory, _ message: String) {
        self.category = category
        self.message = message
    }
}

/// Where large payloads live, by content hash (SHA-256, lowercase hex), so SQL rows keep the hash only: the
/// node's own disk (`BlobStore`) or that disk and its peers' (`ReplicatedBlobs` in BlobsService). Both block
/// the calling thread: call them from the lane or a job's thread, never from Swift's cooperative pool.
public protocol BlobStoring: Sendable {
    /// Stores `bytes` (idempotent: the same bytes twice are one blob) and returns their hash once they are as
    /// safe as the store promises (on disk; replicated: on enough nodes).
    @discardableResult func put(_ bytes: [UInt8]) throws -> String
    /// The bytes whose SHA-256 is `hash`, checked against it: never bytes of another hash.
    func get(_ hash: String) throws -> [UInt8]
}

/// Content-addressed files on this node's disk: `DIRECTORY/ab/abcdef…` (the hash's first two characters
/// make a folder, so no folder holds more than a few thousand files). A put writes a temporary file in
/// `DIRECTORY/tmp`, fsyncs it, renames it into place and fsyncs the folder: a crash leaves the blob whole or
/// absent, never half-written under its name. A get hashes what it read: a file damaged on disk (flipped
/// bits, a truncation) is moved to `DIRECTORY/corrupt` and reported as DATA_LOSS, never returned, so a
/// replicated store fetches it again from a peer.
public final class BlobStore: BlobStoring, Sendable {
    public let directory: String
    /// The largest blob taken (a put or an incoming stream past it is refused RESOURCE_EXHAUSTED).
    public let maxSize: Int

    /// Opens (creating) the store at `directory`; the temporary files a crash left behind are removed.
    public init(directory: String, maxSize: Int = 2 << 30) throws {
        self.directory = directory
        self.maxSize = maxSize
        do {
            try FileManager.default.createDirectory(atPath: directory + "/tmp", withIntermediateDirectories: true)
            for leftover in (try? FileManager.default.contentsOfDirectory(atPath: directory + "/tmp")) ?? [] {
                try? FileManager.default.removeItem(atPath: directory + "/tmp/" + leftover)
            }
        } catch {
            throw BlobError(.internal, "cannot create the blob store \(directory): \(error.localizedDescription)")
        }
    }

    /// Whether `hash` is a SHA-256 in lowercase hexadecimal (64 characters): anything else names no blob, and
    /// checking it first keeps a peer's hash from ever reaching a path.
    public static func isValidHash(_ hash: String) -> Bool {
        hash.utf8.count == 64 && hash.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }
    }

    /// INVALID_ARGUMENT unless `hash` is a valid hash.
    public static func checkHash(_ hash: String) throws(BlobError) {
        guard isValidHash(hash) else {
            throw BlobError(
                .invalidArgument, "\"\(hash.prefix(80))\" is no blob hash (64 lowercase hexadecimal digits of SHA-256)")
        }
    }

    /// The file of `hash` (valid hashes only).
    public func path(of hash: String) -> String { "\(directory)/\(hash.prefix(2))/\(hash)" }

    /// The size of the file of `hash` here, nil when there is none (not read: `get` checks it).
    public func size(of hash: String) -> Int? {
        guard Self.isValidHash(hash) else { return nil }
        var status = stat()
        return stat(path(of: hash), &status) == 0 ? Int(status.st_size) : nil
    }

    /// Whether a file of `hash` is here (not read: `get` checks it).
    public func has(_ hash: String) -> Bool {
        Self.isValidHash(hash) && access(path(of: hash), F_OK) == 0
    }

    @discardableResult
    public func put(_ bytes: [UInt8]) throws -> String {
        let hash = SHA256.hex(bytes)
        if has(hash) { return hash }
        let writer = try self.writer(expecting: hash, size: bytes.count)
        try writer.append(bytes)
        try writer.commit()
        return hash
    }

    public func get(_ hash: String) throws -> [UInt8] {
        try Self.checkHash(hash)
        let path = path(of: hash)
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else {
            if errno == ENOENT { throw BlobError(.notFound, "no blob \(hash) on this node") }
            throw BlobError(.internal, "cannot open blob \(path): \(String(cString: strerror(errno)))")
        }
        defer { close(descriptor) }
        var status = stat()
        guard fstat(descriptor, &status) == 0 else { throw BlobError(.internal, "cannot stat blob \(path)") }
        let size = Int(status.st_size)
        var bytes = [UInt8](repeating: 0, count: size)
        var done = 0
        while done < size {
            let count = bytes.withUnsafeMutableBytes { read(descriptor, $0.baseAddress! + done, size - done) }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { break }
            done += count
        }
        if done < size { bytes.removeLast(size - done) }
        guard SHA256.hex(bytes) == hash else {
            quarantine(hash)
            throw BlobError(
                .dataLoss,
                "blob \(hash) on this node is damaged (its bytes hash otherwise); moved aside to \(directory)/corrupt")
        }
        return bytes
    }

    /// Moves a damaged file out of the way (kept for the operator, under `corrupt/`), so the next get fetches the
    /// blob afresh instead of reading the damage again.
    public func quarantine(_ hash: String) {
        guard Self.isValidHash(hash) else { return }
        try? FileManager.default.createDirectory(atPath: directory + "/corrupt", withIntermediateDirectories: true)
        if rename(path(of: hash), "\(directory)/corrupt/\(hash).\(UInt32.random(in: 0 ... .max))") != 0 {
            unlink(path(of: hash))
        }
    }

    /// A blob arriving in pieces (from a peer), checked against `hash` and `size` before it takes its name.
    public func writer(expecting hash: String, size: Int) throws -> Writer {
        try Self.checkHash(hash)
        guard size >= 0, size <= maxSize else {
            throw BlobError(
                .resourceExhausted, "blob \(hash) of \(size) bytes is larger than this store takes (\(maxSize))")
        }
        return try Writer(store: self, hash: hash, size: size)
    }

    /// One blob being written: `append` its bytes in order, then `commit`; a writer dropped before its commit
    /// removes its temporary file. Used by one task at a time (an incoming stream), hence unchecked.
    public final class Writer: @unchecked Sendable {
        public let hash: String
        public let size: Int
        private let store: BlobStore
        private let temporary: String
        private var descriptor: Int32
        private var hasher = SHA256()
        public private(set) var written = 0

        fileprivate init(store: BlobStore, hash: String, size: Int) throws {
            self.store = store
            self.hash = hash
            self.size = size
            temporary = "\(store.directory)/tmp/\(hash).\(getpid()).\(UInt64.random(in: 0 ... .max))"
            descriptor = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
            guard descriptor >= 0 else {
                throw BlobError(.internal, "cannot create \(temporary): \(String(cString: strerror(errno)))")
            }
        }

        deinit { abandon() }

        /// Writes the next piece; more bytes than the size announced is INVALID_ARGUMENT (and the blob abandoned).
        public func append(_ bytes: [UInt8]) throws {
            guard descriptor >= 0 else { throw BlobError(.failedPrecondition, "blob \(hash): writer already closed") }
            guard written + bytes.count <= size else {
                abandon()
                throw BlobError(.invalidArgument, "blob \(hash): more bytes than the \(size) announced")
            }
            hasher.update(bytes)
            var done = 0
            while done < bytes.count {
                let count = bytes.withUnsafeBytes { write(descriptor, $0.baseAddress! + done, bytes.count - done) }
                if count < 0, errno == EINTR { continue }
                guard count > 0 else {
                    let reason = String(cString: strerror(errno))
                    abandon()
                    throw BlobError(.unavailable, "cannot write blob \(hash) to disk: \(reason)")
                }
                done += count
            }
            written += bytes.count
        }

        /// Checks the size and the hash, makes the file durable and gives it its name. A mismatch is
        /// INVALID_ARGUMENT (nothing kept). Idempotent with a blob already there.
        public func commit() throws {
            guard descriptor >= 0 else { throw BlobError(.failedPrecondition, "blob \(hash): writer already closed") }
            guard written == size else {
                abandon()
                throw BlobError(.invalidArgument, "blob \(hash): \(written) bytes arrived of the \(size) announced")
            }
            let actual = hasher.finalize().hexString
            guard actual == hash else {
                abandon()
                throw BlobError(.invalidArgument, "blob \(hash): the bytes sent hash to \(actual)")
            }
            guard fsync(descriptor) == 0 else {
                abandon()
                throw BlobError(.unavailable, "cannot sync blob \(hash) to disk: \(String(cString: strerror(errno)))")
            }
            close(descriptor)
            descriptor = -1
            let folder = "\(store.directory)/\(hash.prefix(2))"
            mkdir(folder, 0o755)
            guard rename(temporary, store.path(of: hash)) == 0 else {
                let reason = String(cString: strerror(errno))
                unlink(temporary)
                throw BlobError(.unavailable, "cannot store blob \(hash): \(reason)")
            }
            // The rename is durable once its folder is.
            let folderDescriptor = open(folder, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
            if folderDescriptor >= 0 {
                fsync(folderDescriptor)
                close(folderDescriptor)
            }
        }

        /// Gives up: the temporary file goes.
        public func abandon() {
            guard descriptor >= 0 else { return }
            close(descriptor)
            descriptor = -1
            unlink(temporary)
        }
    }
}
