import Foundation

/// One node of the footpath graph.
public struct FootpathNode: Sendable, Hashable, Codable {
    /// OpenStreetMap node id.
    public var id: Int64
    public var position: GeoPoint

    public init(id: Int64, position: GeoPoint) {
        self.id = id
        self.position = position
    }
}

/// A footpath: node ids in walking order.
public struct Footpath: Sendable, Hashable, Codable {
    /// OpenStreetMap way id.
    public var id: Int64
    public var nodeIDs: [Int64]

    public init(id: Int64, nodeIDs: [Int64]) {
        self.id = id
        self.nodeIDs = nodeIDs
    }
}

/// The zoo's footpath network as imported (`map-metadata.json`).
public struct FootpathNetwork: Sendable, Hashable, Codable {
    public var nodes: [FootpathNode]
    public var roads: [Footpath]

    public init(nodes: [FootpathNode], roads: [Footpath]) {
        self.nodes = nodes
        self.roads = roads
    }

    /// Decodes `map-metadata.json`. Road vertices missing from `nodes` are added from the road geometry;
    /// roads with fewer than two vertices are dropped. An unreadable file is `importFailed`, naming `source`.
    public static func parse(_ data: Data, source: String = "map metadata") throws(ZooError) -> FootpathNetwork {
        struct Vertex: Decodable {
            var _id: Int64
            var lon: Double
            var lat: Double
        }
        struct Geometry: Decodable { var coordinates: [Vertex] }
        struct Road: Decodable {
            var _id: Int64
            var geometry: Geometry
        }
        struct File: Decodable {
            var nodes: [Vertex]
            var roads: [Road]
        }
        let file: File
        do { file = try JSONDecoder().decode(File.self, from: data) } catch {
            throw .importFailed(source: source, reason: JSONProblem.describe(error, in: data))
        }
        var nodes: [FootpathNode] = []
        var known = Set<Int64>()
        func add(_ vertex: Vertex) {
            guard vertex.lat.isFinite, vertex.lon.isFinite, known.insert(vertex._id).inserted else { return }
            nodes.append(FootpathNode(id: vertex._id, position: GeoPoint(lat: vertex.lat, lon: vertex.lon)))
        }
        file.nodes.forEach(add)
        var roads: [Footpath] = []
        for road in file.roads where road.geometry.coordinates.count >= 2 {
            road.geometry.coordinates.forEach(add)
            roads.append(Footpath(id: road._id, nodeIDs: road.geometry.coordinates.map(\._id)))
        }
        guard !roads.isEmpty else { throw .importFailed(source: source, reason: "no roads") }
        return FootpathNetwork(nodes: nodes, roads: roads)
    }
}

/// The bounding box of the zoo map (`map-bounds.json`).
public struct MapBounds: Sendable, Hashable, Codable {
    public var north: Double
    public var east: Double
    public var south: Double
    public var west: Double

    public init(north: Double, east: Double, south: Double, west: Double) {
        self.north = north
        self.east = east
        self.south = south
        self.west = west
    }

    /// Decodes `{"bounds": {"north", "east", "south", "west"}, …}`; an unreadable file is `importFailed`, naming `source`.
    public static func parse(_ data: Data, source: String = "map bounds") throws(ZooError) -> MapBounds {
        struct File: Decodable { var bounds: MapBounds }
        do {
            let bounds = try JSONDecoder().decode(File.self, from: data).bounds
            guard bounds.south < bounds.north, bounds.west < bounds.east else {
                throw ZooError.importFailed(source: source, reason: "south/west must be below north/east")
            }
            return bounds
        } catch let error as ZooError { throw error } catch {
            throw .importFailed(source: source, reason: JSONProblem.describe(error, in: data))
        }
    }

    /// The smallest box holding every node of `network` (grown to a few metres where it would be a line),
    /// for a map imported without a bounds file: the bounds that came with older data would leave most of
    /// a larger map out of range.
    public init?(enclosing network: FootpathNetwork) {
        guard let first = network.nodes.first?.position else { return nil }
        var (south, north, west, east) = (first.lat, first.lat, first.lon, first.lon)
        for node in network.nodes {
            south = min(south, node.position.lat)
            north = max(north, node.position.lat)
            west = min(west, node.position.lon)
            east = max(east, node.position.lon)
        }
        let minimumSpan = 0.0001  // degrees, about 10 m
        self.init(north: max(north, south + minimumSpan), east: max(east, west + minimumSpan), south: south, west: west)
    }

    /// Whether `point` lies inside the box grown by `marginMeters` on every side.
    public func contains(_ point: GeoPoint, marginMeters: Double = 100) -> Bool {
        let latMargin = marginMeters / Geo.metersPerDegree
        let lonMargin = marginMeters / (Geo.metersPerDegree * cos((north + south) / 2 * .pi / 180))
        return point.lat >= south - latMargin && point.lat <= north + latMargin
            && point.lon >= west - lonMargin && point.lon <= east + lonMargin
    }
}

/// Reads the adoption list (`adopce-zvirat.csv`: `id;nazev_cz;nazev_en;trida_cz;cena;k_prohlidce`).
public enum AdoptionCSV {
    public static let columns = ["id", "nazev_cz", "nazev_en", "trida_cz", "cena", "k_prohlidce"]

    /// Parses the list; rows without a Czech name or with a wrong field count are skipped and reported. A file
    /// that is not the list is `importFailed`, naming `source`.
    public static func parse(_ text: String, source: String = "adoption CSV") throws(ZooError) -> (
        adoptions: [Adoption], skipped: [SkippedRow]
    ) {
        var records = CSVParser.parse(text)
        guard let header = records.first?.fields.map(TextKey.collapseWhitespace),
            header.prefix(columns.count).elementsEqual(columns)
        else {
            throw .importFailed(source: source, reason: "unexpected header")
        }
        records.removeFirst()
        var adoptions: [Adoption] = []
        var skipped: [SkippedRow] = []
        for (offset, record) in records.enumerated() {
            let fields = record.fields
            guard fields.count >= columns.count else {
                skipped.append(
                    SkippedRow(
                        row: offset + 1, line: record.line,
                        reason: "expected \(columns.count) fields, found \(fields.count)"))
                continue
            }
            guard let name = TextKey.cleanValue(fields[1]) else {
                skipped.append(SkippedRow(row: offset + 1, line: record.line, reason: "missing Czech name"))
                continue
            }
            adoptions.append(
                Adoption(
                    czechName: name, englishName: TextKey.cleanValue(fields[2]),
                    className: TextKey.cleanValue(fields[3]),
                    priceCZK: TextKey.cleanValue(fields[4]).flatMap { Int($0) },
                    visitable: TextKey.cleanValue(fields[5]) != "0"))
        }
        return (adoptions, skipped)
    }
}

/// Tables that help join OpenStreetMap features to lexicon entries.
public struct MapJoinTables: Sendable, Hashable, Codable {
    /// OpenStreetMap id → the pavilion name the lexicon uses (`zoo-parts-fixes.csv`).
    public var pavilionNames: [Int64: String]
    /// Folded Czech plural → singular forms (`singular-plural.csv`).
    public var singulars: [String: [String]]

    public init(pavilionNames: [Int64: String] = [:], singulars: [String: [String]] = [:]) {
        self.pavilionNames = pavilionNames
        self.singulars = singulars
    }

    /// Parses `zoo-parts-fixes.csv` (`_id;name`, header required).
    public static func parsePavilionFixes(_ text: String) -> [Int64: String] {
        var fixes: [Int64: String] = [:]
        for record in CSVParser.parse(text).dropFirst() where record.fields.count >= 2 {
            if let id = TextKey.cleanValue(record.fields[0]).flatMap({ Int64($0) }),
                let name = TextKey.cleanValue(record.fields[1])
            {
                fixes[id] = name
            }
        }
        return fixes
    }

    /// Parses `singular-plural.csv` (`plural;singular[,singular…]`, no header).
    public static func parseSingulars(_ text: String) -> [String: [String]] {
        var table: [String: [String]] = [:]
        for record in CSVParser.parse(text) where record.fields.count >= 2 {
            guard let plural = TextKey.cleanValue(record.fields[0]) else { continue }
            let singulars = TextKey.splitList(record.fields[1])
            if !singulars.isEmpty { table[TextKey.fold(plural)] = singulars }
        }
        return table
    }
}
