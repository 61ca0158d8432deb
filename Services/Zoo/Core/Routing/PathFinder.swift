/// A binary min-heap of (priority, node) pairs; stale entries are skipped by the caller (lazy deletion).
struct MinHeap {
    private var items: [(priority: Double, node: Int32)] = []

    init(capacity: Int) { items.reserveCapacity(capacity) }

    var isEmpty: Bool { items.isEmpty }

    mutating func push(_ priority: Double, _ node: Int32) {
        items.append((priority, node))
        var child = items.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard items[child].priority < items[parent].priority else { break }
            items.swapAt(child, parent)
            child = parent
        }
    }

    mutating func pop() -> (priority: Double, node: Int32)? {
        guard let top = items.first else { return nil }
        let last = items.removeLast()
        if !items.isEmpty {
            items[0] = last
            var parent = 0
            while true {
                let left = 2 * parent + 1, right = left + 1
                var smallest = parent
                if left < items.count && items[left].priority < items[smallest].priority { smallest = left }
                if right < items.count && items[right].priority < items[smallest].priority { smallest = right }
                if smallest == parent { break }
                items.swapAt(parent, smallest)
                parent = smallest
            }
        }
        return top
    }
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
        func heuristic(_ node: Int32) -> Double {
            var nearest = Double.infinity
            for vector in goalVectors { nearest = min(nearest, Geo.lowerBoundDistance(unitVectors[Int(node)], vector)) }
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
        var heap = MinHeap(capacity: 64)
        let startSegment = segments[start.segment]
        for (node, initial) in [(startSegment.from, start.alongFromStart), (startSegment.to, start.alongToEnd)]
        where initial < cost[Int(node)] {
            cost[Int(node)] = initial
            heap.push(initial + heuristic(node), node)
        }
        while let (estimate, node) = heap.pop() {
            if estimate >= best { break }
            let reached = cost[Int(node)]
            if estimate > reached + heuristic(node) + 1e-9 { continue }
            for exit in exits where exit.node == node && reached + exit.remaining < best {
                best = reached + exit.remaining
                bestGoal = exit.goal
                bestLast = node
            }
            for edge in Int(edgeStart[Int(node)])..<Int(edgeStart[Int(node) + 1]) {
                let next = edgeTargets[edge]
                let candidate = reached + edgeLengths[edge]
                if candidate < cost[Int(next)] {
                    cost[Int(next)] = candidate
                    parent[Int(next)] = node
                    heap.push(candidate + heuristic(next), next)
                }
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
        var heap = MinHeap(capacity: 64)
        let segment = segments[start.segment]
        for (node, initial) in [(segment.from, start.alongFromStart), (segment.to, start.alongToEnd)]
        where initial < cost[Int(node)] && initial <= limit {
            cost[Int(node)] = initial
            heap.push(initial, node)
        }
        while let (reached, node) = heap.pop() {
            if reached > cost[Int(node)] { continue }
            for edge in Int(edgeStart[Int(node)])..<Int(edgeStart[Int(node) + 1]) {
                let next = edgeTargets[edge]
                let candidate = reached + edgeLengths[edge]
                if candidate < cost[Int(next)] && candidate <= limit {
                    cost[Int(next)] = candidate
                    heap.push(candidate, next)
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
