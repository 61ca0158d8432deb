import Base

/// Calls' deadlines, earliest first. Entries of calls that ended stay until they come up, or until
/// they outnumber the live calls, when `isGone` picks them out.
package struct DeadlineQueue<Call> {
    private struct Due: Comparable {
        let deadline: ContinuousClock.Instant
        let call: Call

        static func < (lhs: Due, rhs: Due) -> Bool { lhs.deadline < rhs.deadline }
        static func == (lhs: Due, rhs: Due) -> Bool { lhs.deadline == rhs.deadline }
    }

    private var heap = Heap<Due>()

    package init() {}

    /// The earliest deadline, if any.
    package var earliest: ContinuousClock.Instant? { heap.first?.deadline }

    package mutating func add(
        _ call: Call, at deadline: ContinuousClock.Instant, liveCalls: Int, isGone: (Call) -> Bool
    ) {
        heap.push(Due(deadline: deadline, call: call))
        if heap.count > 2 * liveCalls + 1024 { heap.removeAll { isGone($0.call) } }
    }

    /// Removes and returns the calls whose deadline is `now` or earlier.
    package mutating func popExpired(at now: ContinuousClock.Instant) -> [Call] {
        var expired: [Call] = []
        while let first = heap.first, first.deadline <= now {
            heap.popFirst()
            expired.append(first.call)
        }
        return expired
    }
}
