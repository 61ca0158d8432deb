import Foundation

/// Reads the lexicon as scraped from the zoo's website (`animals.json`), with map locations.
public enum AnimalsJSON {
    /// Decodes the file. Entries without an id or a name are skipped and reported;
    /// map features are de-duplicated by their OpenStreetMap id. An unreadable file is `importFailed`, naming `source`.
    public static func parse(_ data: Data, source: String = "animals JSON") throws(ZooError) -> LexiconImport {
        let entries: [Entry]
        do {
            entries = try JSONDecoder().decode([Lenient<Entry>].self, from: data).map { try $0.result.get() }
        } catch {
            throw .importFailed(source: source, reason: JSONProblem.describe(error, in: data))
        }
        var animals: [Animal] = []
        var skipped: [SkippedRow] = []
        var features: [Int64: MapFeature] = [:]
        var featureOrder: [Int64] = []
        var seenIDs = Set<Int>()
        for (offset, entry) in entries.enumerated() {
            let row = offset + 1
            guard let id = entry.id, id > 0 else {
                skipped.append(SkippedRow(row: row, line: 0, reason: "missing or invalid _id"))
                continue
            }
            guard let name = TextKey.cleanValue(entry.name) else {
                skipped.append(SkippedRow(row: row, line: 0, reason: "missing name"))
                continue
            }
            guard seenIDs.insert(id).inserted else {
                skipped.append(SkippedRow(row: row, line: 0, reason: "duplicate id \(id)"))
                continue
            }
            var featureIDs: [Int64] = []
            for location in entry.mapLocations ?? [] {
                let outline = location.geometry?.coordinates.points ?? []
                guard let featureID = location.id, !outline.isEmpty else { continue }
                featureIDs.append(featureID)
                if features[featureID] == nil {
                    featureOrder.append(featureID)
                    features[featureID] = MapFeature(
                        id: featureID, name: TextKey.cleanValue(location.name) ?? "",
                        isAnimalPen: location.isAnimalPen ?? false, isBuilding: location.isBuilding ?? false,
                        singularNames: location.singularNames?.compactMap(TextKey.cleanValue),
                        outline: outline, animalNames: [])
                }
                features[featureID]!.animalNames.append(name)
            }
            let taxonClass = TextKey.cleanValue(entry.className).map {
                Taxon(czech: $0, latin: TextKey.cleanValue(entry.classLatin))
            }
            let order = TextKey.cleanValue(entry.order).map {
                Taxon(czech: $0, latin: TextKey.cleanValue(entry.orderLatin))
            }
            animals.append(
                Animal(
                    id: id, name: name, latinName: TextKey.cleanValue(entry.latinName), taxonClass: taxonClass,
                    order: order,
                    continents: TextKey.splitList(entry.continent), range: TextKey.cleanValue(entry.continentDetail),
                    biotopes: TextKey.splitList(entry.biotop), biotopeDetail: TextKey.cleanValue(entry.biotopDetail),
                    foods: TextKey.splitList(entry.food), foodDetail: TextKey.cleanValue(entry.foodDetail),
                    description: TextKey.cleanValue(entry.baseSummary), proportions: TextKey.cleanValue(entry.sizes),
                    reproduction: TextKey.cleanValue(entry.reproduction),
                    interestingFacts: TextKey.cleanValue(entry.interestingData),
                    breeding: TextKey.cleanValue(entry.aboutPlacement),
                    location: TextKey.cleanValue(entry.locationInZoo),
                    imageURL: TextKey.cleanValue(entry.image).map(absoluteURL),
                    isCurrentlyAvailable: entry.isCurrentlyAvailable ?? true, mapFeatureIDs: featureIDs,
                    sources: [.animalsJSON]))
        }
        return LexiconImport(animals: animals, skipped: skipped, mapFeatures: featureOrder.map { features[$0]! })
    }

    /// The scraped image addresses lack a scheme ("www.zoopraha.cz/images/…").
    private static func absoluteURL(_ address: String) -> String {
        address.hasPrefix("http://") || address.hasPrefix("https://") ? address : "https://" + address
    }

    /// Decodes an element or records why it could not be, so one bad entry does not fail the array.
    private struct Lenient<Value: Decodable>: Decodable {
        var result: Result<Value, Error>
        init(from decoder: Decoder) throws {
            result = Result { try Value(from: decoder) }
        }
    }

    private struct Entry: Decodable {
        var id: Int?
        var name, latinName, baseSummary, image, className, classLatin, order, orderLatin: String?
        var continent, continentDetail, biotop, biotopDetail, food, foodDetail, sizes, reproduction: String?
        var interestingData, aboutPlacement, locationInZoo: String?
        var isCurrentlyAvailable: Bool?
        var mapLocations: [Location]?

        enum CodingKeys: String, CodingKey {
            case id = "_id", name, latinName = "latin_name", baseSummary = "base_summary", image
            case className = "class_", classLatin = "class_latin", order, orderLatin = "order_latin"
            case continent, continentDetail = "continent_detail", biotop, biotopDetail = "biotop_detail", food
            case foodDetail = "food_detail", sizes, reproduction, interestingData = "interesting_data"
            case aboutPlacement = "about_placement_in_zoo_prague", locationInZoo = "location_in_zoo"
            case isCurrentlyAvailable = "is_currently_available", mapLocations = "map_locations"
        }
    }

    private struct Location: Decodable {
        var id: Int64?
        var geometry: Geometry?
        var name: String?
        var isAnimalPen, isBuilding: Bool?
        var singularNames: [String]?

        enum CodingKeys: String, CodingKey {
            case id = "_id", geometry, name, isAnimalPen = "is_animal_pen", isBuilding = "is_building"
            case singularNames = "singular_names"
        }
    }

    private struct Geometry: Decodable {
        var coordinates: NestedCoordinates
    }
}

/// GeoJSON-style coordinates nested to any depth; `points` flattens them to `[lon, lat]` pairs.
struct NestedCoordinates: Decodable {
    var points: [GeoPoint]

    init(from decoder: Decoder) throws {
        points = []
        try Self.collect(from: decoder.singleValueContainer(), into: &points)
    }

    private indirect enum Node: Decodable {
        case number(Double)
        case list([Node])
        init(from decoder: Decoder) throws {
            let container = try decoder.singleValueContainer()
            if let number = try? container.decode(Double.self) {
                self = .number(number)
            } else {
                self = .list(try container.decode([Node].self))
            }
        }
    }

    private static func collect(from container: SingleValueDecodingContainer, into points: inout [GeoPoint]) throws {
        func walk(_ node: Node) {
            guard case .list(let items) = node else { return }
            if items.count >= 2, case .number(let lon) = items[0], case .number(let lat) = items[1] {
                points.append(GeoPoint(lat: lat, lon: lon))
            } else {
                items.forEach(walk)
            }
        }
        walk(try container.decode(Node.self))
    }
}
