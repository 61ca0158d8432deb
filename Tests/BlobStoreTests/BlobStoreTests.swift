import Base
import BlobStore
import Foundation
import TLS
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A scratch directory removed when the test ends.
final class ScratchDirectory {
    let path: String
    init() throws {
        path = FileManager.default.temporaryDirectory.appendingPathComponent("blobs-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }
    deinit { try? FileManager.default.removeItem(atPath: path) }
}

func randomBytes(_ count: Int) -> [UInt8] { (0..<count).map { _ in UInt8.random(in: 0...255) } }

@Suite struct BlobStoreTests {
    @Test func aPutIsReadBackByItsHashAndIsIdempotent() throws {
        let scratch = try ScratchDirectory()
        let store = try BlobStore(directory: scratch.path)
        let bytes = randomBytes(300_000)
        let hash = try store.put(bytes)
        #expect(hash == SHA256.hex(bytes))
        #expect(store.path(of: hash) == "\(scratch.path)/\(hash.prefix(2))/\(hash)")
        #expect(store.has(hash))
        #expect(try store.get(hash) == bytes)
        #expect(try store.put(bytes) == hash)
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: scratch.path + "/tmp").isEmpty,
            "no temporary file is left")
        #expect(try store.put([]) == SHA256.hex([]), "an empty blob is a blob too")
        #expect(try store.get(SHA256.hex([])) == [])
    }

    @Test func anUnknownOrMalformedHashIsRefused() throws {
        let scratch = try ScratchDirectory()
        let store = try BlobStore(directory: scratch.path)
        #expect { _ = try store.get(SHA256.hex([1, 2, 3])) } throws: { ($0 as? BlobError)?.category == .notFound }
        for bad in [
            "", "../../etc/passwd", String(repeating: "A", count: 64), String(repeating: "a", count: 63),
            String(repeating: "g", count: 64),
        ] {
            #expect { _ = try store.get(bad) } throws: { ($0 as? BlobError)?.category == .invalidArgument }
            #expect(!store.has(bad))
        }
    }

    /// Flipped bits and a truncation on disk are caught by the hash: reported as DATA_LOSS, moved aside, never returned.
    @Test(arguments: ["flipped", "truncated", "emptied"])
    func aDamagedFileIsDetectedAndMovedAside(damage: String) throws {
        let scratch = try ScratchDirectory()
        let store = try BlobStore(directory: scratch.path)
        let bytes = randomBytes(10_000)
        let hash = try store.put(bytes)
        var damaged = bytes
        switch damage {
        case "flipped": damaged[5_000] ^= 0x10
        case "truncated": damaged.removeLast(1)
        default: damaged = []
        }
        try Data(damaged).write(to: URL(fileURLWithPath: store.path(of: hash)))
        #expect { _ = try store.get(hash) } throws: { ($0 as? BlobError)?.category == .dataLoss }
        #expect(!store.has(hash), "the damaged file is out of the way")
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: scratch.path + "/corrupt").count == 1,
            "and kept for the operator")
        #expect { _ = try store.get(hash) } throws: { ($0 as? BlobError)?.category == .notFound }
        try store.put(bytes)
        #expect(try store.get(hash) == bytes, "a sound copy put again is read")
    }

    /// What arrives in pieces takes its name only when its size and hash are right.
    @Test func aWriterChecksSizeAndHashBeforeNamingTheBlob() throws {
        let scratch = try ScratchDirectory()
        let store = try BlobStore(directory: scratch.path, maxSize: 1000)
        let bytes = randomBytes(900)
        let hash = SHA256.hex(bytes)

        let short = try store.writer(expecting: hash, size: 900)
        try short.append(Array(bytes[0..<500]))
        #expect { try short.commit() } throws: { ($0 as? BlobError)?.category == .invalidArgument }

        var other = bytes
        other[0] ^= 1
        let wrong = try store.writer(expecting: hash, size: 900)
        try wrong.append(other)
        #expect { try wrong.commit() } throws: { ($0 as? BlobError)?.category == .invalidArgument }

        let long = try store.writer(expecting: hash, size: 900)
        #expect { try long.append(bytes + [0]) } throws: { ($0 as? BlobError)?.category == .invalidArgument }

        #expect { _ = try store.writer(expecting: hash, size: 1001) } throws: {
            ($0 as? BlobError)?.category == .resourceExhausted
        }
        #expect(!store.has(hash))

        let right = try store.writer(expecting: hash, size: 900)
        try right.append(Array(bytes[0..<450]))
        try right.append(Array(bytes[450...]))
        try right.commit()
        #expect(try store.get(hash) == bytes)
        #expect(try FileManager.default.contentsOfDirectory(atPath: scratch.path + "/tmp").isEmpty)
    }

    /// A writer abandoned (a sender gone) and a crash's leftovers leave nothing behind once the store reopens.
    @Test func temporaryFilesDoNotSurvive() throws {
        let scratch = try ScratchDirectory()
        let store = try BlobStore(directory: scratch.path)
        let bytes = randomBytes(100)
        do {
            let writer = try store.writer(expecting: SHA256.hex(bytes), size: 100)
            try writer.append(Array(bytes[0..<10]))
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: scratch.path + "/tmp").isEmpty)
        #expect(FileManager.default.createFile(atPath: scratch.path + "/tmp/leftover", contents: Data([1, 2])))
        _ = try BlobStore(directory: scratch.path)
        #expect(try FileManager.default.contentsOfDirectory(atPath: scratch.path + "/tmp").isEmpty)
    }

    /// Puts of the same bytes at once (two replicas' handlers) end with one sound blob.
    @Test func concurrentPutsOfTheSameBytes() async throws {
        let scratch = try ScratchDirectory()
        let store = try BlobStore(directory: scratch.path)
        let bytes = randomBytes(200_000)
        try await withThrowingTaskGroup(of: String.self) { group in
            for _ in 0..<8 { group.addTask { try store.put(bytes) } }
            for try await hash in group { #expect(hash == SHA256.hex(bytes)) }
        }
        #expect(try store.get(SHA256.hex(bytes)) == bytes)
    }
}
