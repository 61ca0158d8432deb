/// A walking route.
public struct Route: Sendable, Equatable {
    public var distanceMeters: Double
    public var durationSeconds: Double
    /// OpenStreetMap ids of the graph nodes passed, in order.
    public var nodeIDs: [Int64]
    /// The whole polyline: projected start, the nodes, projected end.
    public var coordinates: [GeoPoint]
}

/// Point-to-point routing on the footpath graph with bounds and coordinate checks.
public struct Router: Sendable {
    public let graph: FootpathGraph
    public let bounds: MapBounds?
    /// Walking pace in metres per second.
    public let walkingSpeed: Double
    /// How far outside `bounds` a point may lie, in metres.
    public let boundsMarginMeters: Double

    public init(graph: FootpathGraph, bounds: MapBounds?, walkingSpeed: Double = 1.2, boundsMarginMeters: Double = 100) {
        self.graph = graph
        self.bounds = bounds
        self.walkingSpeed = walkingSpeed
        self.boundsMarginMeters = boundsMarginMeters
    }

    /// Checks that `point` is a coordinate inside the map and projects it onto the nearest footpath.
    public func snap(_ point: GeoPoint) throws(ZooError) -> Snap {
        guard Geo.isValid(point) else { throw .malformedCoordinate(lat: point.lat, lon: point.lon) }
        if let bounds, !bounds.contains(point, marginMeters: boundsMarginMeters) { throw .outOfRange(point) }
        guard let snap = graph.snap(point) else { throw .noPath("from (\(point.lat), \(point.lon)): the map has no footpaths") }
        return snap
    }

    /// The shortest walk between two points (each projected onto its nearest footpath segment).
    public func route(from start: GeoPoint, to end: GeoPoint) throws(ZooError) -> Route {
        try route(from: snap(start), to: snap(end))
    }

    /// The shortest walk between two snapped points.
    public func route(from start: Snap, to end: Snap) throws(ZooError) -> Route {
        guard let route = shortestRoute(from: [start], to: [end]) else {
            throw .noPath("from (\(start.point.lat), \(start.point.lon)) to (\(end.point.lat), \(end.point.lon))")
        }
        return route
    }

    /// The shortest of the walks from any start to any end (one search per start); `nil` when none is connected.
    func shortestRoute(from starts: [Snap], to ends: [Snap]) -> Route? {
        shortestRouteAndEnd(from: starts, to: ends)?.route
    }

    /// `shortestRoute` with the index in `ends` of the end it reaches.
    func shortestRouteAndEnd(from starts: [Snap], to ends: [Snap]) -> (route: Route, end: Int)? {
        var best: (path: GraphPath, start: Snap, end: Int)?
        for start in starts {
            if let (path, goal) = graph.shortestPath(from: start, toNearestOf: ends), path.length < best?.path.length ?? .infinity {
                best = (path, start, goal)
            }
        }
        guard let (path, start, end) = best else { return nil }
        let route = Route(distanceMeters: path.length, durationSeconds: path.length / walkingSpeed,
                          nodeIDs: path.nodes.map { graph.nodeIDs[Int($0)] },
                          coordinates: [start.point] + path.nodes.map { graph.positions[Int($0)] } + [ends[end].point])
        return (route, end)
    }
}
