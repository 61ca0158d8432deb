/// A walking route.
public struct Route: Sendable, Equatable {
    public var distanceMeters: Double
    public var durationSeconds: Double
    /// OpenStreetMap ids of the graph nodes passed, in order.
    public var nodeIDs: [Int64]
    /// The whole polyline: projected start, the nodes, projected end.
    public var coordinates: [GeoPoint]
    /// Metres from the start (end) place to where the walk joins (leaves) the footpaths.
    public var startOffsetMeters: Double = 0
    public var endOffsetMeters: Double = 0
}

/// Point-to-point routing on the footpath graph with bounds and coordinate checks.
public struct Router: Sendable {
    public let graph: FootpathGraph
    public let bounds: MapBounds?
    /// Walking pace in metres per second.
    public let walkingSpeed: Double
    /// How far outside `bounds` a point may lie, in metres.
    public let boundsMarginMeters: Double

    public init(graph: FootpathGraph, bounds: MapBounds?, walkingSpeed: Double = 1.2, boundsMarginMeters: Double = 100)
    {
        self.graph = graph
        self.bounds = bounds
        self.walkingSpeed = walkingSpeed
        self.boundsMarginMeters = boundsMarginMeters
    }

    /// Checks that `point` is a coordinate inside the map and projects it onto the nearest footpath.
    public func snap(_ point: GeoPoint) throws(ZooError) -> Snap {
        guard Geo.isValid(point) else { throw .malformedCoordinate(lat: point.lat, lon: point.lon) }
        if let bounds, !bounds.contains(point, marginMeters: boundsMarginMeters) { throw .outOfRange(point) }
        guard let snap = graph.snap(point) else {
            throw .noPath("from \(Geo.describe(point)): the map has no footpaths")
        }
        return snap
    }

    /// `snap`, onto the nearest footpath from which one of `targets` can be walked to: the footpath graph is in
    /// pieces (61 in the real data), and the nearest footpath of all may lead nowhere near the other end.
    public func snap(_ point: GeoPoint, reaching targets: [Snap]) throws(ZooError) -> Snap {
        try snap(point, within: Set(targets.map(graph.component(of:))))
    }

    /// `snap`, onto the nearest footpath of one of the graph's connected `pieces`.
    public func snap(_ point: GeoPoint, within pieces: Set<Int32>) throws(ZooError) -> Snap {
        let nearest = try snap(point)
        if pieces.contains(graph.component(of: nearest)) { return nearest }
        guard let snap = graph.snap(point, within: pieces) else {
            throw .noPath("from \(Geo.describe(point)): no footpath from there leads to the destination")
        }
        return snap
    }

    /// The two points snapped onto footpaths joined by a walk: each onto its nearest one when they are joined,
    /// else whichever of the two moved to the other's piece moves it less.
    public func snapPair(_ start: GeoPoint, _ end: GeoPoint) throws(ZooError) -> (start: Snap, end: Snap) {
        let first = try snap(start), last = try snap(end)
        if graph.component(of: first) == graph.component(of: last) { return (first, last) }
        let movedStart = try snap(start, reaching: [last]), movedEnd = try snap(end, reaching: [first])
        return movedStart.offset + last.offset <= first.offset + movedEnd.offset
            ? (movedStart, last) : (first, movedEnd)
    }

    /// The shortest walk between two points, each projected onto the nearest footpath joined to the other's.
    public func route(from start: GeoPoint, to end: GeoPoint) throws(ZooError) -> Route {
        let (first, last) = try snapPair(start, end)
        return try route(from: first, to: last)
    }

    /// The shortest walk between two snapped points.
    public func route(from start: Snap, to end: Snap) throws(ZooError) -> Route {
        guard let route = shortestRoute(from: [start], to: [end]) else {
            throw .noPath("from \(Geo.describe(start.point)) to \(Geo.describe(end.point)): no footpath joins them")
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
            if let (path, goal) = graph.shortestPath(from: start, toNearestOf: ends),
                path.length < best?.path.length ?? .infinity
            {
                best = (path, start, goal)
            }
        }
        guard let (path, start, end) = best else { return nil }
        let route = Route(
            distanceMeters: path.length, durationSeconds: path.length / walkingSpeed,
            nodeIDs: path.nodes.map { graph.nodeIDs[Int($0)] },
            coordinates: [start.point] + path.nodes.map { graph.positions[Int($0)] } + [ends[end].point],
            startOffsetMeters: start.offset, endOffsetMeters: ends[end].offset)
        return (route, end)
    }
}
