import Base

/// A path finder's frontier entry, ordered by `priority` alone; stale entries are skipped by the caller (lazy
/// deletion), recognised by a `cost` above the node's current one.
struct Frontier: Comparable {
    let priority: Double
    let node: Int32
    let cost: Double

    static func < (lhs: Frontier, rhs: Frontier) -> Bool { lhs.priority < rhs.priority }
    static func == (lhs: Frontier, rhs: Frontier) -> Bool { lhs.priority == rhs.priority }
}

/// A shortest walk between two snapped points.
public struct GraphPath: Sendable, Equatable {
    /// Metres along footpaths from the start foot to the end foot.
    public var length: Double
    /// Node indices passed, in order (empty when both feet lie on one segment and the direct walk wins).
    public var nodes: [Int32]
}

extension FootpathGraph {
    /// The shortest walk from `start` to `goal` by A*. If both feet lie on one segment the direct walk along
    /// it is a candidate too. `nil`: not connected.
    public func shortestPath(from start: Snap, to goal: Snap) -> GraphPath? {
        shortestPath(from: start, toNearestOf: [goal])?.path
    }

    /// The shortest walk from `start` to whichever of `goals` is nearest on foot, by one A* search whose
    /// heuristic is the great-circle distance to the nearest goal (from below, see `Geo.lowerBoundDistance`).
    /// Returns the path and the goal's index.
    public func shortestPath(from start: Snap, toNearestOf goals: [Snap]) -> (path: GraphPath, goal: Int)? {
        let goalVectors = goals.map { Geo.unitVector($0.point) }
        @inline(__always) func heuristic(_ node: Int32) -> Double {
            let position = unitVectors[Int(node)]
            var nearest = Double.infinity
            for vector in goalVectors { nearest = min(nearest, Geo.lowerBoundDistance(position, vector)) }
            return nearest
        }
        var best = Double.infinity
        var bestGoal = -1
        var bestLast: Int32 = -1
        var exits: [(node: Int32, remaining: Double, goal: Int)] = []
        for (index, goal) in goals.enumerated() {
            let segment = segments[goal.segment]
            exits += [(segment.from, goal.alongFromStart, index), (segment.to, goal.alongToEnd, index)]
            if goal.segment == start.segment, Geo.haversine(start.point, goal.point) < best {
                best = Geo.haversine(start.point, goal.point)
                bestGoal = index
            }
        }
        var cost = [Double](repeating: .infinity, count: nodeCount)
        var parent = [Int32](repeating: -1, count: nodeCount)
        var heap = Heap<Frontier>(capacity: 256)
        func reach(_ node: Int32, at value: Double, from previous: Int32) {
            cost[Int(node)] = value
            parent[Int(node)] = previous
            heap.push(Frontier(priority: value + heuristic(node), node: node, cost: value))
        }
        let startSegment = segments[start.segment]
        for (node, initial) in [(startSegment.from, start.alongFromStart), (startSegment.to, start.alongToEnd)]
        where initial < cost[Int(node)] {
            reach(node, at: initial, from: -1)
        }
        while let entry = heap.popFirst() {
            let (estimate, node, reached) = (entry.priority, entry.node, entry.cost)
            if estimate >= best { break }
            if reached > cost[Int(node)] { continue }  // a stale entry: the node was reached cheaper since
            for exit in exits where exit.node == node && reached + exit.remaining < best {
                best = reached + exit.remaining
                bestGoal = exit.goal
                bestLast = node
            }
            for edge in Int(edgeStart[Int(node)])..<Int(edgeStart[Int(node) + 1]) {
                let next = edgeTargets[edge]
                let candidate = reached + edgeLengths[edge]
                if candidate < cost[Int(next)] { reach(next, at: candidate, from: node) }
            }
        }
        guard best.isFinite else { return nil }
        var nodes: [Int32] = []
        var cursor = bestLast
        while cursor >= 0 {
            nodes.append(cursor)
            cursor = parent[Int(cursor)]
        }
        return (GraphPath(length: best, nodes: nodes.reversed()), bestGoal)
    }

    /// Plain Dijkstra from a snapped point: metres to every node (`.infinity` when unreachable or
    /// farther than `limit`).
    public func distances(from start: Snap, limit: Double = .infinity) -> [Double] {
        var cost = [Double](repeating: .infinity, count: nodeCount)
        var heap = Heap<Frontier>(capacity: 64)
        let segment = segments[start.segment]
        for (node, initial) in [(segment.from, start.alongFromStart), (segment.to, start.alongToEnd)]
        where initial < cost[Int(node)] && initial <= limit {
            cost[Int(node)] = initial
            heap.push(Frontier(priority: initial, node: node, cost: initial))
        }
        while let entry = heap.popFirst() {
            let (reached, node) = (entry.priority, entry.node)
            if reached > cost[Int(node)] { continue }
            for edge in Int(edgeStart[Int(node)])..<Int(edgeStart[Int(node) + 1]) {
                let next = edgeTargets[edge]
                let candidate = reached + edgeLengths[edge]
                if candidate < cost[Int(next)] && candidate <= limit {
                    cost[Int(next)] = candidate
                    heap.push(Frontier(priority: candidate, node: next, cost: candidate))
                }
            }
        }
        return cost
    }

    /// Walking metres from the point behind `distances` (computed from `start`) to the snapped point `goal`.
    public func distance(using distances: [Double], from start: Snap, to goal: Snap) -> Double {
        let segment = segments[goal.segment]
        var best = min(distances[Int(segment.from)] + goal.alongFromStart, distances[Int(segment.to)] + goal.alongToEnd)
        if start.segment == goal.segment { best = min(best, Geo.haversine(start.point, goal.point)) }
        return best
    }
}
