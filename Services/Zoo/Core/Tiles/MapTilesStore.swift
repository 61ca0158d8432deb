import Base
import Foundation
import Storage

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The zoo map's MBTiles file (served at `GET /api/map/data`), kept as one file beside the zoo's database, so
/// replicas sharing the database share it too. An upload is written to a temporary file in the same directory,
/// checked, synced and renamed over the stored one: a reader (any replica) sees the old file or the new one,
/// never a part, and a file that fails the checks changes nothing.
public final class MapTilesStore: Sendable {
    /// Where the stored file lives.
    public let path: String

    /// The largest file taken: 1 GiB (a city's tiles to zoom 18 are a few hundred MB; the zoo's far less).
    public static let maxBytes = 1 << 30

    /// The first 16 bytes of every SQLite 3 database.
    static let sqliteHeader: [UInt8] = Array("SQLite format 3".utf8) + [0]

    public init(path: String) {
        self.path = path
    }

    /// The store beside the database at `databasePath`: `DATA_DIR/zoo.sqlite` keeps `DATA_DIR/zoo.mbtiles`.
    public convenience init(besideDatabase databasePath: String) {
        let database = URL(fileURLWithPath: databasePath)
        self.init(path: database.deletingPathExtension().appendingPathExtension("mbtiles").path)
    }

    /// What is stored.
    public struct Info: Sendable, Equatable {
        public let sizeBytes: Int
        /// When it was written (the rename keeps the upload's modification time).
        public let importedAt: Date
    }

    /// Which file a read saw: another import renames a new file (a new inode) into place.
    public struct Identity: Sendable, Equatable {
        let device: UInt64
        let inode: UInt64
        let size: Int
        let modified: Double
    }

    /// The stored file's size and time, nil when none was imported.
    public func current() -> Info? {
        identity().map { Info(sizeBytes: $0.size, importedAt: Date(timeIntervalSince1970: $0.modified)) }
    }

    /// The identity of the stored file now (nil: none), to tell whether bytes read earlier are still current.
    public func identity() -> Identity? {
        var status = stat()
        guard stat(path, &status) == 0 else { return nil }
        return Self.identity(status)
    }

    /// The whole stored file and its identity, nil when none was imported.
    public func read() throws -> (identity: Identity, bytes: [UInt8])? {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else {
            if errno == ENOENT { return nil }
            throw ZooError(.internal, "cannot open the map tiles \(path): \(String(cString: strerror(errno)))")
        }
        defer { close(descriptor) }
        var status = stat()
        guard fstat(descriptor, &status) == 0 else {
            throw ZooError(.internal, "cannot read the map tiles \(path): \(String(cString: strerror(errno)))")
        }
        let identity = Self.identity(status)
        let bytes = try [UInt8](unsafeUninitializedCapacity: identity.size) { buffer, count in
            count = 0
            while count < identity.size {
                let got = Glibc.read(descriptor, buffer.baseAddress! + count, identity.size - count)
                if got < 0, errno == EINTR { continue }
                guard got > 0 else {
                    throw ZooError(
                        .internal,
                        "cannot read the map tiles \(path): \(got < 0 ? String(cString: strerror(errno)) : "it shrank")"
                    )
                }
                count += got
            }
        }
        return (identity, bytes)
    }

    /// Starts receiving a new file.
    public func beginUpload() throws -> MapTilesUpload {
        try MapTilesUpload(store: self)
    }

    private static func identity(_ status: stat) -> Identity {
        Identity(
            device: UInt64(status.st_dev), inode: UInt64(status.st_ino), size: Int(status.st_size),
            modified: Double(status.st_mtim.tv_sec) + Double(status.st_mtim.tv_nsec) / 1e9)
    }

    /// Checks that the file at `path` is an MBTiles file: an SQLite 3 database with `metadata(name, value)` and
    /// `tiles(zoom_level, tile_column, tile_row, tile_data)`, tables or views (the spec allows either). Opened
    /// read-only and immutable, so checking changes nothing; throws INVALID_ARGUMENT saying what is wrong.
    public static func validate(fileAt path: String) throws {
        var head: [UInt8] = []
        if let handle = FileHandle(forReadingAtPath: path) {
            defer { try? handle.close() }
            if let data = try? handle.read(upToCount: sqliteHeader.count) { head = [UInt8](data) }
        }
        guard head == sqliteHeader else {
            throw ZooError(
                .invalidArgument,
                "not an MBTiles file: it does not start with the SQLite 3 header \"SQLite format 3\\0\"")
        }
        let required = [
            ("metadata", ["name", "value"]), ("tiles", ["zoom_level", "tile_column", "tile_row", "tile_data"]),
        ]
        do {
            try Database.inspectReadOnly(fileAt: path) { db in
                for (table, columns) in required {
                    guard
                        try db.queryOne(
                            "SELECT 1 FROM sqlite_master WHERE type IN ('table', 'view') AND name = ? COLLATE NOCASE",
                            [table]) != nil
                    else { throw ZooError(.invalidArgument, "not an MBTiles file: it has no `\(table)` table or view") }
                    let present = Set(
                        try db.query("SELECT name FROM pragma_table_info(?)", [table]).compactMap {
                            $0.string(0)?.lowercased()
                        })
                    let missing = columns.filter { !present.contains($0) }
                    guard missing.isEmpty else {
                        throw ZooError(
                            .invalidArgument,
                            "not an MBTiles file: `\(table)` lacks the column(s) \(missing.joined(separator: ", "))")
                    }
                    // Reading a row proves the table's pages are readable (a view's query too).
                    _ = try db.queryOne("SELECT \(columns.joined(separator: ", ")) FROM \(table) LIMIT 1")
                }
            }
        } catch let error as ZooError {
            throw error
        } catch {
            throw ZooError(.invalidArgument, "not an MBTiles file: SQLite cannot read it (\(error))")
        }
    }
}

/// One file being received: pieces are appended to a temporary file beside the stored one; `finish` checks,
/// syncs and renames it into place. Dropping an unfinished upload removes its temporary file.
public final class MapTilesUpload {
    let store: MapTilesStore
    let temporaryPath: String
    private let handle: FileHandle
    public private(set) var size = 0
    private var isDone = false
    private var isClosed = false

    init(store: MapTilesStore, token: String = UUID().uuidString) throws {
        self.store = store
        temporaryPath = store.path + ".upload-" + token
        let directory = (store.path as NSString).deletingLastPathComponent
        try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        guard FileManager.default.createFile(atPath: temporaryPath, contents: nil),
            let handle = FileHandle(forWritingAtPath: temporaryPath)
        else {
            throw ZooError(.internal, "cannot create \(temporaryPath) for the map tiles")
        }
        self.handle = handle
    }

    deinit {
        if !isDone { discard() }
    }

    /// Appends the next piece. Refuses a file whose first bytes are not SQLite's header, or one past
    /// `MapTilesStore.maxBytes`, as soon as it shows (INVALID_ARGUMENT; the upload is discarded).
    public func append(_ bytes: [UInt8]) throws {
        guard !bytes.isEmpty else { return }
        guard size + bytes.count <= MapTilesStore.maxBytes else {
            discard()
            throw ZooError(
                .invalidArgument, "the map tiles exceed the limit of \(MapTilesStore.maxBytes) bytes (1 GiB)")
        }
        let headerLength = MapTilesStore.sqliteHeader.count
        if size < headerLength {
            let expected = MapTilesStore.sqliteHeader[size..<min(headerLength, size + bytes.count)]
            guard bytes.prefix(expected.count).elementsEqual(expected) else {
                discard()
                throw ZooError(
                    .invalidArgument,
                    "not an MBTiles file: it does not start with the SQLite 3 header \"SQLite format 3\\0\"")
            }
        }
        do {
            try handle.write(contentsOf: bytes)
        } catch {
            discard()
            throw ZooError(.internal, "cannot write the map tiles: \(error)")
        }
        size += bytes.count
    }

    /// Checks the whole file, syncs it and renames it over the stored one (then syncs the directory, so the
    /// rename survives a crash). A file that fails the checks is removed and the stored one stays.
    public func finish() throws -> MapTilesStore.Info {
        guard !isDone else { throw ZooError(.internal, "the map tiles upload was already finished") }
        defer { if !isDone { discard() } }
        guard size > 0 else { throw ZooError(.invalidArgument, "not an MBTiles file: the file is empty") }
        do {
            try handle.synchronize()
            isClosed = true
            try handle.close()
        } catch {
            throw ZooError(.internal, "cannot write the map tiles: \(error)")
        }
        try MapTilesStore.validate(fileAt: temporaryPath)
        guard rename(temporaryPath, store.path) == 0 else {
            throw ZooError(
                .internal, "cannot store the map tiles at \(store.path): \(String(cString: strerror(errno)))")
        }
        isDone = true
        let directory = open((store.path as NSString).deletingLastPathComponent, O_RDONLY | O_CLOEXEC)
        if directory >= 0 {
            _ = fsync(directory)
            close(directory)
        }
        guard let info = store.current() else {
            throw ZooError(.internal, "the map tiles vanished after they were stored")
        }
        return info
    }

    /// Drops the upload and its temporary file.
    public func discard() {
        guard !isDone else { return }
        isDone = true
        if !isClosed {
            isClosed = true
            try? handle.close()
        }
        unlink(temporaryPath)
    }
}
