import Foundation
import HTTP
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
        library: ZooLibrary, webDirectory: URL?, tiles: MapTilesStore? = nil, nextUpdate: @escaping @Sendable () -> Date? = { nil }
    ) throws -> HTTPRoutes {
        var builder = HTTPRoutes.Builder()
        ZooRestAPI(library: library, tiles: tiles, nextUpdate: nextUpdate).register(in: &builder)
        ZooOpenAPI.register(in: &builder)
        if let webDirectory { builder.serveFiles(try StaticFiles(directory: webDirectory)) }
        return HTTPRoutes(builder)
    }
}
