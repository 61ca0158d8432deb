import Base
import TCP

/// Calls' deadlines, earliest first. Entries of calls that ended stay until they come up, or until
/// they outnumber the live calls, when `isGone` picks them out.
struct DeadlineQueue<Call> {
    private struct Due: Comparable {
        let deadline: ContinuousClock.Instant
        let call: Call

        static func < (lhs: Due, rhs: Due) -> Bool { lhs.deadline < rhs.deadline }
        static func == (lhs: Due, rhs: Due) -> Bool { lhs.deadline == rhs.deadline }
    }

    private var heap = Heap<Due>()

    /// The earliest deadline, if any.
    var earliest: ContinuousClock.Instant? { heap.first?.deadline }

    mutating func add(_ call: Call, at deadline: ContinuousClock.Instant, liveCalls: Int, isGone: (Call) -> Bool) {
        heap.push(Due(deadline: deadline, call: call))
        if heap.count > 2 * liveCalls + 1024 { heap.removeAll { isGone($0.call) } }
    }

    /// Removes and returns the calls whose deadline is `now` or earlier.
    mutating func popExpired(at now: ContinuousClock.Instant) -> [Call] {
        var expired: [Call] = []
        while let first = heap.first, first.deadline <= now {
            heap.popFirst()
            expired.append(first.call)
        }
        return expired
    }
}
