import Foundation
import TestSupport
import Testing

@testable import ZooCore

@Suite struct RoutingTests {
    //  D(50.1160,14.4000) ── C(50.1160,14.4010)
    //  │                     │
    //  A(50.1150,14.4000) ── B(50.1150,14.4010)        E ── F far away, not connected
    static let network = FootpathNetwork(
        nodes: [
            FootpathNode(id: 1, position: GeoPoint(lat: 50.1150, lon: 14.4000)),
            FootpathNode(id: 2, position: GeoPoint(lat: 50.1150, lon: 14.4010)),
            FootpathNode(id: 3, position: GeoPoint(lat: 50.1160, lon: 14.4010)),
            FootpathNode(id: 4, position: GeoPoint(lat: 50.1160, lon: 14.4000)),
            FootpathNode(id: 5, position: GeoPoint(lat: 50.1180, lon: 14.4100)),
            FootpathNode(id: 6, position: GeoPoint(lat: 50.1180, lon: 14.4110)),
        ],
        roads: [
            Footpath(id: 100, nodeIDs: [1, 2, 3]), Footpath(id: 101, nodeIDs: [3, 4]),
            Footpath(id: 102, nodeIDs: [4, 1]), Footpath(id: 103, nodeIDs: [5, 6]),
        ])
    static let bounds = MapBounds(north: 50.119, east: 14.412, south: 50.114, west: 14.399)
    static let router = Router(graph: FootpathGraph(network: network), bounds: bounds)

    @Test func projectsOntoTheNearestSegmentNotTheNearestNode() throws {
        let snap = try Self.router.snap(GeoPoint(lat: 50.11505, lon: 14.4005))
        let segment = Self.router.graph.segments[snap.segment]
        #expect(segment.roadID == 100 && Self.router.graph.nodeIDs[Int(segment.from)] == 1)
        #expect(abs(snap.fraction - 0.5) < 1e-6)
        #expect(abs(snap.point.lat - 50.1150) < 1e-9 && abs(snap.point.lon - 14.4005) < 1e-9)
        #expect(abs(snap.offset - 0.00005 * Geo.metersPerDegree) < 0.01)
    }

    @Test func projectionClampsToSegmentEnds() throws {
        let snap = try Self.router.snap(GeoPoint(lat: 50.1145, lon: 14.3995))
        #expect(snap.point == GeoPoint(lat: 50.1150, lon: 14.4000))
    }

    @Test func directWalkAlongOneSegment() throws {
        let route = try Self.router.route(
            from: GeoPoint(lat: 50.11501, lon: 14.4002), to: GeoPoint(lat: 50.11501, lon: 14.4008))
        #expect(route.nodeIDs.isEmpty && route.coordinates.count == 2)
        let expected = Geo.haversine(GeoPoint(lat: 50.1150, lon: 14.4002), GeoPoint(lat: 50.1150, lon: 14.4008))
        #expect(abs(route.distanceMeters - expected) < 0.01)
        #expect(abs(route.durationSeconds - route.distanceMeters / 1.2) < 1e-9)
    }

    @Test func routeAcrossRoadsPassesNodesAndBuildsThePolyline() throws {
        // From the middle of A–B to the middle of C–D: either way round is 1.5 sides long; ids pass B, C or A, D.
        let route = try Self.router.route(
            from: GeoPoint(lat: 50.1150, lon: 14.4004), to: GeoPoint(lat: 50.1160, lon: 14.4004))
        #expect(route.nodeIDs == [1, 4])
        #expect(route.coordinates.count == 4)
        let polyline = zip(route.coordinates, route.coordinates.dropFirst()).reduce(0) {
            $0 + Geo.haversine($1.0, $1.1)
        }
        #expect(abs(polyline - route.distanceMeters) < 0.05)
    }

    @Test func aPointJoinsTheNearestFootpathFromWhichTheOtherEndCanBeReached() throws {
        // The start lies nearest to E–F, a piece of its own; the goal is on the square.
        let start = GeoPoint(lat: 50.1175, lon: 14.4100), goal = GeoPoint(lat: 50.1150, lon: 14.4004)
        let graph = Self.router.graph
        #expect(graph.components[0] == graph.components[3] && graph.components[0] != graph.components[4])
        #expect(graph.mainComponent == graph.components[0])
        let nearest = try Self.router.snap(start)
        #expect(graph.nodeIDs[Int(graph.segments[nearest.segment].from)] == 5)
        let moved = try Self.router.snap(start, reaching: [try Self.router.snap(goal)])
        #expect(moved.point == GeoPoint(lat: 50.1160, lon: 14.4010))  // C, the square's nearest corner
        let route = try Self.router.route(from: start, to: goal)
        #expect(route.coordinates.first == moved.point && abs(route.startOffsetMeters - moved.offset) < 1e-9)
        #expect(route.startOffsetMeters > 300 && route.endOffsetMeters < 1)
        // Either end moves: here the goal is the one farther from the other's piece.
        let back = try Self.router.route(from: goal, to: start)
        #expect(
            abs(back.distanceMeters - route.distanceMeters) < 1e-6 && back.endOffsetMeters == route.startOffsetMeters)
    }

    @Test func animalsAreReachedOnTheZoosNetworkAtTheirPensAndNoPathIsSaidInWords() throws {
        let features = [
            MapFeature(
                id: 10, name: "lvi", isAnimalPen: true, isBuilding: false, singularNames: [],
                outline: [GeoPoint(lat: 50.1151, lon: 14.4004)], animalNames: []),
            MapFeature(
                id: 20, name: "Pavilon šelem", isAnimalPen: false, isBuilding: true, singularNames: [],
                outline: [GeoPoint(lat: 50.1159, lon: 14.4004)], animalNames: []),
            MapFeature(
                id: 30, name: "žirafy", isAnimalPen: true, isBuilding: false, singularNames: [],
                outline: [GeoPoint(lat: 50.1181, lon: 14.4105)], animalNames: []),
        ]
        let animals = [
            Animal(id: 1, name: "Lev", mapFeatureIDs: [20, 10]), Animal(id: 2, name: "Žirafa", mapFeatureIDs: [30]),
        ]
        let zoo = ZooSnapshot(catalogue: Catalogue(animals: animals, mapFeatures: features), router: Self.router)
        // The lion has a pen: the walk ends there, not at the pavilion that is nearer.
        let (_, destination) = try zoo.routeWithDestination(
            from: .point(GeoPoint(lat: 50.11595, lon: 14.4004)), to: .animal(id: 1))
        #expect(destination == Destination(kind: .pen, name: "lvi", featureID: 10))
        // The giraffes' pen lies nearest to E–F, a piece of its own: it is reached on the square, the zoo's network.
        let toGiraffes = try zoo.route(from: .animal(id: 1), to: .animal(id: 2))
        #expect(toGiraffes.coordinates.last == GeoPoint(lat: 50.1160, lon: 14.4010))
        let graph = Self.router.graph
        let onSquare = try #require(graph.snap(GeoPoint(lat: 50.1150, lon: 14.4004)))
        let apart = try #require(graph.snap(GeoPoint(lat: 50.1180, lon: 14.41051234)))
        #expect(throws: ZooError.noPath("from (50.115, 14.4004) to (50.118, 14.41051): no footpath joins them")) {
            try Self.router.route(from: onSquare, to: apart)
        }
        #expect(Geo.describe(GeoPoint(lat: 50.115000001, lon: 14.40380499)) == "(50.115, 14.4038)")
        #expect(
            ZooError.outOfRange(GeoPoint(lat: 50.2, lon: 14.123456789)).message
                == "point (50.2, 14.12346) is outside the zoo map")
    }

    @Test func errorsAreTyped() {
        #expect(
            performing: {
                try Self.router.route(from: GeoPoint(lat: 50.2, lon: 14.4), to: GeoPoint(lat: 50.115, lon: 14.4))
            },
            throws: { ($0 as? ZooError)?.category == .outOfRange })
        #expect(
            performing: { try Self.router.snap(GeoPoint(lat: .nan, lon: 14.4)) },
            throws: { ($0 as? ZooError)?.category == .invalidArgument })
        #expect(
            performing: { try Self.router.snap(GeoPoint(lat: 91, lon: 14.4)) },
            throws: { ($0 as? ZooError)?.category == .invalidArgument })
        // The margin lets points just outside the box in.
        #expect((try? Self.router.snap(GeoPoint(lat: 50.1195, lon: 14.4))) != nil)
    }

    @Test func heuristicNeverExceedsTheHaversineDistance() {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<100_000 {
            let a = GeoPoint(
                lat: .random(in: 50.11...50.123, using: &generator), lon: .random(in: 14.39...14.42, using: &generator))
            let scale = [1e-2, 1e-4, 1e-6].randomElement(using: &generator)!
            let b = GeoPoint(
                lat: a.lat + .random(in: -scale...scale, using: &generator),
                lon: a.lon + .random(in: -scale...scale, using: &generator))
            let bound = Geo.lowerBoundDistance(Geo.unitVector(a), Geo.unitVector(b))
            let arc = Geo.haversine(a, b)
            #expect(bound <= arc && arc - bound < 1e-4, "\(a) \(b): bound \(bound), arc \(arc)")
        }
    }

    @Test func aStarMatchesDijkstraOnTheSmallGraph() throws {
        let graph = Self.router.graph
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<200 {
            let a = GeoPoint(
                lat: .random(in: 50.1148...50.1162, using: &generator),
                lon: .random(in: 14.3998...14.4012, using: &generator))
            let b = GeoPoint(
                lat: .random(in: 50.1148...50.1162, using: &generator),
                lon: .random(in: 14.3998...14.4012, using: &generator))
            let start = try #require(graph.snap(a)), end = try #require(graph.snap(b))
            let path = try #require(graph.shortestPath(from: start, to: end))
            let reference = graph.distance(using: graph.distances(from: start), from: start, to: end)
            #expect(abs(path.length - reference) < 1e-6)
        }
    }

    @Test func twoOptUncrossesANearestNeighbourTour() {
        // Points on a line: start 0 at x=0; stops at x = 1, -2, 3 → NN order 1, -2, 3 (1+3+5 = 9);
        // the best open path is 1, 3 then -2? (1+2+5=8) or -2, 1, 3 (2+3+2=7).
        let x: [Double] = [0, 1, -2, 3]
        let optimised = ZooSnapshot.twoOpt([(0, 1), (1, 2), (2, 3)], start: 0) { abs(x[$0] - x[$1]) }
        let length = zip([0] + optimised.map(\.point), optimised.map(\.point)).reduce(0) { $0 + abs(x[$1.0] - x[$1.1]) }
        #expect(length == 7)
    }
}

@Suite(.enabled(if: RealData.enabled, RealData.skipMessage))
struct RealRoutingTests {
    @Test func gpxRoutesAreNoLongerThanDijkstraAndNoShorterThanTheStraightLine() throws {
        let router = try RealData.router.get()
        let graph = router.graph
        let points = try RealData.gpxTracks().keys.sorted().flatMap { try RealData.gpxTracks()[$0]! }
        #expect(points.count == 95)
        let snaps = try points.map { try router.snap($0) }
        var connected = 0
        for (i, start) in snaps.enumerated() {
            let distances = graph.distances(from: start)
            for (j, end) in snaps.enumerated() where i != j && (i + j) % 4 == 0 {
                let dijkstra = graph.distance(using: distances, from: start, to: end)
                guard let path = graph.shortestPath(from: start, to: end) else {
                    #expect(dijkstra == .infinity, "A* found no path \(i)→\(j) but Dijkstra did")
                    continue
                }
                connected += 1
                #expect(path.length <= dijkstra + 1e-6, "\(i)→\(j): A* \(path.length) > Dijkstra \(dijkstra)")
                #expect(path.length >= Geo.haversine(start.point, end.point) - 1e-6)
            }
        }
        #expect(connected > 500)
    }

    @Test func gridProjectionEqualsBruteForce() throws {
        let graph = try RealData.router.get().graph
        for point in try RealData.gpxTracks().values.flatMap({ $0 }) {
            let snap = try #require(graph.snap(point))
            let xy = graph.projection.project(point)
            let brute = graph.segments.indices.map { index in
                SegmentGrid.foot(
                    of: xy, on: graph.planar[Int(graph.segments[index].from)],
                    graph.planar[Int(graph.segments[index].to)]
                ).distance
            }.min()!
            #expect(abs(snap.offset - brute) < 1e-9)
        }
    }

    @Test func routesBetweenAnimalsPavilionsAndPoints() throws {
        let zoo = try RealData.jsonSnapshot.get()
        let lion = try #require(zoo.catalogue.animals.first { $0.name == "Lev indický" })
        let tortoise = try #require(zoo.catalogue.animals.first { $0.name == "Želva obrovská" })
        let route = try zoo.route(from: .animal(id: lion.id), to: .animal(id: tortoise.id))
        #expect(route.distanceMeters > 0 && route.nodeIDs.count > 1)
        let reverse = try zoo.route(from: .animal(id: tortoise.id), to: .animal(id: lion.id))
        #expect(abs(reverse.distanceMeters - route.distanceMeters) < 1e-6)
        let entrance = GeoPoint(lat: 50.11677, lon: 14.41163)  // first point of zakazanka_normal.gpx
        let toPavilion = try zoo.route(from: .point(entrance), to: .pavilion("Pavilon velkých želv"))
        #expect(toPavilion.coordinates.count == toPavilion.nodeIDs.count + 2)
        #expect(throws: ZooError.unknownPavilion("Nope")) {
            try zoo.route(from: .point(entrance), to: .pavilion("Nope"))
        }
        #expect(throws: ZooError.unknownAnimal(id: 9999)) {
            try zoo.route(from: .point(entrance), to: .animal(id: 9999))
        }
        let homeless = try #require(zoo.catalogue.animals.first { $0.mapFeatureIDs.isEmpty })
        #expect(throws: ZooError.noMapLocation(animalID: homeless.id, name: homeless.name)) {
            try zoo.route(from: .point(entrance), to: .animal(id: homeless.id))
        }
    }

    @Test func nearbyIsSortedAndWithinWalkingRadius() throws {
        let zoo = try RealData.jsonSnapshot.get()
        let start = try #require(
            zoo.catalogue.mapLocations(of: zoo.catalogue.animals.first { $0.name == "Lev indický" }!).first
        ).anchor
        let nearby = try zoo.nearby(start, radius: 250)
        #expect(!nearby.isEmpty)
        #expect(nearby.map(\.distanceMeters) == nearby.map(\.distanceMeters).sorted())
        #expect(nearby.allSatisfy { $0.distanceMeters <= 250 })
        for hit in nearby.prefix(5) {
            let route = try zoo.route(from: .point(start), to: .animal(id: hit.animal.id))
            #expect(abs(route.distanceMeters - hit.distanceMeters) < 1e-6)
        }
        #expect(throws: ZooError.self) { try zoo.nearby(start, radius: -1) }
    }

    @Test func tourVisitsEveryAnimalOnceWithLegsSummingToTheTotal() throws {
        let zoo = try RealData.jsonSnapshot.get()
        let names = ["Lev indický", "Želva obrovská", "Adax", "Pštros dvouprstý", "Panda červená", "Kotul veverovitý"]
        let ids = names.map { name in zoo.catalogue.animals.first { $0.name == name }!.id }
        let start = GeoPoint(lat: 50.1167, lon: 14.4060)
        let tour = try zoo.tour(from: start, animalIDs: ids)
        #expect(Set(tour.legs.map(\.animal.id)) == Set(ids) && tour.legs.count == ids.count)
        #expect(abs(tour.legs.reduce(0) { $0 + $1.route.distanceMeters } - tour.distanceMeters) < 1e-6)
        var given = 0.0, position = Place.point(start)
        for id in ids {
            given += try zoo.route(from: position, to: .animal(id: id)).distanceMeters
            position = .animal(id: id)
        }
        #expect(tour.distanceMeters <= given + 1e-6)
    }

    @Test func geoJSONExportsFootpathsAndAnimalLocations() throws {
        let zoo = try RealData.jsonSnapshot.get()
        let object = try #require(try JSONSerialization.jsonObject(with: zoo.geoJSON()) as? [String: Any])
        #expect(object["type"] as? String == "FeatureCollection")
        let features = try #require(object["features"] as? [[String: Any]])
        let kinds = features.map { ($0["properties"] as? [String: Any])?["kind"] as? String }
        #expect(kinds.filter { $0 == "footpath" }.count == zoo.router.graph.roads.count)
        #expect(kinds.filter { $0 == "animal_location" }.count == 90)
    }

    @Test func searchAndRouteAreFast() throws {
        let zoo = try RealData.jsonSnapshot.get()
        let points = try RealData.gpxTracks()["zakazanka_normal.gpx"]!
        let clock = ContinuousClock()
        let searches =
            clock.measure {
                for text in ["zelva", "lev", "a", "obrovska", "panthera", "xyz"] {
                    _ = try? zoo.catalogue.search(SearchQuery(text: text))
                }
            } / 6
        let routes =
            clock.measure {
                for (a, b) in zip(points, points.reversed()) { _ = try? zoo.router.route(from: a, to: b) }
            } / points.count
        print("search \(searches), route \(routes) per call")
        // Debug builds are several times slower than release; the release target is well under 1 ms.
        #expect(searches < TestTime.scaled(.milliseconds(20)) && routes < TestTime.scaled(.milliseconds(20)))
    }
}

/// Every place on the real footpaths reaches every animal a walk can reach (issue 39: the graph is in 61 pieces).
@Suite(.enabled(if: RealData.enabled, RealData.skipMessage))
struct RealReachabilityTests {
    static let zoo = Result {
        let union = LexiconUnion.merge(
            lexicon: try RealData.lexiconCSV.get().animals, website: try RealData.animalsJSON.get().animals
        ).animals
        return ZooSnapshot(
            catalogue: Catalogue(
                animals: union, mapFeatures: try RealData.animalsJSON.get().mapFeatures,
                adoptions: try RealData.adoptions.get(), joins: try RealData.joins.get()),
            router: try RealData.router.get())
    }

    @Test func aStartBesideAnotherPieceOfFootpathStillReachesTheAnimal() throws {
        let zoo = try Self.zoo.get()
        let (route, _) = try zoo.routeWithDestination(
            from: .point(GeoPoint(lat: 50.115, lon: 14.4038)), to: .animal(id: 1))
        #expect(route.distanceMeters > 0 && route.startOffsetMeters > 0)
        let bounds = try #require(zoo.router.bounds)
        var failures: [String] = []
        for row in 0..<10 {
            for column in 0..<12 {
                let point = GeoPoint(
                    lat: bounds.south + (bounds.north - bounds.south) * (Double(row) + 0.5) / 10,
                    lon: bounds.west + (bounds.east - bounds.west) * (Double(column) + 0.5) / 12)
                do { _ = try zoo.route(from: .point(point), to: .animal(id: 1)) } catch {
                    failures.append("\(point): \(error)")
                }
            }
        }
        #expect(failures.isEmpty, "\(failures)")
    }

    @Test func nearbyFromBesideAnotherPieceOfFootpathFindsTheAnimalsOfTheZoosNetwork() throws {
        let zoo = try Self.zoo.get()
        let point = GeoPoint(lat: 50.115, lon: 14.4038)
        #expect(zoo.router.graph.component(of: try zoo.router.snap(point)) != zoo.router.graph.mainComponent)
        let nearby = try zoo.nearby(point, radius: 300)
        #expect(nearby.contains { $0.animal.id == 1 }, "\(nearby.map(\.animal.name))")
    }

    @Test func theLionsWalkEndsAtItsPenNotItsPavilion() throws {
        let zoo = try Self.zoo.get()
        let lion = try #require(zoo.catalogue.animals.first { $0.name == "Lev indický" })
        for start in [GeoPoint(lat: 50.1163, lon: 14.4000), GeoPoint(lat: 50.1167, lon: 14.4060)] {
            let (_, destination) = try zoo.routeWithDestination(from: .point(start), to: .animal(id: lion.id))
            #expect(destination == Destination(kind: .pen, name: "lvi", featureID: 4_791_798_031))
        }
    }

    /// 200 seeded random points on the footpaths inside the map, each against every routable animal. One search
    /// per start and group of animals reachable from the same pieces checks them all; one walk per group goes
    /// through `routeWithDestination` itself.
    @Test func everyPointOnTheFootpathsReachesEveryRoutableAnimal() throws {
        let zoo = try Self.zoo.get()
        let router = zoo.router, graph = router.graph
        let bounds = try #require(router.bounds)
        let unroutable = Set(zoo.routability().unroutableAnimals.compactMap(\.animalID))
        var groups: [Set<Int32>: [(id: Int, snaps: [Snap])]] = [:]
        for animal in zoo.catalogue.animals where !unroutable.contains(animal.id) {
            let snaps = (zoo.catalogue.placement(of: animal)?.featureIDs ?? []).compactMap { zoo.featureSnaps[$0] }
            groups[Set(snaps.map(graph.component(of:))), default: []].append((animal.id, snaps))
        }
        #expect(groups.values.reduce(0) { $0 + $1.count } > 500)
        var generator = SeededGenerator(seed: 39)
        var points: [GeoPoint] = []
        while points.count < 200 {
            let segment = graph.segments[Int.random(in: 0..<graph.segments.count, using: &generator)]
            let (a, b) = (graph.positions[Int(segment.from)], graph.positions[Int(segment.to)])
            let t = Double.random(in: 0...1, using: &generator)
            let point = GeoPoint(lat: a.lat + (b.lat - a.lat) * t, lon: a.lon + (b.lon - a.lon) * t)
            if bounds.contains(point) { points.append(point) }
        }
        var failures: [String] = []
        for point in points {
            for members in groups.values {
                let start = try router.snap(point, reaching: members.flatMap(\.snaps))
                let distances = graph.distances(from: start)
                for member in members
                where !member.snaps.contains(where: { graph.distance(using: distances, from: start, to: $0).isFinite })
                {
                    failures.append("\(point) → animal \(member.id)")
                }
                do { _ = try zoo.route(from: .point(point), to: .animal(id: members[0].id)) } catch {
                    failures.append("\(point) → animal \(members[0].id): \(error)")
                }
            }
        }
        #expect(failures.isEmpty, "\(failures.count) failures, e.g. \(failures.prefix(5))")
    }
}
