import Foundation
import Schema
import ZooCore

/// The one renderer of the zoo app's REST bodies, from domain values: protobuf's JSON mapping (`ProtoConversions`,
/// the Connect face) cannot write these shapes — `_id` as a number, lists joined as the source wrote them, `null`
/// apart from `[]` — so the REST face writes them itself, here and nowhere else.
enum ZooRestShapes {
    private static func string(_ value: String?) -> JSONValue { value.map { .string($0) } ?? .null }

    private static func number(_ value: Double) -> JSONValue { JSONNumber(value).map { .number($0) } ?? .null }

    /// An animal as animals.json has it. Lists are joined as the source wrote them ("Afrika, Asie"); the
    /// image address loses the scheme the import added (the app's clients add their own).
    static func animal(_ animal: Animal, _ catalogue: Catalogue) -> JSONValue {
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
            JSONMember("map_locations", .array(catalogue.mapLocations(of: animal).map(mapLocation))),
        ])
    }

    /// A map location: its OpenStreetMap id and outline as `[[[lon, lat], …]]` (a Point has one position).
    static func mapLocation(_ feature: MapFeature) -> JSONValue {
        let ring = JSONValue.array(feature.outline.map { .array([number($0.lon), number($0.lat)]) })
        return .object([
            JSONMember("_id", .number(JSONNumber(feature.id))),
            JSONMember(
                "geometry",
                .object([
                    JSONMember("_type", .string(feature.outline.count == 1 ? "Point" : "Polygon")),
                    JSONMember("coordinates", .array([ring])),
                ])),
            JSONMember("name", .string(feature.name)),
            JSONMember("is_animal_pen", .bool(feature.isAnimalPen)),
            JSONMember("is_building", .bool(feature.isBuilding)),
            JSONMember("singular_names", feature.singularNames.map { .array($0.map { .string($0) }) } ?? .null),
        ])
    }

    /// The footpath graph as map-metadata.json: nodes `{_id, lon, lat, road_ids, is_connector}` and roads as GeoJSON
    /// Features (`{_id, type: "Feature", geometry, properties}`) whose LineString coordinates are those node objects in
    /// walking order.
    static func map(_ graph: FootpathGraph) -> JSONValue {
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
                JSONMember("type", .string("Feature")),
                JSONMember(
                    "geometry",
                    .object([
                        JSONMember("type", .string("LineString")),
                        JSONMember("coordinates", .array(road.nodes.map { nodes[Int($0)] })),
                    ])),
                // OpenStreetMap's tags of the road are not imported: GeoJSON's null properties, not an empty object.
                JSONMember("properties", .null),
            ])
        }
        return .object([JSONMember("nodes", .array(nodes)), JSONMember("roads", .array(roads))])
    }
}
