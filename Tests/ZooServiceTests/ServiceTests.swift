import Foundation
import Jobs
import JobsAPI
import JobsService
import RPC
import RPCTesting
import RPCWire
import Schema
import Testing
import WorkLane
import ZooAPI
import ZooService

@testable import ZooCore

/// The zoo service over the in-process transport, on the sample data in a scratch database.
final class ServiceFixture: Sendable {
    let scratch: ScratchDirectory
    let library: ZooLibrary
    let jobs: JobRunner
    let client: RPCClient

    init(sample: Bool = true) throws {
        scratch = try ScratchDirectory()
        library = try ZooLibrary(scratchAt: scratch.databasePath)
        if sample { try library.loadSampleDataIfEmpty(from: SampleFiles.directory) }
        jobs = JobRunner(
            store: try JobStore(database: library.database), lane: WorkLane(name: "lane", threads: 2, queueLimit: 8),
            failureMapping: JobsRPC.failure)
        let server = RPCServer(
            name: "zoo", services: [ZooService(library: library, jobs: jobs), JobsService(runner: jobs)])
        client = RPCClient(transports: [InProcessTransport(server: server)])
    }

    func call<Request, Response>(_ method: ProtoMethod<Request, Response>, _ request: Request) async throws -> Response
    {
        try await client.unary(method, request)
    }

    /// Starts an import job and watches it to its end: every snapshot, and the import's record. A failed job
    /// throws its status, as the call did before imports were jobs.
    func importFiles(_ files: [ZooV1.ImportFile], source: String = "") async throws
        -> (snapshots: [JobsV1.Job], record: ZooV1.ImportRecord)
    {
        let job = try await client.unary(ZooV1.Zoo.importData, ZooV1.ImportDataRequest(files: files, source: source))
        #expect(job.kind == ZooService.importJobKind)
        var snapshots: [JobsV1.Job] = []
        for try await snapshot in client.serverStreaming(JobsV1.Jobs.watchJob, JobsV1.WatchJobRequest(id: job.id)) {
            snapshots.append(snapshot)
        }
        let last = try #require(snapshots.last)
        if last.state != .succeeded, let error = last.error {
            throw RPCError(StatusCode(rawValue: error.code), error.message)
        }
        let result = try #require(last.result)
        #expect(result.typeName == ZooV1.ImportRecord.protoName)
        return (snapshots, try ZooV1.ImportRecord(serializedBytes: result.value))
    }

    static func file(_ kind: ZooV1.FileKind, _ text: String, name: String = "") -> ZooV1.ImportFile {
        ZooV1.ImportFile(kind: kind, name: name, content: Array(text.utf8))
    }
}

/// Expects `body` to fail with `code`.
func expectStatus(
    _ code: StatusCode, _ comment: Comment? = nil, sourceLocation: SourceLocation = #_sourceLocation,
    _ body: () async throws -> Void
) async {
    do {
        try await body()
        Issue.record(
            "expected \(code.name), the call succeeded \(comment.map { "(\($0))" } ?? "")",
            sourceLocation: sourceLocation)
    } catch let error as RPCError {
        #expect(error.code == code, "\(error) \(comment.map { "(\($0))" } ?? "")", sourceLocation: sourceLocation)
    } catch {
        Issue.record("expected \(code.name), got \(error)", sourceLocation: sourceLocation)
    }
}

@Suite struct ServiceTests {
    /// Who may call what on the zoo, as its guard decides (the proto's level unless `jobsAccess` overrides it): the
    /// table the App held before the levels moved into the protos. An override never closes a public method.
    @Test func theZooIsPublicButForImportsAndCancellingThem() {
        let methods = ZooV1.Zoo.methods + JobsV1.Jobs.methods
        let levels = Dictionary(
            uniqueKeysWithValues: methods.map { ($0.path, ZooService.jobsAccess[$0.path] ?? $0.access) })
        #expect(
            levels.filter { $0.value != .public } == [
                ZooV1.Zoo.importData.path: .admin, ZooV1.Zoo.importTiles.path: .admin,
                JobsV1.Jobs.cancelJob.path: .admin,
            ])
        #expect(methods.allSatisfy { $0.access != .public || ZooService.jobsAccess[$0.path] ?? .public == .public })
    }

    static let entrance = ZooV1.GeoPoint(lat: 50.1163, lon: 14.4000)

    @Test func searchDetailAndFilters() async throws {
        let zoo = try ServiceFixture()
        let found = try await zoo.call(ZooV1.Zoo.searchAnimals, .init(text: "ZELVA"))
        #expect(found.total == 1 && found.animals.first?.name == "Želva obrovská")
        let everything = try await zoo.call(ZooV1.Zoo.searchAnimals, .init(includeUnavailable: true, pageSize: 0))
        #expect(everything.total == 13 && everything.animals.isEmpty)
        let kept = try await zoo.call(ZooV1.Zoo.searchAnimals, .init(text: ""))
        #expect(kept.total == 12 && kept.animals.count == 12)
        let mammals = try await zoo.call(
            ZooV1.Zoo.searchAnimals, .init(classes: ["savci"], continents: ["Asie", "Afrika"]))
        #expect(mammals.total > 0 && mammals.animals.allSatisfy { $0.className == "Savci" })

        let lion = try #require(try await zoo.call(ZooV1.Zoo.getAnimal, .init(id: 1)).animal)
        #expect(lion.name == "Lev indický" && lion.taxonClass == ZooV1.Taxon(czech: "Savci", latin: "Mammalia"))
        #expect(lion.adoption?.englishName == "Lion" && lion.englishName == "Lion" && lion.mapLocations.count == 2)
        #expect(lion.available && lion.description != nil && lion.location == "Pavilon šelem a plazů")
        await expectStatus(.notFound) { _ = try await zoo.call(ZooV1.Zoo.getAnimal, .init(id: 12)) }
        let hippo = try await zoo.call(ZooV1.Zoo.getAnimal, .init(id: 12, includeUnavailable: true))
        #expect(hippo.animal?.available == false)
        await expectStatus(.notFound) { _ = try await zoo.call(ZooV1.Zoo.getAnimal, .init(id: 9999)) }

        let filters = try await zoo.call(ZooV1.Zoo.listFilterValues, .init())
        #expect(filters.classes.reduce(0) { $0 + $1.count } == 12)
        let all = try await zoo.call(ZooV1.Zoo.listFilterValues, .init(includeUnavailable: true))
        #expect(all.classes.reduce(0) { $0 + $1.count } == 13)
        for value in filters.zooHouses {
            let page = try await zoo.call(ZooV1.Zoo.searchAnimals, .init(zooHouses: [value.value], pageSize: 0))
            #expect(Int(page.total) == Int(value.count), "\(value.value)")
        }
    }

    @Test func badRequestsAreInvalidArguments() async throws {
        let zoo = try ServiceFixture()
        let cases: [(String, ZooV1.SearchAnimalsRequest)] = [
            ("negative page size", .init(pageSize: -1)), ("huge page size", .init(pageSize: 100_000)),
            ("negative offset", .init(offset: -5)), ("long text", .init(text: String(repeating: "a", count: 201))),
            ("empty filter value", .init(foods: [""])),
            ("too many values", .init(classes: Array(repeating: "x", count: 51))),
            ("201 scalars in 3 characters", .init(text: "e" + String(repeating: "\u{301}", count: 200))),
        ]
        for (name, request) in cases {
            await expectStatus(.invalidArgument, "\(name)") { _ = try await zoo.call(ZooV1.Zoo.searchAnimals, request) }
        }
        // One character of 14 MB ("a" and 7 million combining accents) is over the method's own request limit (64 KiB,
        // zoo.proto's max_request_bytes): refused before the handler reads it.
        await expectStatus(.resourceExhausted, "one huge character") {
            _ = try await zoo.call(
                ZooV1.Zoo.searchAnimals, .init(text: "a" + String(repeating: "\u{301}", count: 7_000_000)))
        }
        // The limit counts scalars: 200 two-byte letters are fine.
        _ = try await zoo.call(ZooV1.Zoo.searchAnimals, .init(text: String(repeating: "ž", count: 200)))
        for id: Int64 in [0, -1, .min] {
            await expectStatus(.invalidArgument, "id \(id)") {
                _ = try await zoo.call(ZooV1.Zoo.getAnimal, .init(id: id))
            }
        }
        let point = ZooV1.Place(point: Self.entrance)
        let badPlaces: [(String, ZooV1.Place?)] = [
            ("missing", nil), ("empty", ZooV1.Place()), ("two at once", ZooV1.Place(point: Self.entrance, animalID: 1)),
            ("NaN", ZooV1.Place(point: .init(lat: .nan, lon: 14.4))),
            ("infinite", ZooV1.Place(point: .init(lat: 50.1, lon: .infinity))),
            ("latitude 91", ZooV1.Place(point: .init(lat: 91, lon: 14.4))), ("animal 0", ZooV1.Place(animalID: 0)),
            ("blank pavilion", ZooV1.Place(zooHouse: "  ")),
        ]
        for (name, place) in badPlaces {
            await expectStatus(.invalidArgument, "from \(name)") {
                _ = try await zoo.call(ZooV1.Zoo.route, .init(from: place, to: point))
            }
            await expectStatus(.invalidArgument, "to \(name)") {
                _ = try await zoo.call(ZooV1.Zoo.route, .init(from: point, to: place))
            }
        }
        let nearby: [(String, ZooV1.NearbyRequest)] = [
            ("no point", .init(radiusM: 100)), ("negative radius", .init(point: Self.entrance, radiusM: -1)),
            ("NaN radius", .init(point: Self.entrance, radiusM: .nan)),
            ("huge radius", .init(point: Self.entrance, radiusM: 1e9)),
            ("limit 0", .init(point: Self.entrance, radiusM: 100, limit: 0)),
        ]
        for (name, request) in nearby {
            await expectStatus(.invalidArgument, "\(name)") { _ = try await zoo.call(ZooV1.Zoo.nearby, request) }
        }
        await expectStatus(.invalidArgument) { _ = try await zoo.call(ZooV1.Zoo.tour, .init(start: Self.entrance)) }
        await expectStatus(.invalidArgument) {
            _ = try await zoo.call(ZooV1.Zoo.tour, .init(start: Self.entrance, animalIds: Array(1...31)))
        }
        await expectStatus(.invalidArgument) { _ = try await zoo.call(ZooV1.Zoo.tour, .init(animalIds: [1])) }
        let unknownKind = ZooV1.ImportFile(kind: .unrecognized(99), name: "x", content: [1])
        for files in [
            [], [unknownKind], [ZooV1.ImportFile(kind: .unspecified, content: [1])], [ServiceFixture.file(.map, "")],
            [ServiceFixture.file(.map, "{}"), ServiceFixture.file(.map, "{}")],
        ] {
            await expectStatus(.invalidArgument, "\(files.map(\.kind))") { _ = try await zoo.importFiles(files) }
        }
    }

    @Test func routingAnswersAndItsErrors() async throws {
        let zoo = try ServiceFixture()
        let route = try #require(
            try await zoo.call(ZooV1.Zoo.route, .init(from: .init(point: Self.entrance), to: .init(animalID: 1))).route)
        #expect(route.distanceM > 0 && abs(route.durationS - route.distanceM / 1.2) < 1e-9)
        #expect(route.coordinates.count == route.nodeIds.count + 2)
        let between = try await zoo.call(
            ZooV1.Zoo.route, .init(from: .init(animalID: 2), to: .init(zooHouse: "Pavilon šelem a plazů")))
        #expect((between.route?.distanceM ?? 0) > 0)
        await expectStatus(.outOfRange) {
            _ = try await zoo.call(
                ZooV1.Zoo.route, .init(from: .init(point: .init(lat: 50.0875, lon: 14.4213)), to: .init(animalID: 1)))
        }
        await expectStatus(.failedPrecondition) {
            _ = try await zoo.call(ZooV1.Zoo.route, .init(from: .init(point: Self.entrance), to: .init(animalID: 13)))
        }
        await expectStatus(.notFound) {
            _ = try await zoo.call(ZooV1.Zoo.route, .init(from: .init(point: Self.entrance), to: .init(animalID: 4242)))
        }
        await expectStatus(.notFound) {
            _ = try await zoo.call(
                ZooV1.Zoo.route, .init(from: .init(point: Self.entrance), to: .init(zooHouse: "Nowhere")))
        }

        let nearby = try await zoo.call(ZooV1.Zoo.nearby, .init(point: Self.entrance, radiusM: 10_000, limit: 3))
        #expect(
            nearby.animals.count == 3 && nearby.animals.map(\.distanceM) == nearby.animals.map(\.distanceM).sorted())
        let tour = try await zoo.call(ZooV1.Zoo.tour, .init(start: Self.entrance, animalIds: [1, 2, 3, 2]))
        #expect(Set(tour.legs.compactMap { $0.animal?.id }) == [1, 2, 3] && tour.distanceM > 0)
        await expectStatus(.failedPrecondition) {
            _ = try await zoo.call(ZooV1.Zoo.tour, .init(start: Self.entrance, animalIds: [1, 13]))
        }

        let geojson = try await zoo.call(ZooV1.Zoo.exportGeoJSON, .init()).geojson
        let object = try JSONSerialization.jsonObject(with: Data(geojson.utf8)) as? [String: Any]
        #expect(object?["type"] as? String == "FeatureCollection")

        // Two footpaths that do not meet: one end joins the other's footpath, and the answer says how far away.
        let islands = """
            {"nodes": [], "roads": [
              {"_id": 1, "geometry": {"coordinates": [{"_id": 1, "lon": 14.4000, "lat": 50.1150}, {"_id": 2, "lon": 14.4010, "lat": 50.1150}]}},
              {"_id": 2, "geometry": {"coordinates": [{"_id": 3, "lon": 14.4000, "lat": 50.1180}, {"_id": 4, "lon": 14.4010, "lat": 50.1180}]}}]}
            """
        _ = try await zoo.importFiles([ServiceFixture.file(.map, islands)])
        let across = try await zoo.call(
            ZooV1.Zoo.route,
            .init(
                from: .init(point: .init(lat: 50.1151, lon: 14.4005)),
                to: .init(point: .init(lat: 50.1179, lon: 14.4005))))
        let snaps = [across.fromSnapM, across.toSnapM].sorted()
        #expect(
            abs(snaps[0] - 0.0001 * Geo.metersPerDegree) < 1 && abs(snaps[1] - 0.0029 * Geo.metersPerDegree) < 1,
            "\(snaps)")
        #expect((across.route?.distanceM ?? 1) < 1e-6)
    }

    @Test func routingWithoutAMapIsAFailedPrecondition() async throws {
        let zoo = try ServiceFixture(sample: false)
        await expectStatus(.failedPrecondition) {
            _ = try await zoo.call(
                ZooV1.Zoo.route, .init(from: .init(point: Self.entrance), to: .init(point: Self.entrance)))
        }
        #expect(try await zoo.call(ZooV1.Zoo.searchAnimals, .init()).total == 0)
        #expect(try await zoo.call(ZooV1.Zoo.getMetadata, .init()).lastImport == nil)
    }

    @Test func importRunsAsAJobAndRecordsMetadata() async throws {
        let zoo = try ServiceFixture()
        let csv = try SampleFiles.lexiconCSV(first: 3)
        let (snapshots, result) = try await zoo.importFiles(
            [ZooV1.ImportFile(kind: .lexiconCsv, name: "small.csv", content: Array(csv.content))], source: "unit test")
        #expect(snapshots.map(\.progress) == snapshots.map(\.progress).sorted())
        #expect(snapshots.last?.state == .succeeded && snapshots.last?.progress == 1)
        #expect(
            result.succeeded && result.rowsImported == 3 && result.source == "unit test" && result.trigger == .client)
        #expect(try await zoo.call(ZooV1.Zoo.searchAnimals, .init(includeUnavailable: true)).total == 3)

        await expectStatus(.invalidArgument) {
            _ = try await zoo.importFiles([ServiceFixture.file(.animalsJson, "[oops", name: "broken.json")])
        }
        let metadata = try await zoo.call(ZooV1.Zoo.getMetadata, .init())
        #expect(metadata.lastImport?.succeeded == false)
        #expect(metadata.lastFailedImport?.error?.contains("broken.json") == true)
        #expect(metadata.lastSuccessfulImport?.id == result.id)
        #expect(metadata.counts?.animals == 3 && metadata.lexiconKind == .lexiconCsv && metadata.walkingSpeed == 1.2)
        #expect(try await zoo.call(ZooV1.Zoo.searchAnimals, .init(includeUnavailable: true)).total == 3)
    }

    /// A core error reaches the caller as its category's status with its message, though no handler catches it;
    /// an import job fails the same way, naming the file it could not read.
    @Test func aCoreErrorsMessageReachesTheCaller() async throws {
        let zoo = try ServiceFixture()
        await #expect(throws: RPCError(.notFound, "no animal with id 9999")) {
            _ = try await zoo.call(ZooV1.Zoo.getAnimal, .init(id: 9999))
        }
        let failed = await #expect(throws: RPCError.self) {
            _ = try await zoo.importFiles([ServiceFixture.file(.lexiconCsv, "id;name\n1;x\n", name: "odd.csv")])
        }
        #expect(failed?.code == .invalidArgument)
        #expect(
            failed?.message.hasPrefix("cannot import odd.csv: unexpected header") == true,
            "\(String(describing: failed))")
    }

    /// The generated client and registration: every rpc of the proto is routed (reflection lists all nine, none
    /// left UNIMPLEMENTED), and the typed client reaches them.
    @Test func theGeneratedProtocolRegistersEveryRPCAndTheTypedClientCallsThem() async throws {
        let zoo = try ServiceFixture()
        let reflection = try await RpcV1.Reflection.Client(wrapping: zoo.client).listServices(
            RpcV1.ListServicesRequest())
        let zooMethods = reflection.services.first { $0.name == ZooV1.Zoo.name }?.methods ?? []
        #expect(Set(zooMethods.map(\.path)) == Set(ZooV1.Zoo.methods.map(\.path)))
        #expect(zooMethods.count == 12)
        // Only the tiles upload streams from the client (pieces of a file of up to 1 GiB, each under the frame limit).
        #expect(zooMethods.filter(\.clientStreaming).map(\.path) == [ZooV1.Zoo.importTiles.path])
        // The import is a job; only the bulk export streams (pages of the catalogue, under the frame limit).
        #expect(zooMethods.filter(\.serverStreaming).map(\.path) == [ZooV1.Zoo.exportCatalogue.path])

        let client = ZooV1.Zoo.Client(wrapping: zoo.client)
        #expect(try await client.searchAnimals(.init(text: "ZELVA")).animals.first?.name == "Želva obrovská")
        await expectStatus(.notFound) { _ = try await client.getAnimal(.init(id: 999_999)) }
        // A server given no tiles store takes no tiles.
        await expectStatus(.failedPrecondition) {
            _ = try await client.importTiles { try await $0.send(.init(data: [0x53])) }
        }
        let csv = try SampleFiles.lexiconCSV(first: 2)
        let job = try await client.importData(
            .init(files: [ZooV1.ImportFile(kind: .lexiconCsv, name: "two.csv", content: Array(csv.content))]))
        var last: JobsV1.Job?
        for try await snapshot in JobsV1.Jobs.Client(wrapping: zoo.client).watchJob(.init(id: job.id)) {
            last = snapshot
        }
        #expect(last?.state == .succeeded)
    }

    /// On a dqlite cluster the zoo's data is replicated and the tiles file is not: an upload through one replica
    /// is refused (naming where the file goes) instead of being served by one node while the others serve theirs.
    @Test func tilesAreRefusedOnAClusterWhereOnlyOneNodeWouldHaveThem() async throws {
        let scratch = try ScratchDirectory()
        let library = try ZooLibrary(scratchAt: scratch.databasePath)
        let tiles = MapTilesStore(besideDatabase: scratch.databasePath)
        let server = RPCServer(name: "zoo", services: [ZooService(library: library, tiles: tiles, tilesShared: false)])
        let client = ZooV1.Zoo.Client(wrapping: RPCClient(transports: [InProcessTransport(server: server)]))
        do {
            _ = try await client.importTiles { try await $0.send(.init(data: MapTilesStore.sqliteHeader)) }
            Issue.record("tiles were taken on a cluster")
        } catch let error as RPCError {
            #expect(error.code == .failedPrecondition && error.message.contains(tiles.path), "\(error)")
        }
        #expect(tiles.current() == nil)
    }
}
