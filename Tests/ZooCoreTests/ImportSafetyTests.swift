import Foundation
import Testing

@testable import ZooCore

/// Imports that would silently empty or cripple the data the service answers from.
@Suite struct ImportSafetyTests {
    /// A library holding the bundled sample (13 animals, its small map and bounds).
    private static func sampleLibrary(_ scratch: ScratchDirectory) throws -> ZooLibrary {
        let library = try ZooLibrary(scratchAt: scratch.databasePath, recheckInterval: .zero)
        try library.loadSampleDataIfEmpty(from: SampleFiles.directory)
        return library
    }

    @Test(arguments: [
        ("only the header", LexiconCSVTests.header, ZooFileKind.lexiconCSV),
        ("every row bad", LexiconCSVTests.header + "12;\"Short\";\"row\"\n", .lexiconCSV),
        ("an empty list", "[]", .animalsJSON),
        ("no roads", #"{"nodes": [], "roads": []}"#, .map),
    ])
    func aFileThatYieldsNothingFailsAndKeepsTheOldData(_ what: String, _ content: String, _ kind: ZooFileKind) throws {
        let scratch = try ScratchDirectory()
        let library = try Self.sampleLibrary(scratch)
        let before = try library.database.read(ZooTables.loadDataSet)
        #expect(throws: ZooError.self, "\(what) was imported") {
            try library.importFiles([SampleFiles.file(kind, text: content)], source: what, trigger: .client)
        }
        let after = try library.database.read(ZooTables.loadDataSet)
        #expect(after.lexicon.animals == before.lexicon.animals && after.adoptions == before.adoptions)
        #expect(after.network == before.network && after.bounds == before.bounds)
        #expect(try library.snapshot().catalogue.animals.count == 13)
        #expect(try library.metadata().lastImport?.succeeded == false)
    }

    @Test func aMapImportedWithoutBoundsBringsBoundsThatEncloseIt() throws {
        let scratch = try ScratchDirectory()
        let library = try Self.sampleLibrary(scratch)
        // A footpath well east of the sample's bounds (east edge 14.4075).
        let map = """
            {"nodes": [], "roads": [{"_id": 1, "geometry": {"coordinates": [
                {"_id": 10, "lon": 14.4100, "lat": 50.1160}, {"_id": 11, "lon": 14.4200, "lat": 50.1170},
                {"_id": 12, "lon": 14.4300, "lat": 50.1150}]}}]}
            """
        try library.importFiles([SampleFiles.file(.map, text: map)], source: "map only", trigger: .client)
        let router = try library.snapshot().router
        #expect(router.bounds == MapBounds(north: 50.1170, east: 14.4300, south: 50.1150, west: 14.4100))
        let route = try router.route(
            from: GeoPoint(lat: 50.1161, lon: 14.4110), to: GeoPoint(lat: 50.1152, lon: 14.4290))
        #expect(route.distanceMeters > 1000)
    }
}
