import Foundation
import Jobs
import JobsAPI
import JobsService
import RPC
import Schema
import ZooAPI
import ZooCore

/// The zoo's RPC methods (`menagerie.zoo.v1.Zoo`): thin handlers that validate the request, ask the library's
/// current snapshot and convert the answer. Domain, storage and lane errors carry their category
/// (`CategorizedError`), which the RPC server answers with its status, so handlers do not catch them.
public struct ZooService: ZooV1.Zoo.ServiceProtocol {
    public let library: ZooLibrary
    /// The refresh schedule, reported by GetMetadata.
    public let refresher: ZooRefresher?
    /// Runs imports (on the heavy-work lane, recorded in the zoo's database); the service offers
    /// `JobsService(runner: jobs)` beside this one. Without it ImportData answers FAILED_PRECONDITION.
    public let jobs: JobRunner?
    /// Where ImportTiles stores the map's MBTiles file (nil: this server takes none).
    public let tiles: MapTilesStore?
    /// Whether every replica reads the tiles this one stores: true when they share its data directory; false on a
    /// dqlite cluster, where the data is replicated and the tiles file is not, so ImportTiles is refused rather than
    /// stored on one node while the others go on serving their own.
    public let tilesShared: Bool

    /// The kind of the jobs ImportData starts.
    public static let importJobKind = "zoo.import"

    /// The levels at which the zoo serves the shared Jobs service, which jobs.proto gives to users (an OCR user's
    /// jobs are that user's): the zoo's jobs are its imports, which every visitor may follow, and cancelling one
    /// changes what every visitor sees. Every other zoo method's level is zoo.proto's.
    public static let jobsAccess: [String: MethodAccess] = [
        JobsV1.Jobs.getJob.path: .public, JobsV1.Jobs.watchJob.path: .public, JobsV1.Jobs.listJobs.path: .public,
        JobsV1.Jobs.cancelJob.path: .admin,
    ]

    public init(
        library: ZooLibrary, refresher: ZooRefresher? = nil, jobs: JobRunner? = nil, tiles: MapTilesStore? = nil,
        tilesShared: Bool = true
    ) {
        self.library = library
        self.refresher = refresher
        self.jobs = jobs
        self.tiles = tiles
        self.tilesShared = tilesShared
    }

    public func searchAnimals(request: ZooV1.SearchAnimalsRequest, context: ServerContext) async throws
        -> ZooV1.SearchAnimalsResponse
    {
        let query = try RequestValidation.search(request)
        let page = try library.snapshot().catalogue.search(query)
        return ZooV1.SearchAnimalsResponse(
            total: Int32(clamping: page.total), animals: page.animals.map(ZooV1.AnimalSummary.init))
    }

    public func getAnimal(request: ZooV1.GetAnimalRequest, context: ServerContext) async throws
        -> ZooV1.GetAnimalResponse
    {
        let id = try RequestValidation.animalID(request.id)
        let catalogue = try library.snapshot().catalogue
        let animal = try catalogue.animal(id: id, includeUnavailable: request.includeUnavailable)
        return ZooV1.GetAnimalResponse(animal: ZooV1.Animal(animal, in: catalogue))
    }

    public func listFilterValues(
        request: ZooV1.ListFilterValuesRequest, context: ServerContext
    ) async throws -> ZooV1.ListFilterValuesResponse {
        let values = try library.snapshot().catalogue.filterValues(includeUnavailable: request.includeUnavailable)
        return ZooV1.ListFilterValuesResponse(
            classes: values.classes.map(ZooV1.FilterValue.init), foods: values.foods.map(ZooV1.FilterValue.init),
            biotopes: values.biotopes.map(ZooV1.FilterValue.init),
            zooHouses: values.zooHouses.map(ZooV1.FilterValue.init),
            continents: values.continents.map(ZooV1.FilterValue.init))
    }

    public func getMetadata(request: ZooV1.GetMetadataRequest, context: ServerContext) async throws
        -> ZooV1.GetMetadataResponse
    {
        let metadata = try await library.metadata()
        let snapshot = try library.snapshot()
        let counts = metadata.counts
        return ZooV1.GetMetadataResponse(
            lastImport: metadata.lastImport.map(ZooV1.ImportRecord.init),
            lastSuccessfulImport: metadata.lastSuccessfulImport.map(ZooV1.ImportRecord.init),
            lastFailedImport: metadata.lastFailedImport.map(ZooV1.ImportRecord.init),
            counts: ZooV1.DataCounts(metadata.counts),
            lexiconKind: metadata.lexiconKind.map(ZooV1.FileKind.init) ?? .unspecified,
            refresh: refresher.map {
                ZooV1.RefreshSchedule(
                    cron: $0.scheduler.schedule.description, sources: $0.sources.map(\.description),
                    nextRun: $0.scheduler.nextRun?.timeIntervalSince1970)
            },
            walkingSpeed: library.walkingSpeed,
            routability: ZooV1.Routability(snapshot.routability()),
            sources: ZooV1.SourceCounts(
                lexiconCsvOnly: Int32(clamping: counts.lexiconCSVOnly),
                animalsJsonOnly: Int32(clamping: counts.animalsJSONOnly),
                both: Int32(clamping: counts.bothSources)),
            tiles: tiles?.current().map(ZooV1.MapTiles.init))
    }

    public func importTiles(
        requests: RequestStream<ZooV1.ImportTilesRequest>, context: ServerContext
    ) async throws -> ZooV1.ImportTilesResponse {
        guard let tiles else { throw RPCError(.failedPrecondition, "this zoo server stores no map tiles") }
        guard tilesShared else {
            throw RPCError(
                .failedPrecondition,
                "this zoo replica keeps its data in a dqlite cluster, and map tiles are a file of each node's own: put the "
                    + ".mbtiles file at \(tiles.path) on every node (they are read from there), not through one replica"
            )
        }
        // Pieces go to a temporary file as they arrive, so a file of hundreds of MB is never held in memory.
        let upload = try tiles.beginUpload()
        do {
            for try await piece in requests { try upload.append(piece.data) }
            return ZooV1.ImportTilesResponse(tiles: ZooV1.MapTiles(try upload.finish()))
        } catch {
            upload.discard()
            throw error
        }
    }

    public func exportCatalogue(
        request: ZooV1.ExportCatalogueRequest, response: ResponseWriter<ZooV1.CataloguePage>, context: ServerContext
    ) async throws {
        let pageSize = try RequestValidation.exportPageSize(request.pageSize)
        let catalogue = try library.snapshot().catalogue
        let total = Int32(clamping: catalogue.animals.count)
        var start = 0
        repeat {
            let page = catalogue.animals[start..<min(start + pageSize, catalogue.animals.count)]
            try await response.send(
                ZooV1.CataloguePage(animals: page.map { ZooV1.Animal($0, in: catalogue) }, total: total))
            start += pageSize
        } while start < catalogue.animals.count
    }

    public func getFootpathGraph(
        request: ZooV1.GetFootpathGraphRequest, context: ServerContext
    ) async throws -> ZooV1.GetFootpathGraphResponse {
        let graph = try library.snapshot().router.graph
        var roadsOfNode = Array(repeating: [Int64](), count: graph.nodeIDs.count)
        for road in graph.roads {
            for node in Set(road.nodes) { roadsOfNode[Int(node)].append(road.id) }
        }
        return ZooV1.GetFootpathGraphResponse(
            nodes: graph.nodeIDs.indices.map { index in
                let roads = roadsOfNode[index].sorted()
                return ZooV1.FootpathNode(
                    id: graph.nodeIDs[index], lon: graph.positions[index].lon, lat: graph.positions[index].lat,
                    roadIds: roads,
                    isConnector: roads.count > 1)
            },
            roads: graph.roads.map { road in
                ZooV1.Footpath(id: road.id, nodeIds: road.nodes.map { graph.nodeIDs[Int($0)] })
            })
    }

    public func importData(request: ZooV1.ImportDataRequest, context: ServerContext) async throws -> JobsV1.Job {
        let files = try RequestValidation.importFiles(request)
        let source = request.source.isEmpty ? files.map(\.name).joined(separator: ", ") : request.source
        guard let jobs else {
            throw RPCError(.failedPrecondition, "this zoo server runs no jobs, so it takes no imports")
        }
        let library = library
        // The import runs to its end even when the caller goes away: it was asked for (CancelJob stops it
        // between stages; once writing, the transaction finishes).
        let job = try await jobs.start(
            kind: Self.importJobKind, submitter: context.submitter, user: context.caller?.name
        ) { context -> ZooV1.ImportRecord in
            let record = try library.importFiles(files, source: source, trigger: .client) { progress in
                if progress.stage != .done { context.report(progress: progress.fraction, message: progress.message) }
            }
            // only for onlyIfEmpty/scheduledFor
            guard let record else { throw RPCError(.internalError, "the import was skipped") }
            return ZooV1.ImportRecord(record)
        }
        return JobsV1.Job(job)
    }

    public func route(request: ZooV1.RouteRequest, context: ServerContext) async throws -> ZooV1.RouteResponse {
        let from = try RequestValidation.place(request.from, field: "from")
        let to = try RequestValidation.place(request.to, field: "to")
        let (route, destination) = try Self.withFootpaths(library.snapshot()).routeWithDestination(from: from, to: to)
        func offset(_ place: Place, _ metres: Double) -> Double { if case .point = place { metres } else { 0 } }
        return ZooV1.RouteResponse(
            route: ZooV1.Route(route), destination: ZooV1.Destination(destination),
            fromSnapM: offset(from, route.startOffsetMeters), toSnapM: offset(to, route.endOffsetMeters))
    }

    public func nearby(request: ZooV1.NearbyRequest, context: ServerContext) async throws -> ZooV1.NearbyResponse {
        let (point, radius, limit) = try RequestValidation.nearby(request)
        let nearby = try Self.withFootpaths(library.snapshot()).nearby(point, radius: radius)
        return ZooV1.NearbyResponse(
            animals: nearby.prefix(limit).map {
                ZooV1.NearbyAnimal(
                    animal: ZooV1.AnimalSummary($0.animal), distanceM: $0.distanceMeters, locationID: $0.featureID)
            })
    }

    public func tour(request: ZooV1.TourRequest, context: ServerContext) async throws -> ZooV1.TourResponse {
        let (start, animalIDs) = try RequestValidation.tour(request)
        let tour = try Self.withFootpaths(library.snapshot()).tour(from: start, animalIDs: animalIDs)
        return ZooV1.TourResponse(
            legs: tour.legs.map {
                ZooV1.TourLeg(
                    animal: ZooV1.AnimalSummary($0.animal), locationID: $0.featureID, route: ZooV1.Route($0.route))
            },
            distanceM: tour.distanceMeters, durationS: tour.durationSeconds)
    }

    public func exportGeoJSON(request: ZooV1.ExportGeoJSONRequest, context: ServerContext) async throws
        -> ZooV1.ExportGeoJSONResponse
    {
        ZooV1.ExportGeoJSONResponse(geojson: String(decoding: try library.snapshot().geoJSON(), as: UTF8.self))
    }

    /// The snapshot, when it has footpaths to route on.
    private static func withFootpaths(_ snapshot: ZooSnapshot) throws -> ZooSnapshot {
        guard !snapshot.router.graph.segments.isEmpty else {
            throw RPCError(.failedPrecondition, "no footpath map has been imported (gateway zoo import --map FILE)")
        }
        return snapshot
    }
}
