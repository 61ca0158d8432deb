import Foundation
import HTTP
import Schema
import Synchronization
import ZooAPI
import ZooCore

/// The zoo app's REST API, in its own shapes, so a client of the app it replaces works unchanged:
/// `GET /api/animals`, `/api/animals/{id}`, the filter lists, `/api/map/metadata` (the footpath graph)
/// and `/api/map/data` (map tiles, when imported). Each list answers
/// `{"metadata": {"last_update_start", "last_update_end", "next_update"}, "data": …}`; an animal has
/// animals.json's fields; the graph is map-metadata.json's `{metadata, nodes, roads}`.
///
/// The whole catalogue is ~2.4 MB of JSON: each answer is tagged by its bytes, so replicas on one database give
/// equal tags and an import changes the tag, and kept by the server's one answer cache (`AnswerCachePolicy`, the
/// routes of `keptRoutes`) as the zoo's Connect answers are, for the data generation it was made from: built once
/// per import and way of asking (gzip or not), sent again from the event loop after the guard.
public final class ZooRestAPI: Sendable {
    let library: ZooLibrary
    let nextUpdate: @Sendable () -> Date?
    /// The imported map tiles (nil: this server has none to serve).
    let tiles: MapTilesStore?
    /// The tiles file as last read, whole, and its tag: read once per import (per replica) and shared by every
    /// download, never gzipped (SQLite pages barely compress, and a copy would double the memory).
    private let loadedTiles = Mutex<LoadedTiles?>(nil)

    /// `nextUpdate`: when the refresh schedule fires next (nil: no schedule).
    public init(library: ZooLibrary, tiles: MapTilesStore? = nil, nextUpdate: @escaping @Sendable () -> Date? = { nil })
    {
        self.library = library
        self.tiles = tiles
        self.nextUpdate = nextUpdate
    }

    /// The API's routes as bindings (`google.api.http` style): each runs as a call of the method it binds — guarded by
    /// its access rule, under a deadline, counted in `gateway stats` under its name — or as a route-only call where no
    /// method answers alike (the unpaged list, the tiles download). A bound route is declared in zoo.proto, on its
    /// method (`option (menagerie.rpc.v1.http_get)`); this API renders each one the proto declares, and only those.
    enum Bindings {
        static let animals = HTTPBinding("/api/animals")
        static let animal = declared(ZooV1.Zoo.getAnimal.info, "/api/animals/{id}")
        static let lists = [
            ("classes", \FilterValues.classes), ("biotops", \FilterValues.biotopes), ("foods", \FilterValues.foods),
            ("zooHouses", \FilterValues.zooHouses),
        ].map { (declared(ZooV1.Zoo.listFilterValues.info, "/api/\($0.0)"), $0.1) }
        static let map = declared(ZooV1.Zoo.getFootpathGraph.info, "/api/map/metadata")
        static let tiles = HTTPBinding("/api/map/data")

        /// Every route of the API, the proto's and the route-only ones.
        static var all: [HTTPBinding] { [animals, animal] + lists.map(\.0) + [map, tiles] }

        /// The routes whose answers depend on nothing but the request and the imported data (the tiles download
        /// keeps its own bytes, tagged by the file).
        static var kept: [HTTPBinding] { all.filter { $0 != tiles } }

        /// `path` bound to `method`, which must declare it: a route the proto does not name is a programming error.
        static func declared(_ method: ProtoMethodInfo, _ path: String) -> HTTPBinding {
            precondition(method.httpGet.contains(path), "\(method.path) declares no http_get \"\(path)\" in its proto")
            return HTTPBinding(path, binds: method.path)
        }

        /// The routes the proto binds to the zoo's methods, which `register` must all render.
        static var declaredByTheProto: Set<HTTPBinding> {
            Set(ZooV1.Zoo.methods.flatMap { method in method.httpGet.map { HTTPBinding($0, binds: method.path) } })
        }
    }

    /// The names of the routes the server's answer cache may answer (`AnswerCachePolicy.methods`).
    public static var keptRoutes: [String] { Bindings.kept.map(\.name) }

    /// Adds the API's routes to `routes`, and its error style: FastAPI's `{"detail": …}`, `Item not found` for any 404.
    public func register(in routes: inout HTTPRoutes.Builder) {
        // A route added to zoo.proto without a renderer here would silently 404: refuse to start instead.
        precondition(
            Bindings.declaredByTheProto.isSubset(of: Bindings.all),
            "zoo.proto binds routes the REST API does not render: \(Bindings.declaredByTheProto.subtracting(Bindings.all).map(\.path))"
        )
        routes.problem = Self.problem
        routes.bind(Bindings.animals) { [self] request in
            let includeUnavailable = try Self.includeUnavailable(request)
            return try await answer(request) { snapshot in
                .array(
                    snapshot.catalogue.animals.filter { includeUnavailable || $0.isCurrentlyAvailable }.map {
                        ZooRestShapes.animal($0, snapshot.catalogue)
                    })
            }
        }
        // A list of one, as the app's server answered (`AnimalsResult(data=[animal])`).
        routes.bind(Bindings.animal) { [self] request in
            let text = request.path.dropFirst("/api/animals/".count)
            guard let id = Int(text), !text.hasPrefix("+") else {
                throw ZooError.invalidArgument("the animal id must be an integer")
            }
            let includeUnavailable = try Self.includeUnavailable(request)
            let animal = try library.snapshot().catalogue.animal(id: id, includeUnavailable: includeUnavailable)
            return try await answer(request) { snapshot in
                .array([ZooRestShapes.animal(animal, snapshot.catalogue)])
            }
        }
        for (binding, values) in Bindings.lists {
            routes.bind(binding) { [self] request in
                try await answer(request) { snapshot in
                    .array(snapshot.catalogue.filterValues()[keyPath: values].map { .string($0.value) })
                }
            }
        }
        routes.bind(Bindings.map) { [self] request in
            try await answer(request, wrapped: false) { snapshot in ZooRestShapes.map(snapshot.router.graph) }
        }
        routes.bind(Bindings.tiles) { [self] request in try mapData(request) }
    }

    /// `include_currently_unavailable` (default false), as FastAPI reads a boolean; anything else is a 422.
    static func includeUnavailable(_ request: HTTPRequest) throws(ZooError) -> Bool {
        guard let flag = bool(query(request)["include_currently_unavailable"] ?? "false") else {
            throw .invalidArgument("include_currently_unavailable must be true or false")
        }
        return flag
    }

    // MARK: Map tiles

    struct LoadedTiles: Sendable {
        let identity: MapTilesStore.Identity
        let bytes: [UInt8]
        let entityTag: String
    }

    /// The MBTiles file as an attachment, tagged with a hash of its bytes (equal on every replica); 404 before
    /// any import. The stored file's identity is checked per request (one `stat`), so a new import, from any
    /// replica, is served from the next request on.
    private func mapData(_ request: HTTPRequest) throws(ZooError) -> HTTPResponse {
        guard let tiles, let identity = tiles.identity() else {
            throw ZooError(.notFound, "no map tiles were imported")
        }
        let loaded: LoadedTiles?
        do {
            // Under the lock, so concurrent first downloads read the file once, and the old bytes are let go first.
            loaded = try loadedTiles.withLock { state in
                if let state, state.identity == identity { return state }
                state = nil
                state = try tiles.read().map {
                    LoadedTiles(identity: $0.identity, bytes: $0.bytes, entityTag: EntityTag.strong($0.bytes))
                }
                return state
            }
        } catch {
            throw ZooError(.unavailable, "the map tiles cannot be read: \(error)")
        }
        guard let loaded else { throw ZooError(.notFound, "no map tiles were imported") }
        let name = URL(fileURLWithPath: tiles.path).lastPathComponent
        let headers: HTTPHeaders = [
            "Content-Type": Self.mbtilesType, "Content-Disposition": "attachment; filename=\"\(name)\"",
            "ETag": loaded.entityTag,
            "Cache-Control": "no-cache",
        ]
        if let ifNoneMatch = request.headers["if-none-match"], EntityTag.matches(ifNoneMatch, loaded.entityTag) {
            return HTTPResponse(status: 304, headers: headers)
        }
        return HTTPResponse(status: 200, headers: headers, body: loaded.bytes)
    }

    /// SQLite's registered media type, which the OpenAPI document gives for this route.
    static let mbtilesType = "application/vnd.sqlite3"

    // MARK: Building and caching answers

    static let json = "application/json"

    /// The answer of the current snapshot built by `data` (inside the envelope unless `wrapped` is false: then `data`
    /// is the whole document, whose `metadata` member is filled in), tagged by its bytes; kept by the server's answer
    /// cache, so it is built once per data generation.
    private func answer(
        _ request: HTTPRequest, wrapped: Bool = true, _ data: @Sendable (ZooSnapshot) -> JSONValue
    ) async throws -> HTTPResponse {
        // A storage failure is the storage error's category (UNAVAILABLE: 503), as for any call.
        let snapshot = try library.snapshot()
        let metadata = await envelopeMetadata()
        var document = data(snapshot)
        if wrapped {
            document = .object([JSONMember("metadata", metadata), JSONMember("data", document)])
        } else if case .object(let members) = document {
            document = .object([JSONMember("metadata", metadata)] + members)
        }
        return CachedBody.response(Array(document.serialized().utf8), contentType: Self.json, to: request)
    }

    /// `{"last_update_start", "last_update_end", "next_update"}`: the last successful import's times and the
    /// refresh schedule's next firing, as the zoo app wrote them (ISO 8601, UTC, no zone), null when unknown.
    private func envelopeMetadata() async -> JSONValue {
        let last = try? await library.metadata().lastSuccessfulImport
        return .object([
            JSONMember("last_update_start", Self.timestamp(last?.startedAt)),
            JSONMember("last_update_end", Self.timestamp(last?.finishedAt)),
            JSONMember("next_update", Self.timestamp(nextUpdate())),
        ])
    }

    private static func timestamp(_ date: Date?) -> JSONValue {
        guard let date else { return .null }
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        let parts = calendar.dateComponents([.year, .month, .day, .hour, .minute, .second, .nanosecond], from: date)
        let micros = (parts.nanosecond ?? 0) / 1000
        return .string(
            String(
                format: "%04d-%02d-%02dT%02d:%02d:%02d.%06d", parts.year ?? 0, parts.month ?? 0, parts.day ?? 0,
                parts.hour ?? 0,
                parts.minute ?? 0, parts.second ?? 0, micros))
    }

    /// FastAPI's error body, `{"detail": "…"}`; every 404 says `Item not found`, as the app's server's did.
    static let problem: HTTPProblemRenderer = { status, detail in
        RESTProblem.detail(status, status == 404 ? "Item not found" : detail)
    }

    static func query(_ request: HTTPRequest) -> [String: String] {
        var parameters: [String: String] = [:]
        for pair in (request.query ?? "").split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let name = String(parts[0]).removingPercentEncoding ?? String(parts[0])
            let value =
                parts.count > 1
                ? (String(parts[1]).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? "") : ""
            if parameters[name] == nil { parameters[name] = value }
        }
        return parameters
    }

    /// A boolean query value as FastAPI (pydantic) reads one.
    static func bool(_ text: String) -> Bool? {
        switch text.lowercased() {
        case "true", "1", "yes", "on", "t", "y": true
        case "false", "0", "no", "off", "f", "n": false
        default: nil
        }
    }
}
