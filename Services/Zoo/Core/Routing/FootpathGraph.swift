/// A point projected onto the footpath graph: the perpendicular foot on the nearest segment.
public struct Snap: Sendable, Equatable {
    /// Index of the segment in `FootpathGraph.segments`.
    public var segment: Int
    /// Position of the foot along the segment, 0 at its first node, 1 at its second.
    public var fraction: Double
    /// The foot.
    public var point: GeoPoint
    /// Distance from the original point to the foot, in metres.
    public var offset: Double
    /// Metres along the segment from its first node to the foot, and from the foot to its second node.
    public var alongFromStart: Double
    public var alongToEnd: Double
}

/// The footpath graph: nodes, undirected edges between consecutive nodes of each road (haversine
/// length), and a spatial grid over the segments for projecting points.
public struct FootpathGraph: Sendable {
    public struct Segment: Sendable, Equatable {
        public var from: Int32
        public var to: Int32
        public var roadID: Int64
        public var length: Double
    }

    /// OpenStreetMap ids by node index.
    public let nodeIDs: [Int64]
    public let positions: [GeoPoint]
    public let segments: [Segment]
    /// Road polylines (node indices) for export.
    public let roads: [(id: Int64, nodes: [Int32])]
    let projection: LocalProjection
    let planar: [SIMD2<Double>]
    /// Earth-centred unit vectors of the nodes, for the A* heuristic.
    let unitVectors: [SIMD3<Double>]
    /// Adjacency in compressed rows: the neighbours of node `n` are `edgeTargets[edgeStart[n]..<edgeStart[n+1]]`.
    let edgeStart: [Int32]
    let edgeTargets: [Int32]
    let edgeLengths: [Double]
    /// The connected piece of the graph each node belongs to (the real graph has 61): a walk joins two points
    /// only within one, so a point is snapped to the nearest footpath of a piece that reaches the other end.
    public let components: [Int32]
    /// The piece with the most footpath: the zoo's network. The others (60 in the real data) are bits of path
    /// inside enclosures and buildings and streets around the zoo.
    public let mainComponent: Int32
    private let grid: SegmentGrid

    /// Builds the graph. Road vertices without a node are skipped, as are repeated vertices.
    public init(network: FootpathNetwork) {
        var indexByID: [Int64: Int32] = [:]
        var ids: [Int64] = []
        var positions: [GeoPoint] = []
        for node in network.nodes where indexByID[node.id] == nil && Geo.isValid(node.position) {
            indexByID[node.id] = Int32(ids.count)
            ids.append(node.id)
            positions.append(node.position)
        }
        var segments: [Segment] = []
        var roads: [(id: Int64, nodes: [Int32])] = []
        for road in network.roads {
            var path: [Int32] = []
            for id in road.nodeIDs {
                guard let index = indexByID[id], index != path.last else { continue }
                if let previous = path.last {
                    segments.append(
                        Segment(
                            from: previous, to: index, roadID: road.id,
                            length: Geo.haversine(positions[Int(previous)], positions[Int(index)])))
                }
                path.append(index)
            }
            if path.count >= 2 { roads.append((road.id, path)) }
        }
        var degree = [Int32](repeating: 0, count: ids.count + 1)
        for segment in segments {
            degree[Int(segment.from)] += 1
            degree[Int(segment.to)] += 1
        }
        var start = [Int32](repeating: 0, count: ids.count + 1)
        for node in 0..<ids.count { start[node + 1] = start[node] + degree[node] }
        var fill = start
        var targets = [Int32](repeating: 0, count: segments.count * 2)
        var lengths = [Double](repeating: 0, count: segments.count * 2)
        for segment in segments {
            for (a, b) in [(segment.from, segment.to), (segment.to, segment.from)] {
                let slot = Int(fill[Int(a)])
                targets[slot] = b
                lengths[slot] = segment.length
                fill[Int(a)] += 1
            }
        }
        let latitudes = positions.map(\.lat), longitudes = positions.map(\.lon)
        let origin = GeoPoint(
            lat: ((latitudes.min() ?? 0) + (latitudes.max() ?? 0)) / 2,
            lon: ((longitudes.min() ?? 0) + (longitudes.max() ?? 0)) / 2)
        let projection = LocalProjection(origin: origin)
        let planar = positions.map(projection.project)
        self.nodeIDs = ids
        self.positions = positions
        self.segments = segments
        self.roads = roads
        self.projection = projection
        self.planar = planar
        self.unitVectors = positions.map(Geo.unitVector)
        self.edgeStart = start
        self.edgeTargets = targets
        self.edgeLengths = lengths
        self.grid = SegmentGrid(segments: segments.map { (planar[Int($0.from)], planar[Int($0.to)]) }, cellSize: 25)
        var components = [Int32](repeating: -1, count: ids.count)
        var next: Int32 = 0
        for root in 0..<ids.count where components[root] < 0 {
            components[root] = next
            var stack = [Int32(root)]
            while let node = stack.popLast() {
                for edge in Int(start[Int(node)])..<Int(start[Int(node) + 1]) where components[Int(targets[edge])] < 0 {
                    components[Int(targets[edge])] = next
                    stack.append(targets[edge])
                }
            }
            next += 1
        }
        self.components = components
        var length = [Double](repeating: 0, count: Int(next))
        for segment in segments { length[Int(components[Int(segment.from)])] += segment.length }
        self.mainComponent = Int32(length.indices.max { length[$0] < length[$1] } ?? 0)
    }

    /// The connected piece the snapped point lies in.
    public func component(of snap: Snap) -> Int32 { components[Int(segments[snap.segment].from)] }

    public var nodeCount: Int { nodeIDs.count }

    /// Projects `point` onto the nearest segment of any road, or of the connected pieces in `components` when
    /// given; `nil` when there is none.
    public func snap(_ point: GeoPoint, within components: Set<Int32>? = nil) -> Snap? {
        let xy = projection.project(point)
        guard
            let (segment, fraction, distance) = grid.nearest(
                to: xy,
                segmentEnds: { index in
                    (planar[Int(segments[index].from)], planar[Int(segments[index].to)])
                }, accept: { index in components?.contains(self.components[Int(segments[index].from)]) ?? true })
        else { return nil }
        let ends = segments[segment]
        let foot = planar[Int(ends.from)] + (planar[Int(ends.to)] - planar[Int(ends.from)]) * fraction
        let footPoint = projection.unproject(foot)
        return Snap(
            segment: segment, fraction: fraction, point: footPoint, offset: distance,
            alongFromStart: Geo.haversine(positions[Int(ends.from)], footPoint),
            alongToEnd: Geo.haversine(footPoint, positions[Int(ends.to)]))
    }
}

/// A uniform grid over segment bounding boxes in planar metres.
struct SegmentGrid: Sendable {
    private let minimum: SIMD2<Double>
    private let cellSize: Double
    private let columns: Int
    private let rows: Int
    private let cellStart: [Int32]
    private let cellItems: [Int32]

    init(segments: [(SIMD2<Double>, SIMD2<Double>)], cellSize: Double) {
        self.cellSize = cellSize
        var low = SIMD2<Double>(repeating: .infinity), high = SIMD2<Double>(repeating: -.infinity)
        for (a, b) in segments {
            low = pointwiseMin(low, pointwiseMin(a, b))
            high = pointwiseMax(high, pointwiseMax(a, b))
        }
        if segments.isEmpty {
            low = .zero
            high = .zero
        }
        minimum = low
        columns = Int((high.x - low.x) / cellSize) + 1
        rows = Int((high.y - low.y) / cellSize) + 1
        var buckets = [[Int32]](repeating: [], count: columns * rows)
        for (index, (a, b)) in segments.enumerated() {
            let lower = pointwiseMin(a, b), upper = pointwiseMax(a, b)
            let (c0, r0) = (Int((lower.x - low.x) / cellSize), Int((lower.y - low.y) / cellSize))
            let (c1, r1) = (Int((upper.x - low.x) / cellSize), Int((upper.y - low.y) / cellSize))
            for row in r0...r1 { for column in c0...c1 { buckets[row * columns + column].append(Int32(index)) } }
        }
        var start: [Int32] = [0]
        var items: [Int32] = []
        for bucket in buckets {
            items += bucket
            start.append(Int32(items.count))
        }
        cellStart = start
        cellItems = items
    }

    /// The nearest segment to `point`: its index, the foot's fraction along it and the distance.
    func nearest(
        to point: SIMD2<Double>, segmentEnds: (Int) -> (SIMD2<Double>, SIMD2<Double>),
        accept: (Int) -> Bool = { _ in true }
    ) -> (Int, Double, Double)? {
        guard cellItems.count > 0 else { return nil }
        let column = Int(((point.x - minimum.x) / cellSize).rounded(.down))
        let row = Int(((point.y - minimum.y) / cellSize).rounded(.down))
        // Cells at ring r are at least (r - 1) * cellSize away, or more when the point lies off the grid.
        let outside = max(0, -column, column - (columns - 1), -row, row - (rows - 1))
        let lastRing = outside + max(columns, rows)
        var best: (Int, Double, Double)?
        var ring = outside
        while ring <= lastRing {
            if let found = best, found.2 <= Double(ring - 1) * cellSize { break }
            for r in (row - ring)...(row + ring) where r >= 0 && r < rows {
                let step = (r == row - ring || r == row + ring) ? 1 : max(1, 2 * ring)
                var c = column - ring
                while c <= column + ring {
                    if c >= 0 && c < columns {
                        let cell = r * columns + c
                        for slot in Int(cellStart[cell])..<Int(cellStart[cell + 1]) {
                            let index = Int(cellItems[slot])
                            guard accept(index) else { continue }
                            let (a, b) = segmentEnds(index)
                            let (fraction, distance) = Self.foot(of: point, on: a, b)
                            if best == nil || distance < best!.2 || (distance == best!.2 && index < best!.0) {
                                best = (index, fraction, distance)
                            }
                        }
                    }
                    c += step
                }
            }
            ring += 1
        }
        return best
    }

    /// The perpendicular foot of `point` on segment a–b, clamped to the segment.
    static func foot(of point: SIMD2<Double>, on a: SIMD2<Double>, _ b: SIMD2<Double>) -> (
        fraction: Double, distance: Double
    ) {
        let direction = b - a
        let lengthSquared = (direction * direction).sum()
        let fraction = lengthSquared == 0 ? 0 : min(1, max(0, ((point - a) * direction).sum() / lengthSquared))
        let offset = a + direction * fraction - point
        return (fraction, (offset * offset).sum().squareRoot())
    }
}
