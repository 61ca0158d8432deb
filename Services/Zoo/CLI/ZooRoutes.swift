import ArgumentParser
import Foundation
import GatewayKit
import RPC
import Schema
import ZooAPI

/// `gateway zoo route --from LAT,LON | --from-animal ID | --from-house NAME  --to-animal ID | --to-house NAME | --to LAT,LON`.
struct ZooRoute: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "route",
        abstract: "The shortest walk along the zoo's footpaths, from a point, an animal or a pavilion to another.",
        discussion:
            #"An animal without a pen of its own is reached at its house or zoo part; the first line says which. With --json: the RouteResponse, {"route": {"distanceM", "durationS", "nodeIds": ["id", …], "coordinates": [{"lat", "lon"}, …]}, "destination": {"kind": "PLACE_KIND_PEN" | "PLACE_KIND_HOUSE" | "PLACE_KIND_ZOO_PART", "name", "locationId"}}."#
    )

    @Option(
        name: .customLong("from"), parsing: .unconditional,
        help:
            "Start at LAT,LON (e.g. a phone's GPS fix; default: none, one of --from, --from-animal, --from-house is needed)."
    )
    var fromPoint: String?

    @Option(
        name: .customLong("from-animal"), parsing: .unconditional,
        help: "Start at an animal (its nearest map location; default: none).")
    var fromAnimal: Int64?

    @Option(name: .customLong("from-house"), help: "Start at a pavilion (default: none).")
    var fromHouse: String?

    @Option(
        name: .customLong("to"), parsing: .unconditional,
        help: "Go to LAT,LON (default: none, one of --to, --to-animal, --to-house is needed).")
    var toPoint: String?

    @Option(
        name: .customLong("to-animal"), parsing: .unconditional,
        help: "Go to an animal (whichever of its map locations is nearest on foot; default: none).")
    var toAnimal: Int64?

    @Option(name: .customLong("to-house"), help: "Go to a pavilion (default: none).")
    var toHouse: String?

    @OptionGroup var global: GlobalOptions

    /// A missing or doubled end is a command line that does not parse (exit 64), checked before any call.
    func validate() throws {
        for (end, given) in [
            ("from", [fromPoint != nil, fromAnimal != nil, fromHouse != nil]),
            ("to", [toPoint != nil, toAnimal != nil, toHouse != nil]),
        ]
        where given.filter({ $0 }).count != 1 {
            throw ValidationError("give exactly one of --\(end), --\(end)-animal and --\(end)-house")
        }
    }

    func run() async throws {
        try await global.withZoo { zoo in
            let request = ZooV1.RouteRequest(
                from: try Self.place(point: fromPoint, animal: fromAnimal, house: fromHouse, end: "from"),
                to: try Self.place(point: toPoint, animal: toAnimal, house: toHouse, end: "to"))
            let reply = try await zoo.route(request, options: global.callOptions)
            guard let route = reply.route else {
                throw RPCError(.internalError, "the service answered without a route")
            }
            try global.render(
                reply,
                text: {
                    let nodes = route.nodeIds.count
                    if let destination = reply.destination, destination.kind != .point, destination.kind != .unspecified
                    {
                        print(
                            "to \(ZooFormat.destination(destination.kind, destination.name) ?? destination.name) (map location \(destination.locationID))"
                        )
                    }
                    if reply.fromSnapM >= 1 {
                        print(
                            "the walk starts \(ZooFormat.distance(reply.fromSnapM)) from --from, on the nearest footpath leading there"
                        )
                    }
                    if reply.toSnapM >= 1 {
                        print("it ends \(ZooFormat.distance(reply.toSnapM)) from --to, on the nearest footpath reached")
                    }
                    print(
                        "\(ZooFormat.distance(route.distanceM)), about \(ZooFormat.walk(route.durationS)) on foot, passing \(nodes) footpath node\(nodes == 1 ? "" : "s")"
                    )
                    for point in route.coordinates { print(String(format: "  %.6f,%.6f", point.lat, point.lon)) }
                })
        }
    }

    /// The place one end names: exactly one of its three options.
    static func place(point: String?, animal: Int64?, house: String?, end: String) throws -> ZooV1.Place {
        let given = [point != nil, animal != nil, house != nil].filter { $0 }.count
        guard given == 1 else {
            throw RPCError(.invalidArgument, "give exactly one of --\(end), --\(end)-animal and --\(end)-house")
        }
        if let point { return ZooV1.Place(point: try ZooFormat.coordinate(point, option: "--\(end)")) }
        return ZooV1.Place(animalID: animal, zooHouse: house)
    }
}

/// `gateway zoo nearby --from LAT,LON [--radius M]`: animals within walking reach.
struct ZooNearby: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "nearby",
        abstract: "Animals kept now whose map locations are within a walking distance of a point, nearest first.")

    @Option(name: .customLong("from"), parsing: .unconditional, help: "LAT,LON to walk from.")
    var from: String

    @Option(parsing: .unconditional, help: "Walking distance in metres.")
    var radius = 200.0

    @Option(parsing: .unconditional, help: "Most animals listed.")
    var limit: Int32 = 50

    @OptionGroup var global: GlobalOptions

    func run() async throws {
        try await global.withZoo { zoo in
            let request = ZooV1.NearbyRequest(
                point: try ZooFormat.coordinate(from, option: "--from"), radiusM: radius, limit: limit)
            let reply = try await zoo.nearby(request, options: global.callOptions)
            try global.render(
                reply,
                text: {
                    printTable(
                        ["WALK", "ID", "NAME", "LOCATION"],
                        reply.animals.map {
                            [
                                ZooFormat.distance($0.distanceM), String($0.animal?.id ?? 0), $0.animal?.name ?? "-",
                                $0.animal?.location ?? "-",
                            ]
                        })
                    print(
                        "\(reply.animals.count) animal\(reply.animals.count == 1 ? "" : "s") within \(ZooFormat.distance(radius))"
                    )
                })
        }
    }
}

/// `gateway zoo tour ID… --from LAT,LON`: a short visiting order.
struct ZooTour: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tour",
        abstract: "A short walk from a point visiting each of the animals once (nearest neighbour improved by 2-opt).",
        discussion:
            #"With --json: the TourResponse, {"legs": [{"animal": {…}, "locationId", "route": {…}}, …], "distanceM", "durationS"}."#
    )

    @Argument(help: "Ids of the animals to visit.")
    var animals: [Int64]

    func validate() throws {
        if let bad = animals.first(where: { $0 < 1 }) {
            throw InvalidValue("an animal's id is a number from 1 (got \(bad))")
        }
    }

    @Option(name: .customLong("from"), parsing: .unconditional, help: "LAT,LON to start at.")
    var from: String

    @OptionGroup var global: GlobalOptions

    func run() async throws {
        try await global.withZoo { zoo in
            let request = ZooV1.TourRequest(start: try ZooFormat.coordinate(from, option: "--from"), animalIds: animals)
            let reply = try await zoo.tour(request, options: global.callOptions)
            try global.render(
                reply,
                text: {
                    printTable(
                        ["#", "ID", "NAME", "WALK", "LOCATION"],
                        reply.legs.enumerated().map { index, leg in
                            [
                                String(index + 1), String(leg.animal?.id ?? 0), leg.animal?.name ?? "-",
                                ZooFormat.distance(leg.route?.distanceM ?? 0),
                                leg.animal?.location ?? "-",
                            ]
                        })
                    print(
                        "total \(ZooFormat.distance(reply.distanceM)), about \(ZooFormat.walk(reply.durationS)) on foot"
                    )
                })
        }
    }
}

/// `gateway zoo geojson`: footpaths and animal locations for a web map.
struct ZooGeoJSON: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "geojson",
        abstract: "Export the footpaths and animal locations as a GeoJSON FeatureCollection.")

    @Option(help: "Write to this file (default: standard output).", completion: .file(extensions: ["geojson", "json"]))
    var output: String?

    @OptionGroup var global: GlobalOptions

    func run() async throws {
        try await global.withZoo { zoo in
            let reply = try await zoo.exportGeoJSON(ZooV1.ExportGeoJSONRequest(), options: global.callOptions)
            if let output {
                do {
                    try Data(reply.geojson.utf8).write(to: URL(fileURLWithPath: output))
                } catch {
                    throw FileError(.notWritable, path: output, reason: error.localizedDescription, role: "--output")
                }
            } else {
                print(reply.geojson)
            }
        }
    }
}

/// `gateway zoo catalogue`: every animal with every attribute, in one call (ExportCatalogue's pages).
struct ZooCatalogue: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "catalogue",
        abstract: "Every animal with every attribute in one call (the ExportCatalogue stream), kept now or not.",
        discussion:
            #"With --json: a JSON array of the stream's CataloguePage messages, [{"animals": [{every attribute of Animal}, …], "total"}, …]."#
    )

    @Option(name: .customLong("page-size"), parsing: .unconditional, help: "Animals per streamed page (1…500).")
    var pageSize: Int32 = 100

    @OptionGroup var global: GlobalOptions

    func validate() throws {
        guard (1...500).contains(pageSize) else { throw InvalidValue("--page-size must be 1…500 (got \(pageSize))") }
    }

    func run() async throws {
        try await global.withZoo { zoo in
            var pages: [ZooV1.CataloguePage] = []
            for try await page in zoo.exportCatalogue(
                ZooV1.ExportCatalogueRequest(pageSize: pageSize), options: global.callOptions)
            {
                pages.append(page)
            }
            try global.render(
                jsonValue: { .array(pages.map(\.outputJSON)) },
                text: {
                    let animals = pages.flatMap(\.animals)
                    printTable(
                        ["ID", "NAME", "CLASS", "LOCATION", "WALK TO"],
                        animals.map { animal in
                            [
                                String(animal.id), animal.name, animal.taxonClass?.czech ?? "-", animal.location ?? "-",
                                ZooFormat.destination(animal.placeKind, animal.placeName) ?? "-",
                            ]
                        })
                    print("\(animals.count) animal\(animals.count == 1 ? "" : "s")")
                })
        }
    }
}

/// `gateway zoo graph`: the footpath graph with node ids and connectors.
struct ZooGraph: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "graph",
        abstract:
            "The footpath graph: nodes (id, position, footpaths, connector) and footpaths (node ids in walking order).",
        discussion:
            #"With --json: the GetFootpathGraphResponse, {"nodes": [{"id", "lon", "lat", "roadIds", "isConnector"}, …], "roads": [{"id", "nodeIds"}, …]}."#
    )

    @OptionGroup var global: GlobalOptions

    func run() async throws {
        try await global.withZoo { zoo in
            let reply = try await zoo.getFootpathGraph(ZooV1.GetFootpathGraphRequest(), options: global.callOptions)
            try global.render(
                reply,
                text: {
                    let connectors = reply.nodes.filter(\.isConnector).count
                    print("\(reply.nodes.count) nodes (\(connectors) connectors), \(reply.roads.count) footpaths")
                })
        }
    }
}
