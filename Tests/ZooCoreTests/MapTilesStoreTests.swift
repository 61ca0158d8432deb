import Base
import Foundation
import Storage
import Testing

@testable import ZooCore

/// The MBTiles checks and the atomic replacement of the stored file, on files made with the Storage wrapper.
@Suite struct MapTilesStoreTests {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("zoo-tiles-\(UUID().uuidString)")

    init() throws {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    /// An SQLite file of `schema`, with `rows` tiles when it has a tiles table; its bytes.
    func database(_ name: String, _ schema: String, rows: Int = 0) throws -> [UInt8] {
        let path = directory.appendingPathComponent(name).path
        do {
            let database = try Database(
                path: path, migrations: [Migration(1, "schema") { try $0.executeScript(schema) }])
            // The wrapper's files are in WAL mode; closing it checkpoints everything into the one file.
            try database.write { db in
                for row in 0..<rows {
                    try db.execute(
                        "INSERT INTO tiles VALUES (16, ?, ?, ?)",
                        [row, row, [UInt8](repeating: UInt8(row), count: 3000)])
                }
            }
        }
        return [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
    }

    static let mbtiles = """
        CREATE TABLE metadata (name TEXT, value TEXT);
        CREATE TABLE tiles (zoom_level INTEGER, tile_column INTEGER, tile_row INTEGER, tile_data BLOB);
        """

    func upload(_ bytes: [UInt8], to store: MapTilesStore, piece: Int = 1000) throws -> MapTilesStore.Info {
        let upload = try store.beginUpload()
        var offset = 0
        while offset < bytes.count {
            try upload.append(Array(bytes[offset..<min(bytes.count, offset + piece)]))
            offset += piece
        }
        return try upload.finish()
    }

    func refusal(_ body: () throws -> Void) -> String? {
        do {
            try body()
            return nil
        } catch let error as ZooError {
            return error.category == .invalidArgument ? error.message : "not INVALID_ARGUMENT: \(error)"
        } catch {
            return "\(error)"
        }
    }

    @Test func aGoodFileIsStoredWholeAndAStoreStartsEmpty() throws {
        let store = MapTilesStore(besideDatabase: directory.appendingPathComponent("zoo.sqlite").path)
        #expect(store.path == directory.appendingPathComponent("zoo.mbtiles").path)
        #expect(store.current() == nil)
        #expect(try store.read() == nil)
        let bytes = try database("good.mbtiles", Self.mbtiles, rows: 20)
        let info = try upload(bytes, to: store)
        #expect(info.sizeBytes == bytes.count)
        #expect(try store.read()?.bytes == bytes)
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.contains(".upload-") }
                .isEmpty)
    }

    @Test func viewsServeAsTables() throws {
        let schema =
            Self.mbtiles.replacingOccurrences(of: "CREATE TABLE tiles", with: "CREATE TABLE map")
            + "CREATE VIEW tiles AS SELECT zoom_level, tile_column, tile_row, tile_data FROM map;"
        _ = try database("view.mbtiles", schema)
        try MapTilesStore.validate(fileAt: directory.appendingPathComponent("view.mbtiles").path)
        let broken = Self.mbtiles + "CREATE VIEW tiles_broken AS SELECT 1;"
        _ = try database("extra-view.mbtiles", broken)
        try MapTilesStore.validate(fileAt: directory.appendingPathComponent("extra-view.mbtiles").path)
    }

    @Test func badFilesAreRefusedSayingWhyAndTheStoredOneStays() throws {
        let store = MapTilesStore(path: directory.appendingPathComponent("zoo.mbtiles").path)
        let good = try database("good.mbtiles", Self.mbtiles, rows: 5)
        _ = try upload(good, to: store)
        let cases: [([UInt8], String)] = [
            (
                Array(String(repeating: "not tiles at all\n", count: 200).utf8),
                "does not start with the SQLite 3 header"
            ),
            (
                try database("no-tiles.sqlite", "CREATE TABLE metadata (name TEXT, value TEXT);"),
                "has no `tiles` table or view"
            ),
            (
                try database(
                    "no-metadata.sqlite", "CREATE TABLE tiles (zoom_level, tile_column, tile_row, tile_data);"),
                "has no `metadata` table or view"
            ),
            (
                try database(
                    "no-row.sqlite",
                    "CREATE TABLE metadata (name, value); CREATE TABLE tiles (zoom_level, tile_column, tile_data);"),
                "`tiles` lacks the column(s) tile_row"
            ),
            // SQLite's header, then garbage: SQLite itself refuses it.
            (Array(good.prefix(100)) + [UInt8](repeating: 0xAB, count: 8000), "not an MBTiles file"),
            ([], "the file is empty"),
        ]
        for (bytes, says) in cases {
            let message = refusal { _ = try upload(bytes, to: store) }
            #expect(message?.contains(says) == true, "\(says): \(message ?? "accepted")")
            #expect(try store.read()?.bytes == good, "\(says) changed the stored file")
        }
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.contains(".upload-") }
                .isEmpty)
    }

    @Test func theHeaderIsCheckedAsSoonAsItArrives() throws {
        let store = MapTilesStore(path: directory.appendingPathComponent("zoo.mbtiles").path)
        let upload = try store.beginUpload()
        try upload.append(Array("SQLite".utf8))
        let message = refusal { try upload.append(Array(" format 2".utf8)) }
        #expect(message?.contains("SQLite 3 header") == true, "\(message ?? "accepted")")
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path).isEmpty)
    }

    @Test func aNewImportIsSeenThroughANewIdentity() throws {
        let store = MapTilesStore(path: directory.appendingPathComponent("zoo.mbtiles").path)
        _ = try upload(try database("a.mbtiles", Self.mbtiles, rows: 2), to: store)
        let first = try #require(store.identity())
        #expect(store.identity() == first)
        _ = try upload(try database("b.mbtiles", Self.mbtiles, rows: 2), to: store)
        #expect(store.identity() != first)
    }
}
