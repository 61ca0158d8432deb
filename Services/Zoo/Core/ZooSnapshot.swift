/// A start or destination of a walk.
public enum Place: Sendable, Hashable {
    case point(GeoPoint)
    /// Any map location of the animal (the nearest by walking wins).
    case animal(id: Int)
    /// A house or zoo part: its buildings, features of its name and its animals' pens.
    case pavilion(String)
}

/// What a walk ends at.
public struct Destination: Sendable, Equatable {
    /// `nil` for a point.
    public var kind: PlaceKind?
    /// The pen's, house's or zoo part's name ("" for a point).
    public var name: String
    /// The map feature reached (0 for a point).
    public var featureID: Int64
}

/// Why an animal or house cannot be walked to.
public struct Unroutable: Sendable, Equatable {
    /// `nil` for a house.
    public var animalID: Int?
    public var name: String
    public var reason: String
}

/// How much of the zoo a walk reaches.
public struct Routability: Sendable, Equatable {
    public var animals = 0
    public var toPen = 0
    public var toHouse = 0
    public var toZooPart = 0
    public var routableAnimals: Int { toPen + toHouse + toZooPart }
    public var houses = 0
    public var routableHouses = 0
    public var unroutableAnimals: [Unroutable] = []
    public var unroutableHouses: [Unroutable] = []
}

/// An animal within walking reach.
public struct NearbyAnimal: Sendable, Equatable {
    public var animal: Animal
    /// Metres of walking to its nearest map location.
    public var distanceMeters: Double
    public var featureID: Int64
}

/// One leg of a tour: the walk to the next animal.
public struct TourLeg: Sendable, Equatable {
    public var animal: Animal
    public var featureID: Int64
    public var route: Route
}

/// A visiting order with its legs.
public struct Tour: Sendable, Equatable {
    public var legs: [TourLeg]
    public var distanceMeters: Double
    public var durationSeconds: Double
}

/// Everything the zoo service answers from: the catalogue and the router over one consistent data set.
/// Immutable; a class so that handing it to each call costs one reference.
public final class ZooSnapshot: Sendable {
    public let catalogue: Catalogue
    public let router: Router
    /// Snapped map features, by OpenStreetMap id (features that cannot be snapped are absent): onto the zoo's
    /// own network (`FootpathGraph.mainComponent`), not a bit of path inside a pen that joins nothing, so every
    /// animal and house can be walked to from every other.
    let featureSnaps: [Int64: Snap]

    public init(catalogue: Catalogue, router: Router) {
        self.catalogue = catalogue
        self.router = router
        var snaps: [Int64: Snap] = [:]
        for (id, feature) in catalogue.features where Geo.isValid(feature.anchor) {
            snaps[id] = router.graph.snap(feature.anchor, within: [router.graph.mainComponent])
        }
        featureSnaps = snaps
    }

    /// The shortest walk between two places.
    public func route(from start: Place, to end: Place) throws(ZooError) -> Route {
        try routeWithDestination(from: start, to: end).route
    }

    /// The shortest walk between two places, and what it ends at (an animal's pen, or its house or zoo part).
    public func routeWithDestination(from start: Place, to end: Place) throws(ZooError) -> (
        route: Route, destination: Destination
    ) {
        var starts = try snaps(for: start), ends = try snaps(for: end)
        // A point joins the footpaths where the other end can be walked to, not merely the nearest footpath.
        switch (start, end) {
        case (.point(let first), .point(let last)):
            let (from, to) = try router.snapPair(first, last)
            (starts, ends) = ([(0, from)], [(0, to)])
        case (.point(let first), _):
            starts = [(0, try router.snap(first, reaching: ends.map(\.snap)))]
        case (_, .point(let last)):
            ends = [(0, try router.snap(last, reaching: starts.map(\.snap)))]
        default:
            break
        }
        guard let (route, index) = router.shortestRouteAndEnd(from: starts.map(\.snap), to: ends.map(\.snap)) else {
            throw .noPath("from \(describe(start)) to \(describe(end)): no footpath joins them")
        }
        let featureID = ends[index].featureID
        let destination: Destination =
            switch end {
            case .point: Destination(kind: nil, name: "", featureID: 0)
            case .animal(let id):
                switch try catalogue.placement(of: catalogue.animal(id: id)) {
                case let placement? where placement.kind != .pen:
                    Destination(kind: placement.kind, name: placement.name, featureID: featureID)
                default: Destination(kind: .pen, name: catalogue.features[featureID]?.name ?? "", featureID: featureID)
                }
            case .pavilion(let name):
                Destination(
                    kind: catalogue.house(named: name)?.kind ?? .house,
                    name: catalogue.house(named: name)?.name ?? name,
                    featureID: featureID)
            }
        return (route, destination)
    }

    /// Which animals and houses a walk reaches, and why the others cannot be reached.
    public func routability() -> Routability {
        var result = Routability()
        for animal in catalogue.animals {
            result.animals += 1
            let reason: String
            if !animal.isCurrentlyAvailable {
                reason = "not kept now"
            } else if let placement = catalogue.placement(of: animal) {
                if placement.featureIDs.contains(where: { featureSnaps[$0] != nil }) {
                    switch placement.kind {
                    case .pen: result.toPen += 1
                    case .house: result.toHouse += 1
                    case .zooPart: result.toZooPart += 1
                    }
                    continue
                }
                reason =
                    "its \(placement.kind == .pen ? "pen" : placement.kind.rawValue + " \"" + placement.name + "\"") is on no footpath of the map"
            } else if let location = animal.location {
                reason =
                    "no pen of its own, and nothing places \"\(location)\" on the map (no building of that name, no pen of its animals)"
            } else {
                reason = "no location in either source (no pen, no house or zoo part)"
            }
            result.unroutableAnimals.append(Unroutable(animalID: animal.id, name: animal.name, reason: reason))
        }
        for house in catalogue.houses {
            result.houses += 1
            if house.featureIDs.contains(where: { featureSnaps[$0] != nil }) {
                result.routableHouses += 1
            } else {
                let reason =
                    house.featureIDs.isEmpty
                    ? "no building, path or animal pen of it on the map" : "its places are on no footpath of the map"
                result.unroutableHouses.append(Unroutable(animalID: nil, name: house.name, reason: reason))
            }
        }
        return result
    }

    /// Currently kept animals with a map location within `radius` metres of walking from `point`,
    /// nearest first.
    public func nearby(_ point: GeoPoint, radius: Double) throws(ZooError) -> [NearbyAnimal] {
        guard radius.isFinite, radius >= 0 else {
            throw .invalidArgument("radius must be a non-negative number of metres")
        }
        // The map locations are on the zoo's network: a point beside a bit of path that joins nothing starts there.
        let start = try router.snap(point, within: [router.graph.mainComponent])
        let distances = router.graph.distances(from: start, limit: radius)
        var result: [NearbyAnimal] = []
        for animal in catalogue.animals where animal.isCurrentlyAvailable {
            var nearest: (Double, Int64)?
            for id in animal.mapFeatureIDs {
                guard let snap = featureSnaps[id] else { continue }
                let distance = router.graph.distance(using: distances, from: start, to: snap)
                if distance <= radius, distance < nearest?.0 ?? .infinity { nearest = (distance, id) }
            }
            if let (distance, id) = nearest {
                result.append(NearbyAnimal(animal: animal, distanceMeters: distance, featureID: id))
            }
        }
        return result.sorted { ($0.distanceMeters, $0.animal.id) < ($1.distanceMeters, $1.animal.id) }
    }

    /// A short visiting order for `animalIDs` from `start`: nearest neighbour improved by 2-opt,
    /// each animal visited at one of its map locations.
    public func tour(from start: GeoPoint, animalIDs: [Int]) throws(ZooError) -> Tour {
        var seen = Set<Int>()
        let stops = try animalIDs.filter { seen.insert($0).inserted }.map { id throws(ZooError) in
            let animal = try catalogue.animal(id: id)
            let locations = try snaps(for: .animal(id: id))
            return (animal: animal, locations: locations)
        }
        guard !stops.isEmpty else { throw .invalidArgument("a tour needs at least one animal") }
        let origin = try router.snap(start, reaching: stops.flatMap { $0.locations.map(\.snap) })
        // Candidate points: 0 is the start, then every location of every stop.
        var points = [origin]
        var candidates: [[Int]] = []
        for stop in stops {
            candidates.append(
                stop.locations.map { location in
                    points.append(location.snap)
                    return points.count - 1
                })
        }
        let matrix = points.map { from in
            let distances = router.graph.distances(from: from)
            return points.map { router.graph.distance(using: distances, from: from, to: $0) }
        }
        var order: [(stop: Int, point: Int)] = []
        var remaining = Set(stops.indices)
        var current = 0
        while !remaining.isEmpty {
            var best: (stop: Int, point: Int, distance: Double)?
            for stop in remaining.sorted() {
                for point in candidates[stop] where matrix[current][point] < best?.distance ?? .infinity {
                    best = (stop, point, matrix[current][point])
                }
            }
            guard let next = best else {
                let names = remaining.sorted().map { stops[$0].animal.name }.joined(separator: ", ")
                throw .noPath("to \(names)")
            }
            order.append((next.stop, next.point))
            remaining.remove(next.stop)
            current = next.point
        }
        order = Self.twoOpt(order, start: 0, distance: { matrix[$0][$1] })
        var legs: [TourLeg] = []
        var from = origin
        for (stop, point) in order {
            let route = try router.route(from: from, to: points[point])
            legs.append(
                TourLeg(
                    animal: stops[stop].animal,
                    featureID: stops[stop].locations[candidates[stop].firstIndex(of: point)!].featureID, route: route))
            from = points[point]
        }
        let total = legs.reduce(0) { $0 + $1.route.distanceMeters }
        return Tour(legs: legs, distanceMeters: total, durationSeconds: total / router.walkingSpeed)
    }

    /// 2-opt on an open path with a fixed start: reverses sub-sequences while that shortens the walk.
    static func twoOpt(_ order: [(stop: Int, point: Int)], start: Int, distance: (Int, Int) -> Double) -> [(
        stop: Int, point: Int
    )] {
        var order = order
        var improved = true
        while improved {
            improved = false
            for i in 0..<order.count {
                for j in (i + 1)..<max(i + 1, order.count) {
                    let before = i == 0 ? start : order[i - 1].point
                    let after = j + 1 < order.count ? order[j + 1].point : nil
                    let current = distance(before, order[i].point) + (after.map { distance(order[j].point, $0) } ?? 0)
                    let swapped = distance(before, order[j].point) + (after.map { distance(order[i].point, $0) } ?? 0)
                    if swapped < current - 1e-6 {
                        order[i...j].reverse()
                        improved = true
                    }
                }
            }
        }
        return order
    }

    private func snaps(for place: Place) throws(ZooError) -> [(featureID: Int64, snap: Snap)] {
        switch place {
        case .point(let point):
            return [(0, try router.snap(point))]
        case .animal(let id):
            let animal = try catalogue.animal(id: id)
            let placement = catalogue.placement(of: animal)
            let snaps = (placement?.featureIDs ?? []).compactMap { id in featureSnaps[id].map { (id, $0) } }
            guard !snaps.isEmpty else { throw .noMapLocation(animalID: animal.id, name: animal.name) }
            return snaps
        case .pavilion(let name):
            let snaps = (catalogue.house(named: name)?.featureIDs ?? []).compactMap { id in
                featureSnaps[id].map { (id, $0) }
            }
            guard !snaps.isEmpty else { throw .unknownPavilion(name) }
            return snaps
        }
    }

    private func describe(_ place: Place) -> String {
        switch place {
        case .point(let point): Geo.describe(point)
        case .animal(let id): (try? catalogue.animal(id: id).name).map { "animal \"\($0)\"" } ?? "animal \(id)"
        case .pavilion(let name): "pavilion \"\(name)\""
        }
    }
}
