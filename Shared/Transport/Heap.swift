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
