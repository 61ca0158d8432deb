import Foundation
import Storage
import StorageTestSupport
import Synchronization
import Testing

@testable import ZooCore

/// A scratch directory removed when the value goes away.
final class ScratchDirectory: Sendable {
    let url = FileManager.default.temporaryDirectory.appendingPathComponent("zoo-tests-\(UUID().uuidString)")

    init() throws { try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true) }

    deinit { try? FileManager.default.removeItem(at: url) }

    var databasePath: String { url.appendingPathComponent("zoo.sqlite").path }
}

/// A flag set once, read from other tasks.
final class Flag: Sendable {
    private let value = Mutex(false)
    var isSet: Bool { value.withLock { $0 } }
    func set() { value.withLock { $0 = true } }
}

enum SampleFiles {
    static let directory = ZooDataSet.bundledSampleDirectory

    static func file(_ kind: ZooFileKind) throws -> ZooSourceFile {
        let url = directory.appendingPathComponent(kind.fileName)
        return ZooSourceFile(kind: kind, name: kind.fileName, content: try Data(contentsOf: url))
    }

    static func file(_ kind: ZooFileKind, text: String) -> ZooSourceFile {
        ZooSourceFile(kind: kind, name: kind.fileName, content: Data(text.utf8))
    }

    /// The sample data parsed straight from the files, with the animals JSON as the lexicon.
    static func scrapedDataSet() throws -> ZooDataSet {
        ZooDataSet(
            lexicon: try AnimalsJSON.parse(try file(.animalsJSON).content),
            adoptions: try AdoptionCSV.parse(String(decoding: try file(.adoptions).content, as: UTF8.self)).adoptions,
            network: try FootpathNetwork.parse(try file(.map).content),
            bounds: try MapBounds.parse(try file(.bounds).content))
    }

    /// The sample lexicon CSV cut down to its header and first `count` animals.
    static func lexiconCSV(first count: Int) throws -> ZooSourceFile {
        let text = try String(
            contentsOf: directory.appendingPathComponent(ZooFileKind.lexiconCSV.fileName), encoding: .utf8)
        let records = CSVParser.parse(text)
        let lines = records.prefix(count + 1).map { record in
            record.fields.map { "\"" + $0.replacingOccurrences(of: "\"", with: "\"\"") + "\"" }.joined(separator: ";")
        }
        return file(.lexiconCSV, text: lines.joined(separator: "\n") + "\n")
    }
}

@Suite struct LibraryTests {
    @Test func sampleDataLoadsOnceAndAgreesWithTheDirectoryLoader() throws {
        let scratch = try ScratchDirectory()
        let library = try ZooLibrary(scratchAt: scratch.databasePath, recheckInterval: .zero)
        #expect(try library.isEmpty)
        #expect(try library.snapshot().catalogue.animals.isEmpty)
        let record = try #require(try library.loadSampleDataIfEmpty(from: SampleFiles.directory))
        #expect(record.succeeded && record.trigger == .sampleData && record.files.count == 5)
        #expect(try library.loadSampleDataIfEmpty(from: SampleFiles.directory) == nil)

        let stored = try library.snapshot()
        let direct = try SampleFiles.scrapedDataSet().snapshot()
        // The CSV is the lexicon; the animals JSON adds map locations and availability by name.
        #expect(try library.metadata().lexiconKind == .lexiconCSV)
        #expect(stored.catalogue.animals.map(\.name) == direct.catalogue.animals.map(\.name))
        #expect(
            stored.catalogue.animals.map(\.isCurrentlyAvailable) == direct.catalogue.animals.map(\.isCurrentlyAvailable)
        )
        #expect(
            stored.catalogue.animals.map { Set($0.mapFeatureIDs) }
                == direct.catalogue.animals.map { Set($0.mapFeatureIDs) })
        #expect(stored.catalogue.animals.map(\.adoption) == direct.catalogue.animals.map(\.adoption))
        #expect(throws: ZooError.unknownAnimal(id: 12)) { try stored.catalogue.animal(id: 12) }
        #expect(stored.router.bounds == direct.router.bounds)
        #expect(stored.router.graph.segments.count == direct.router.graph.segments.count)
        let entrance = GeoPoint(lat: 50.1163, lon: 14.4000)
        for id in [1, 2, 3, 5] {
            let a = try stored.route(from: .point(entrance), to: .animal(id: id))
            let b = try direct.route(from: .point(entrance), to: .animal(id: id))
            #expect(abs(a.distanceMeters - b.distanceMeters) < 1e-9)
        }
        let counts = try library.metadata().counts
        #expect(counts.animals == 13 && counts.availableAnimals == 12 && counts.adoptions > 0)
        #expect(
            counts.footpathNodes == direct.router.graph.nodeCount
                && counts.footpathEdges == direct.router.graph.segments.count)
    }

    @Test func everyFileKindRoundTripsThroughTheDatabase() throws {
        let scratch = try ScratchDirectory()
        let library = try ZooLibrary(scratchAt: scratch.databasePath, recheckInterval: .zero)
        let csv = try SampleFiles.file(.lexiconCSV), json = try SampleFiles.file(.animalsJSON)
        let map = try SampleFiles.file(.map)
        let fixes = SampleFiles.file(.pavilionFixes, text: "_id;name\n9101;Pavilon šelem\n")
        let singulars = SampleFiles.file(.singularPlural, text: "lvi;lev\nzirafy;žirafa,žirafy\n")
        try library.importFiles([csv, map, fixes, singulars], source: "test", trigger: .client)
        var stored = try library.database.read(ZooTables.loadDataSet)
        #expect(stored.lexicon.animals == (try LexiconCSV.parse(String(decoding: csv.content, as: UTF8.self)).animals))
        let network = try FootpathNetwork.parse(map.content)
        #expect(Set(stored.network.nodes) == Set(network.nodes))
        #expect(stored.network.roads == network.roads)
        #expect(
            stored.joins
                == MapJoinTables(
                    pavilionNames: [9101: "Pavilon šelem"],
                    singulars: ["lvi": ["lev"], "zirafy": ["žirafa", "žirafy"]]))

        // The animals JSON alone replaces the lexicon (with its own links and availability) and the map locations.
        try library.importFiles([json], source: "test", trigger: .client)
        stored = try library.database.read(ZooTables.loadDataSet)
        let parsed = try AnimalsJSON.parse(json.content)
        #expect(stored.lexicon.animals == parsed.animals)
        #expect(stored.lexicon.mapFeatures == parsed.mapFeatures.sorted { $0.id < $1.id })
        #expect(stored.network.roads == network.roads)  // untouched
        #expect(try library.metadata().lexiconKind == .animalsJSON)
    }

    @Test(.enabled(if: RealData.enabled, RealData.skipMessage))
    func realDataRoundTripsThroughTheDatabase() throws {
        let scratch = try ScratchDirectory()
        let library = try ZooLibrary(scratchAt: scratch.databasePath, recheckInterval: .zero)
        let files = try ZooSourceFile.directory(RealData.directory)
        #expect(Set(files.map(\.kind)) == Set(ZooFileKind.allCases))
        let record = try #require(try library.importFiles(files, source: "real", trigger: .client))
        let lexicon = try #require(record.files.first { $0.kind == .lexiconCSV })
        #expect(lexicon.rowsImported == 327 && lexicon.skipped.count == 1 && lexicon.skipped[0].row == 328)
        let stored = try library.database.read(ZooTables.loadDataSet)
        // The stored lexicon is the union by species of the CSV and animals.json (LexiconUnion), and the record says how.
        let (union, report) = LexiconUnion.merge(
            lexicon: try RealData.lexiconCSV.get().animals, website: try RealData.animalsJSON.get().animals)
        #expect(stored.lexicon.animals == union)
        #expect(record.lexiconMerge == report)
        #expect(try library.metadata().lastImport?.lexiconMerge == report)
        #expect(stored.adoptions == (try RealData.adoptions.get()))
        #expect(stored.joins == (try RealData.joins.get()))
        let snapshot = try library.snapshot()
        let reference = Catalogue(
            animals: union, mapFeatures: try RealData.animalsJSON.get().mapFeatures,
            adoptions: try RealData.adoptions.get(), joins: try RealData.joins.get())
        #expect(
            snapshot.catalogue.animals.map { Set($0.mapFeatureIDs) } == reference.animals.map { Set($0.mapFeatureIDs) })
        #expect(snapshot.catalogue.filterValues() == reference.filterValues())
        #expect(snapshot.router.graph.segments.count == (try RealData.router.get().graph.segments.count))
        let metadata = try library.metadata()
        #expect(metadata.lastImport?.rowsSkipped == 1)
        #expect(
            metadata.lastImport?.files.first { $0.kind == .lexiconCSV }?.skipped.first?.reason.contains("not a number")
                == true)
    }

    @Test func aFailedImportLeavesTheOldDataAndRecordsTheError() throws {
        let scratch = try ScratchDirectory()
        let library = try ZooLibrary(scratchAt: scratch.databasePath, recheckInterval: .zero)
        try library.loadSampleDataIfEmpty(from: SampleFiles.directory)
        let before = try library.database.read(ZooTables.loadDataSet)
        // A good lexicon with a broken JSON in the same import: nothing of it is applied.
        let broken = SampleFiles.file(.animalsJSON, text: "[{\"_id\": 1, \"name\": ")
        #expect(throws: ZooError.self) {
            try library.importFiles(
                [try SampleFiles.lexiconCSV(first: 3), broken], source: "broken upload", trigger: .client)
        }
        #expect(try library.database.read(ZooTables.loadDataSet).lexicon.animals == before.lexicon.animals)
        #expect(try library.snapshot().catalogue.animals.count == 13)
        let metadata = try library.metadata()
        #expect(metadata.lastImport?.succeeded == false && metadata.lastImport?.source == "broken upload")
        #expect(metadata.lastFailedImport?.error?.contains(ZooFileKind.animalsJSON.fileName) == true)
        #expect(metadata.lastSuccessfulImport?.trigger == .sampleData)
        // Two files of one kind, or none, are refused.
        #expect(throws: ZooError.self) { try library.importFiles([], source: "empty", trigger: .client) }
        let csv = try SampleFiles.file(.lexiconCSV)
        #expect(throws: ZooError.self) { try library.importFiles([csv, csv], source: "twice", trigger: .client) }
    }

    @Test func badRowsAreSkippedAndReportedInTheMetadata() throws {
        let scratch = try ScratchDirectory()
        let library = try ZooLibrary(scratchAt: scratch.databasePath, recheckInterval: .zero)
        let good = try SampleFiles.lexiconCSV(first: 2)
        let text =
            String(decoding: good.content, as: UTF8.self) + "x;\"Bad id\";" + String(repeating: ";", count: 18) + "\n"
        let record = try #require(
            try library.importFiles([SampleFiles.file(.lexiconCSV, text: text)], source: "t", trigger: .client))
        #expect(record.rowsImported == 2 && record.rowsSkipped == 1)
        let stored = try #require(try library.metadata().lastImport)
        #expect(stored.files[0].skipped.map(\.row) == [3])
        #expect(stored.files[0].skipped.first?.reason == "id \"x\" is not a number")
    }

    @Test func anotherProcessSharingTheFileSeesEachImport() throws {
        let scratch = try ScratchDirectory()
        let first = try ZooLibrary(scratchAt: scratch.databasePath, recheckInterval: .zero)
        let second = try ZooLibrary(scratchAt: scratch.databasePath, recheckInterval: .zero)
        try first.loadSampleDataIfEmpty(from: SampleFiles.directory)
        #expect(try second.snapshot().catalogue.animals.count == 13)
        try second.importFiles([try SampleFiles.lexiconCSV(first: 4)], source: "smaller", trigger: .client)
        #expect(try first.snapshot().catalogue.animals.count == 4)
        // A commit that changes no data (a failed import's record) keeps the snapshot.
        let before = try first.snapshot()
        _ = try? second.importFiles([SampleFiles.file(.map, text: "{}")], source: "bad map", trigger: .client)
        #expect(try first.snapshot().catalogue.animals == before.catalogue.animals)
    }

    @Test func replicasStartingTogetherLoadTheSampleOnce() async throws {
        let scratch = try ScratchDirectory()
        let libraries = try (0..<3).map { _ in try ZooLibrary(scratchAt: scratch.databasePath, recheckInterval: .zero) }
        let loaded = try await withThrowingTaskGroup(of: Bool.self) { group in
            for library in libraries {
                group.addTask { try library.loadSampleDataIfEmpty(from: SampleFiles.directory) != nil }
            }
            return try await group.reduce(0) { $0 + ($1 ? 1 : 0) }
        }
        #expect(loaded == 1)
        for library in libraries { #expect(try library.snapshot().catalogue.animals.count == 13) }
    }

    @Test func readersSeeTheOldDataOrTheNewNeverAMix() async throws {
        let scratch = try ScratchDirectory()
        let writer = try ZooLibrary(scratchAt: scratch.databasePath, recheckInterval: .zero)
        let reader = try ZooLibrary(scratchAt: scratch.databasePath, recheckInterval: .zero)
        let full = try SampleFiles.file(.lexiconCSV), small = try SampleFiles.lexiconCSV(first: 5)
        try writer.importFiles([full], source: "full", trigger: .client)
        let fullCounts = try await writer.database.read(Self.lexiconCounts)
        try writer.importFiles([small], source: "small", trigger: .client)
        let smallCounts = try await writer.database.read(Self.lexiconCounts)
        #expect(fullCounts != smallCounts)
        let writing = Flag()
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                defer { writing.set() }
                for round in 0..<10 {
                    try writer.importFiles([round % 2 == 0 ? full : small], source: "flip", trigger: .client)
                }
            }
            group.addTask {
                while !writing.isSet {
                    let counts = try reader.database.read(Self.lexiconCounts)
                    #expect(counts == fullCounts || counts == smallCounts, "a reader saw a mix: \(counts)")
                    #expect([13, 5].contains(try reader.snapshot().catalogue.animals.count))
                }
            }
            try await group.waitForAll()
        }
        #expect(try reader.snapshot().catalogue.animals.count == 5)
    }

    /// Rows per lexicon table: they change together or not at all.
    static func lexiconCounts(_ db: Connection) throws -> [Int] {
        try ["animals", "animal_continents", "animal_biotopes", "animal_foods", "classes", "zoo_houses"].map {
            try db.queryOne("SELECT count(*) FROM \($0)")?.int(0) ?? -1
        }
    }

    @Test func aScheduledFiringIsImportedOnceAcrossReplicas() throws {
        let scratch = try ScratchDirectory()
        let first = try ZooLibrary(scratchAt: scratch.databasePath, recheckInterval: .zero),
            second = try ZooLibrary(scratchAt: scratch.databasePath, recheckInterval: .zero)
        let firing = Date(timeIntervalSince1970: 1_800_000_000)
        let files = [try SampleFiles.file(.adoptions)]
        #expect(try first.importFiles(files, source: "s", trigger: .schedule, scheduledFor: firing) != nil)
        #expect(try second.importFiles(files, source: "s", trigger: .schedule, scheduledFor: firing) == nil)
        #expect(try second.importFiles(files, source: "s", trigger: .schedule, scheduledFor: firing + 60) != nil)
    }
}

extension ZooLibrary {
    /// The library on `path`'s SQLite file, or (MENAGERIE_STORAGE_BACKEND=dqlite) on a dqlite database named after it:
    /// the zoo's suites run on both backends.
    convenience init(scratchAt path: String, walkingSpeed: Double = 1.2, recheckInterval: Duration = .milliseconds(50))
        throws
    {
        try self.init(
            database: .scratch(path: path, migrations: ZooSchema.migrations), walkingSpeed: walkingSpeed,
            recheckInterval: recheckInterval)
    }
}
