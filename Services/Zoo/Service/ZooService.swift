import Dispatch
import Foundation
import RPC
import Schema
import ServiceAPI
import ZooCore

/// The zoo's RPC methods (`menagerie.zoo.v1.Zoo`): thin handlers that validate the request, ask the library's
/// current snapshot and convert the answer. Domain errors carry their own status (`ZooError: RPCErrorConvertible`,
/// a busy database is mapped by ServiceKit), so handlers do not catch them.
public struct ZooService: ZooV1.Zoo.ServiceProtocol {
    public let library: ZooLibrary
    /// The refresh schedule, reported by GetMetadata.
    public let refresher: ZooRefresher?

    public init(library: ZooLibrary, refresher: ZooRefresher? = nil) {
        self.library = library
        self.refresher = refresher
    }

    public func searchAnimals(request: ZooV1.SearchAnimalsRequest, context: ServerContext) async throws -> ZooV1.SearchAnimalsResponse {
        let query = try RequestValidation.search(request)
        let page = try library.snapshot().catalogue.search(query)
        return ZooV1.SearchAnimalsResponse(total: Int32(clamping: page.total), animals: page.animals.map(ZooV1.AnimalSummary.init))
    }

    public func getAnimal(request: ZooV1.GetAnimalRequest, context: ServerContext) async throws -> ZooV1.GetAnimalResponse {
        let id = try RequestValidation.animalID(request.id)
        let catalogue = try library.snapshot().catalogue
        let animal = try catalogue.animal(id: id, includeUnavailable: request.includeUnavailable)
        return ZooV1.GetAnimalResponse(animal: ZooV1.Animal(animal, locations: catalogue.mapLocations(of: animal)))
    }

    public func listFilterValues(
        request: ZooV1.ListFilterValuesRequest, context: ServerContext
    ) async throws -> ZooV1.ListFilterValuesResponse {
        let values = try library.snapshot().catalogue.filterValues(includeUnavailable: request.includeUnavailable)
        return ZooV1.ListFilterValuesResponse(
            classes: values.classes.map(ZooV1.FilterValue.init), foods: values.foods.map(ZooV1.FilterValue.init),
            biotopes: values.biotopes.map(ZooV1.FilterValue.init), zooHouses: values.zooHouses.map(ZooV1.FilterValue.init),
            continents: values.continents.map(ZooV1.FilterValue.init))
    }

    public func getMetadata(request: ZooV1.GetMetadataRequest, context: ServerContext) async throws -> ZooV1.GetMetadataResponse {
        let metadata = try library.metadata()
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
            walkingSpeed: library.walkingSpeed)
    }

    public func importData(
        request: ZooV1.ImportDataRequest, response: ResponseWriter<ZooV1.ImportProgress>, context: ServerContext
    ) async throws {
        let files = try RequestValidation.importFiles(request)
        let source = request.source.isEmpty ? files.map(\.name).joined(separator: ", ") : request.source
        // The import runs to its end even when the caller goes away: it was asked for.
        for try await event in Self.importing(files, source: source, into: library) {
            try await response.send(event)
        }
    }

    public func route(request: ZooV1.RouteRequest, context: ServerContext) async throws -> ZooV1.RouteResponse {
        let from = try RequestValidation.place(request.from, field: "from")
        let to = try RequestValidation.place(request.to, field: "to")
        let route = try Self.withFootpaths(library.snapshot()).route(from: from, to: to)
        return ZooV1.RouteResponse(route: ZooV1.Route(route))
    }

    public func nearby(request: ZooV1.NearbyRequest, context: ServerContext) async throws -> ZooV1.NearbyResponse {
        let (point, radius, limit) = try RequestValidation.nearby(request)
        let nearby = try Self.withFootpaths(library.snapshot()).nearby(point, radius: radius)
        return ZooV1.NearbyResponse(animals: nearby.prefix(limit).map {
            ZooV1.NearbyAnimal(animal: ZooV1.AnimalSummary($0.animal), distanceM: $0.distanceMeters, locationID: $0.featureID)
        })
    }

    public func tour(request: ZooV1.TourRequest, context: ServerContext) async throws -> ZooV1.TourResponse {
        let (start, animalIDs) = try RequestValidation.tour(request)
        let tour = try Self.withFootpaths(library.snapshot()).tour(from: start, animalIDs: animalIDs)
        return ZooV1.TourResponse(
            legs: tour.legs.map {
                ZooV1.TourLeg(animal: ZooV1.AnimalSummary($0.animal), locationID: $0.featureID, route: ZooV1.Route($0.route))
            },
            distanceM: tour.distanceMeters, durationS: tour.durationSeconds)
    }

    public func exportGeoJSON(request: ZooV1.ExportGeoJSONRequest, context: ServerContext) async throws -> ZooV1.ExportGeoJSONResponse {
        ZooV1.ExportGeoJSONResponse(geojson: String(decoding: try library.snapshot().geoJSON(), as: UTF8.self))
    }

    /// The snapshot, when it has footpaths to route on.
    private static func withFootpaths(_ snapshot: ZooSnapshot) throws -> ZooSnapshot {
        guard !snapshot.router.graph.segments.isEmpty else {
            throw RPCError(.failedPrecondition, "no footpath map has been imported (gateway zoo import --map FILE)")
        }
        return snapshot
    }

    /// Runs the import on a thread of its own (it blocks on parsing and SQLite) and streams its progress; the
    /// last message carries the import's record.
    private static func importing(_ files: [ZooSourceFile], source: String, into library: ZooLibrary)
        -> AsyncThrowingStream<ZooV1.ImportProgress, any Error>
    {
        AsyncThrowingStream { continuation in
            DispatchQueue.global(qos: .userInitiated).async {
                do {
                    var last: ImportProgress?
                    let record = try library.importFiles(files, source: source, trigger: .client) { progress in
                        if progress.stage == .done { last = progress } else { continuation.yield(ZooV1.ImportProgress(progress)) }
                    }
                    if let record, let last { continuation.yield(ZooV1.ImportProgress(last, result: record)) }
                    continuation.finish()
                } catch {
                    continuation.finish(throwing: error)
                }
            }
        }
    }
}
