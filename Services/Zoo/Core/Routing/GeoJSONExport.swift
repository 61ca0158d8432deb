import Foundation

extension ZooSnapshot {
    /// A GeoJSON FeatureCollection: every footpath as a LineString (`kind: "footpath"`, `road_id`) and
    /// every map feature linked to an animal as a Point at its anchor (`kind: "animal_location"`, `osm_id`,
    /// `name`, `animal_ids`). Coordinates are `[lon, lat]` as GeoJSON requires.
    public func geoJSON() -> Data {
        var features: [GeoJSONFeature] = []
        let graph = router.graph
        for road in graph.roads {
            features.append(
                GeoJSONFeature(
                    geometry: .init(
                        type: "LineString",
                        coordinates: .line(
                            road.nodes.map { [graph.positions[Int($0)].lon, graph.positions[Int($0)].lat] })),
                    properties: ["kind": .text("footpath"), "road_id": .integer(road.id)]))
        }
        var animalsByFeature: [Int64: [Int64]] = [:]
        for animal in catalogue.animals {
            for id in animal.mapFeatureIDs { animalsByFeature[id, default: []].append(Int64(animal.id)) }
        }
        for id in animalsByFeature.keys.sorted() {
            guard let feature = catalogue.features[id], Geo.isValid(feature.anchor) else { continue }
            features.append(
                GeoJSONFeature(
                    geometry: .init(type: "Point", coordinates: .point([feature.anchor.lon, feature.anchor.lat])),
                    properties: [
                        "kind": .text("animal_location"), "osm_id": .integer(id), "name": .text(feature.name),
                        "animal_ids": .integers(animalsByFeature[id]!),
                    ]))
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return (try? encoder.encode(GeoJSONCollection(features: features))) ?? Data()
    }
}

private struct GeoJSONCollection: Encodable {
    let type = "FeatureCollection"
    var features: [GeoJSONFeature]
}

private struct GeoJSONFeature: Encodable {
    struct Geometry: Encodable {
        var type: String
        var coordinates: Coordinates
    }
    enum Coordinates: Encodable {
        case point([Double])
        case line([[Double]])
        func encode(to encoder: Encoder) throws {
            var container = encoder.singleValueContainer()
            switch self {
            case .point(let point): try container.encode(point)
            case .line(let line): try container.encode(line)
            }
        }
    }
    enum Property: Encodable {
        case text(String)
        case integer(Int64)
        case integers([Int64])
        func encode(to encoder: Encoder) throws {
            var container = encoder.singleValueContainer()
            switch self {
            case .text(let text): try container.encode(text)
            case .integer(let value): try container.encode(value)
            case .integers(let values): try container.encode(values)
            }
        }
    }
    let type = "Feature"
    var geometry: Geometry
    var properties: [String: Property]
}
