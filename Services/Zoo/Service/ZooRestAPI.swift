import Foundation
import HTTP
import Schema
import Synchronization
import ZooCore

/// The zoo app's REST API, in its own shapes, so a client of the app it replaces works unchanged:
/// `GET /api/animals`, `/api/animals/{id}`, the filter lists, `/api/map/metadata` (the footpath graph)
/// and `/api/map/data` (map tiles, when imported). Each list answers
/// `{"metadata": {"last_update_start", "last_update_end", "next_update"}, "data": …}`; an animal has
/// animals.json's fields; the graph is map-metadata.json's `{metadata, nodes, roads}`.
///
/// The whole catalogue is ~2.4 MB of JSON: each answer is built once per snapshot of the data (a new
/// snapshot is a new data version), gzipped once and tagged by its bytes, so replicas on one database
/// give equal tags, a 304 costs nothing and an import changes the tag.
public final class ZooRestAPI: Sendable {
    let library: ZooLibrary
    let nextUpdate: @Sendable () -> Date?
    /// The imported map tiles (nil: this server has none to serve).
    let tiles: MapTilesStore?
    /// The tiles file as last read, whole, and its tag: read once per import (per replica) and shared by every
    /// download, never gzipped (SQLite pages barely compress, and a copy would double the memory).
    private let loadedTiles = Mutex<LoadedTiles?>(nil)
    /// The answers built for the current snapshot, by route and query.
    private let cache = Mutex<(snapshot: ZooSnapshot?, bodies: [String: CachedBody])>((nil, [:]))

    /// `nextUpdate`: when the refresh schedule fires next (nil: no schedule).
    public init(library: ZooLibrary, tiles: MapTilesStore? = nil, nextUpdate: @escaping @Sendable () -> Date? = { nil }) {
        self.library = library
        self.tiles = tiles
        self.nextUpdate = nextUpdate
    }

    /// Adds the API's routes to `routes`.
    public func register(in routes: inout HTTPRoutes.Builder) {
        routes.get("/api/animals") { [self] request in
            let query = Self.query(request)
            guard let includeUnavailable = Self.bool(query["include_currently_unavailable"] ?? "false") else {
                return Self.problem(422, "include_currently_unavailable must be true or false")
            }
            return await answer(request, key: "animals?\(includeUnavailable)") { snapshot in
                .array(snapshot.catalogue.animals.filter { includeUnavailable || $0.isCurrentlyAvailable }.map {
                    Self.animalJSON($0, snapshot.catalogue)
                })
            }
        }
        routes.get(prefix: "/api/animals/") { [self] request in
            let text = request.path.dropFirst("/api/animals/".count)
            guard let id = Int(text), !text.hasPrefix("+") else { return Self.problem(422, "the animal id must be an integer") }
            guard let snapshot = try? library.snapshot(), let animal = try? snapshot.catalogue.animal(id: id) else {
                return Self.problem(404, "Item not found")
            }
            let metadata = await envelopeMetadata()
            return CachedBody(Self.envelope(metadata, data: Self.animalJSON(animal, snapshot.catalogue)), contentType: Self.json)
                .response(to: request)
        }
        let lists: [(String, @Sendable (FilterValues) -> [FilterValue])] = [
            ("classes", { $0.classes }), ("biotops", { $0.biotopes }), ("foods", { $0.foods }), ("zooHouses", { $0.zooHouses }),
        ]
        for (name, values) in lists {
            routes.get("/api/\(name)") { [self] request in
                await answer(request, key: name) { snapshot in
                    .array(values(snapshot.catalogue.filterValues()).map { .string($0.value) })
                }
            }
        }
        routes.get("/api/map/metadata") { [self] request in
            await answer(request, key: "map", wrapped: false) { snapshot in Self.mapJSON(snapshot.router.graph) }
        }
        routes.get("/api/map/data") { [self] request in mapData(request) }
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
    private func mapData(_ request: HTTPRequest) -> HTTPResponse {
        guard let tiles, let identity = tiles.identity() else { return Self.problem(404, "no map tiles were imported") }
        let loaded: LoadedTiles?
        do {
            // Under the lock, so concurrent first downloads read the file once, and the old bytes are let go first.
            loaded = try loadedTiles.withLock { state in
                if let state, state.identity == identity { return state }
                state = nil
                state = try tiles.read().map { LoadedTiles(identity: $0.identity, bytes: $0.bytes, entityTag: EntityTag.strong($0.bytes)) }
                return state
            }
        } catch {
            return Self.problem(503, "the map tiles cannot be read: \(error)")
        }
        guard let loaded else { return Self.problem(404, "no map tiles were imported") }
        let name = URL(fileURLWithPath: tiles.path).lastPathComponent
        let headers: HTTPHeaders = [
            "Content-Type": Self.mbtilesType, "Content-Disposition": "attachment; filename=\"\(name)\"", "ETag": loaded.entityTag,
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

    /// The cached answer `key` of the current snapshot, built by `data` (inside the envelope unless
    /// `wrapped` is false: then `data` is the whole document, whose `metadata` member is filled in).
    private func answer(
        _ request: HTTPRequest, key: String, wrapped: Bool = true, _ data: @Sendable (ZooSnapshot) -> JSONValue
    ) async -> HTTPResponse {
        let snapshot: ZooSnapshot
        do {
            snapshot = try library.snapshot()
        } catch {
            return Self.problem(503, "the zoo's data cannot be read: \(error)")
        }
        if let cached = cache.withLock({ $0.snapshot === snapshot ? $0.bodies[key] : nil }) {
            return cached.response(to: request)
        }
        let metadata = await envelopeMetadata()
        var document = data(snapshot)
        if wrapped {
            document = .object([JSONMember("metadata", metadata), JSONMember("data", document)])
        } else if case .object(let members) = document {
            document = .object([JSONMember("metadata", metadata)] + members)
        }
        let body = CachedBody(Array(document.serialized().utf8), contentType: Self.json)
        cache.withLock { cache in
            if cache.snapshot !== snapshot { cache = (snapshot, [:]) }
            cache.bodies[key] = body
        }
        return body.response(to: request)
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

    static func envelope(_ metadata: JSONValue, data: JSONValue) -> [UInt8] {
        Array(JSONValue.object([JSONMember("metadata", metadata), JSONMember("data", data)]).serialized().utf8)
    }

    private static func timestamp(_ date: Date?) -> JSONValue {
        guard let date else { return .null }
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        let parts = calendar.dateComponents([.year, .month, .day, .hour, .minute, .second, .nanosecond], from: date)
        let micros = (parts.nanosecond ?? 0) / 1000
        return .string(String(
            format: "%04d-%02d-%02dT%02d:%02d:%02d.%06d", parts.year ?? 0, parts.month ?? 0, parts.day ?? 0, parts.hour ?? 0,
            parts.minute ?? 0, parts.second ?? 0, micros))
    }

    /// FastAPI's error body, `{"detail": "…"}`.
    static func problem(_ status: Int, _ detail: String) -> HTTPResponse {
        HTTPResponse(
            status: status, headers: ["Content-Type": json],
            body: Array(JSONValue.object([JSONMember("detail", .string(detail))]).serialized().utf8))
    }

    static func query(_ request: HTTPRequest) -> [String: String] {
        var parameters: [String: String] = [:]
        for pair in (request.query ?? "").split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let name = String(parts[0]).removingPercentEncoding ?? String(parts[0])
            let value = parts.count > 1 ? (String(parts[1]).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? "") : ""
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

    // MARK: The zoo app's shapes

    private static func string(_ value: String?) -> JSONValue { value.map { .string($0) } ?? .null }

    private static func number(_ value: Double) -> JSONValue { JSONNumber(value).map { .number($0) } ?? .null }

    /// An animal as animals.json has it. Lists are joined as the source wrote them ("Afrika, Asie"); the
    /// image address loses the scheme the import added (the app's clients add their own).
    static func animalJSON(_ animal: Animal, _ catalogue: Catalogue) -> JSONValue {
        let image = animal.imageURL.map { $0.hasPrefix("https://") ? String($0.dropFirst("https://".count)) : $0 }
        return .object([
            JSONMember("_id", .number(JSONNumber(animal.id))),
            JSONMember("name", .string(animal.name)),
            JSONMember("latin_name", string(animal.latinName)),
            JSONMember("base_summary", string(animal.description)),
            JSONMember("image", string(image)),
            JSONMember("class_", string(animal.taxonClass?.czech)),
            JSONMember("class_latin", string(animal.taxonClass?.latin)),
            JSONMember("order", string(animal.order?.czech)),
            JSONMember("order_latin", string(animal.order?.latin)),
            JSONMember("continent", .string(animal.continents.joined(separator: ", "))),
            JSONMember("continent_detail", string(animal.range)),
            JSONMember("biotop", .string(animal.biotopes.joined(separator: ", "))),
            JSONMember("biotop_detail", string(animal.biotopeDetail)),
            JSONMember("food", .string(animal.foods.joined(separator: ", "))),
            JSONMember("food_detail", string(animal.foodDetail)),
            JSONMember("sizes", string(animal.proportions)),
            JSONMember("reproduction", string(animal.reproduction)),
            JSONMember("interesting_data", string(animal.interestingFacts)),
            JSONMember("about_placement_in_zoo_prague", string(animal.breeding)),
            JSONMember("location_in_zoo", string(animal.location)),
            JSONMember("is_currently_available", .bool(animal.isCurrentlyAvailable)),
            JSONMember("map_locations", .array(catalogue.mapLocations(of: animal).map(mapLocationJSON))),
        ])
    }

    /// A map location: its OpenStreetMap id and outline as `[[[lon, lat], …]]` (a Point has one position).
    static func mapLocationJSON(_ feature: MapFeature) -> JSONValue {
        let ring = JSONValue.array(feature.outline.map { .array([number($0.lon), number($0.lat)]) })
        return .object([
            JSONMember("_id", .number(JSONNumber(feature.id))),
            JSONMember("geometry", .object([
                JSONMember("_type", .string(feature.outline.count == 1 ? "Point" : "Polygon")),
                JSONMember("coordinates", .array([ring])),
            ])),
            JSONMember("name", .string(feature.name)),
            JSONMember("is_animal_pen", .bool(feature.isAnimalPen)),
            JSONMember("is_building", .bool(feature.isBuilding)),
            JSONMember("singular_names", .array(feature.singularNames.map { .string($0) })),
        ])
    }

    /// The footpath graph as map-metadata.json: nodes `{_id, lon, lat, road_ids, is_connector}` and roads
    /// whose LineString coordinates are those node objects in walking order.
    static func mapJSON(_ graph: FootpathGraph) -> JSONValue {
        var roadsOfNode = Array(repeating: [Int64](), count: graph.nodeIDs.count)
        for road in graph.roads {
            for node in Set(road.nodes) { roadsOfNode[Int(node)].append(road.id) }
        }
        let nodes: [JSONValue] = graph.nodeIDs.indices.map { index in
            let roads = roadsOfNode[index].sorted()
            return .object([
                JSONMember("_id", .number(JSONNumber(graph.nodeIDs[index]))),
                JSONMember("lon", number(graph.positions[index].lon)),
                JSONMember("lat", number(graph.positions[index].lat)),
                JSONMember("road_ids", .array(roads.map { .number(JSONNumber($0)) })),
                JSONMember("is_connector", .bool(roads.count > 1)),
            ])
        }
        let roads: [JSONValue] = graph.roads.map { road in
            .object([
                JSONMember("_id", .number(JSONNumber(road.id))),
                JSONMember("geometry", .object([
                    JSONMember("type", .string("LineString")),
                    JSONMember("coordinates", .array(road.nodes.map { nodes[Int($0)] })),
                ])),
            ])
        }
        return .object([JSONMember("nodes", .array(nodes)), JSONMember("roads", .array(roads))])
    }
}
