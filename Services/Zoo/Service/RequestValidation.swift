import Foundation
import RPC
import Schema
import ZooAPI
import ZooCore

/// Checks every field of the zoo's requests and turns them into domain values; anything out of bounds is
/// INVALID_ARGUMENT with a message naming the field.
enum RequestValidation {
    static let maxTextLength = 200
    static let maxFilterValues = 50
    static let defaultPageSize = 20
    static let maxOffset = 1_000_000
    static let maxRadius = 10_000.0
    static let defaultNearbyLimit = 50
    static let maxNearbyLimit = 500
    static let maxTourAnimals = 30

    static func invalid(_ message: String) -> RPCError { RPCError(.invalidArgument, message) }

    static func search(_ request: ZooV1.SearchAnimalsRequest) throws -> SearchQuery {
        try text(request.text, field: "text", allowEmpty: true)
        guard (0...Int32(maxOffset)).contains(request.offset) else {
            throw invalid("offset must be 0…\(maxOffset), got \(request.offset)")
        }
        let pageSize = request.pageSize ?? Int32(defaultPageSize)
        guard (0...Int32(Catalogue.maxPageSize)).contains(pageSize) else {
            throw invalid("page_size must be 0…\(Catalogue.maxPageSize), got \(pageSize)")
        }
        let filter = AnimalFilter(
            classes: try filterValues(request.classes, field: "classes"),
            foods: try filterValues(request.foods, field: "foods"),
            biotopes: try filterValues(request.biotopes, field: "biotopes"),
            zooHouses: try filterValues(request.zooHouses, field: "zoo_houses"),
            continents: try filterValues(request.continents, field: "continents"))
        return SearchQuery(
            text: request.text, filter: filter, includeUnavailable: request.includeUnavailable,
            offset: Int(request.offset), limit: Int(pageSize))
    }

    static let defaultExportPageSize = 100

    /// ExportCatalogue's page size: 1…500 animals (the longest texts make an animal a few KiB, far below a frame).
    static func exportPageSize(_ value: Int32?) throws -> Int {
        let size = value ?? Int32(defaultExportPageSize)
        guard (1...Int32(Catalogue.maxPageSize)).contains(size) else {
            throw invalid("page_size must be 1…\(Catalogue.maxPageSize), got \(size)")
        }
        return Int(size)
    }

    static func animalID(_ id: Int64, field: String = "id") throws -> Int {
        guard id > 0, let value = Int(exactly: id) else {
            throw invalid("\(field) must be a positive animal id, got \(id)")
        }
        return value
    }

    static func point(_ point: ZooV1.GeoPoint?, field: String) throws -> GeoPoint {
        guard let point else { throw invalid("\(field) is required") }
        let value = GeoPoint(lat: point.lat, lon: point.lon)
        guard Geo.isValid(value) else {
            throw invalid(
                "\(field) (\(point.lat), \(point.lon)) is not a coordinate: latitude must be -90…90 and longitude -180…180"
            )
        }
        return value
    }

    static func place(_ place: ZooV1.Place?, field: String) throws -> Place {
        guard let place else { throw invalid("\(field) is required") }
        let given = [place.point != nil, place.animalID != nil, place.zooHouse != nil].filter { $0 }.count
        guard given == 1 else {
            throw invalid("\(field) must give exactly one of point, animal_id and zoo_house (\(given) given)")
        }
        if let animalID = place.animalID {
            return .animal(id: try self.animalID(animalID, field: "\(field).animal_id"))
        }
        if let house = place.zooHouse {
            try text(house, field: "\(field).zoo_house", allowEmpty: false)
            return .pavilion(house)
        }
        return .point(try point(place.point, field: "\(field).point"))
    }

    static func nearby(_ request: ZooV1.NearbyRequest) throws -> (point: GeoPoint, radius: Double, limit: Int) {
        let point = try point(request.point, field: "point")
        guard request.radiusM.isFinite, (0...maxRadius).contains(request.radiusM) else {
            throw invalid("radius_m must be 0…\(Int(maxRadius)) metres, got \(request.radiusM)")
        }
        let limit = request.limit ?? Int32(defaultNearbyLimit)
        guard (1...Int32(maxNearbyLimit)).contains(limit) else {
            throw invalid("limit must be 1…\(maxNearbyLimit), got \(limit)")
        }
        return (point, request.radiusM, Int(limit))
    }

    static func tour(_ request: ZooV1.TourRequest) throws -> (start: GeoPoint, animalIDs: [Int]) {
        let start = try point(request.start, field: "start")
        guard (1...maxTourAnimals).contains(request.animalIds.count) else {
            throw invalid("a tour takes 1…\(maxTourAnimals) animal_ids, got \(request.animalIds.count)")
        }
        return (start, try request.animalIds.map { try animalID($0, field: "animal_ids") })
    }

    static func importFiles(_ request: ZooV1.ImportDataRequest) throws -> [ZooSourceFile] {
        guard !request.files.isEmpty else { throw invalid("files: an import needs at least one file") }
        guard scalarCount(request.source, atMost: 1000) else { throw invalid("source is longer than 1000 characters") }
        var kinds = Set<ZooFileKind>()
        return try request.files.enumerated().map { index, file in
            guard let kind = ZooFileKind(file.kind) else {
                throw invalid("files[\(index)].kind \(file.kind.rawValue) is not a known file kind")
            }
            guard kinds.insert(kind).inserted else {
                throw invalid("files: more than one file of kind \(kind.rawValue)")
            }
            guard !file.content.isEmpty else { throw invalid("files[\(index)] (\(kind.rawValue)) is empty") }
            guard scalarCount(file.name, atMost: 1000) else {
                throw invalid("files[\(index)].name is longer than 1000 characters")
            }
            return ZooSourceFile(
                kind: kind, name: file.name.isEmpty ? kind.fileName : file.name, content: Data(file.content))
        }
    }

    private static func text(_ value: String, field: String, allowEmpty: Bool) throws {
        guard allowEmpty || !value.trimmingCharacters(in: .whitespaces).isEmpty else {
            throw invalid("\(field) must not be empty")
        }
        guard scalarCount(value, atMost: maxTextLength) else {
            throw invalid("\(field) is longer than \(maxTextLength) characters")
        }
    }

    /// Whether `value` has at most `limit` Unicode scalars. Limits count scalars, not characters: one
    /// character can hold any number of combining marks ("a" and 7 million accents is one), and counting
    /// grapheme clusters in such a string costs about a second of CPU. The UTF-8 length bounds the count
    /// first, at no cost.
    static func scalarCount(_ value: String, atMost limit: Int) -> Bool {
        let bytes = value.utf8.count
        if bytes <= limit { return true }
        return bytes <= 4 * limit && value.unicodeScalars.count <= limit
    }

    private static func filterValues(_ values: [String], field: String) throws -> [String] {
        guard values.count <= maxFilterValues else { throw invalid("\(field): at most \(maxFilterValues) values") }
        for value in values { try text(value, field: field, allowEmpty: false) }
        return values
    }
}
