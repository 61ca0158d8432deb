/// A binary min-heap: `first` is the smallest element.
struct Heap<Element: Comparable> {
    private var elements: [Element] = []

    var count: Int { elements.count }
    var first: Element? { elements.first }

    mutating func push(_ element: Element) {
        elements.append(element)
        siftUp(elements.count - 1)
    }

    @discardableResult
    mutating func popFirst() -> Element? {
        guard !elements.isEmpty else { return nil }
        elements.swapAt(0, elements.count - 1)
        let first = elements.removeLast()
        if !elements.isEmpty { siftDown(0) }
        return first
    }

    /// Removes the elements `shouldRemove` picks and restores the heap order (O(n)).
    mutating func removeAll(where shouldRemove: (Element) -> Bool) {
        elements.removeAll(where: shouldRemove)
        for index in stride(from: elements.count / 2 - 1, through: 0, by: -1) { siftDown(index) }
    }

    private mutating func siftUp(_ index: Int) {
        var child = index
        while child > 0 {
            let parent = (child - 1) / 2
            guard elements[child] < elements[parent] else { return }
            elements.swapAt(child, parent)
            child = parent
        }
    }

    private mutating func siftDown(_ index: Int) {
        var parent = index
        while true {
            let left = 2 * parent + 1
            guard left < elements.count else { return }
            let right = left + 1
            let smaller = right < elements.count && elements[right] < elements[left] ? right : left
            guard elements[smaller] < elements[parent] else { return }
            elements.swapAt(smaller, parent)
            parent = smaller
        }
    }
}

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
