import Foundation
import HTTP
import RPC
import ZooAPI
import ZooCore

/// The zoo's plain HTTP side, beside its Connect calls on the same port: the visitor's web page at `/`
/// (`Web/`, a SwiftPM resource of this module) and the zoo app's REST API at `/api/…`.
public enum ZooHTTP {
    /// The web page's files as shipped: `Web/` in the resource bundle SwiftPM puts beside the executable
    /// (`Menagerie_ZooService.resources`).
    public static var bundledWebDirectory: URL {
        Bundle.module.bundleURL.appendingPathComponent("Web")
    }

    /// The routes the zoo serves over HTTP: the zoo app's REST API (`ZooRestAPI`) and the files of
    /// `webDirectory` at `/` (nil: no page). `tiles`: the imported MBTiles served at `/api/map/data` (nil: 404).
    /// `nextUpdate`: when the refresh schedule fires next.
    public static func routes(
        library: ZooLibrary, webDirectory: URL?, tiles: MapTilesStore? = nil,
        nextUpdate: @escaping @Sendable () -> Date? = { nil }
    ) throws -> HTTPRoutes {
        var builder = HTTPRoutes.Builder()
        ZooRestAPI(library: library, tiles: tiles, nextUpdate: nextUpdate).register(in: &builder)
        ZooOpenAPI.register(in: &builder)
        if let webDirectory { builder.serveFiles(try StaticFiles(directory: webDirectory)) }
        return HTTPRoutes(builder)
    }

    /// The server's one answer cache for the zoo: the Connect calls of `answersKept` and the REST routes of
    /// `ZooRestAPI.keptRoutes`, by the library's checked generation, so an import (through any replica) is answered
    /// from within the library's recheck interval, as an uncached answer would be. Up to 64 MiB, so the catalogue
    /// (~2.4 MB, plain and gzipped) fits beside the searches.
    public static func answerCache(library: ZooLibrary) -> AnswerCachePolicy {
        AnswerCachePolicy(methods: answersKept + ZooRestAPI.keptRoutes, maxBytes: 64 << 20) {
            library.checkedGeneration
        } checkedVersion: {
            _ = try library.snapshot()
            return library.checkedGeneration
        }
    }

    /// Calls whose answers depend on nothing but the request and the imported data (not the caller, the clock or the
    /// refresh schedule, as `GetMetadata`'s do): the Connect face sends a kept answer again until the data changes.
    public static let answersKept = [
        ZooV1.Zoo.searchAnimals.path, ZooV1.Zoo.getAnimal.path, ZooV1.Zoo.listFilterValues.path,
        ZooV1.Zoo.getFootpathGraph.path,
        ZooV1.Zoo.route.path, ZooV1.Zoo.nearby.path, ZooV1.Zoo.tour.path, ZooV1.Zoo.exportGeoJSON.path,
    ]
}
