/// A binary min-heap: `first` is the smallest element. Shared by the transport's deadline queue and the zoo's
/// path finder; inlinable so each specialises it for its element type (the path finder's inner loop runs on it).
public struct Heap<Element: Comparable> {
    @usableFromInline var elements: [Element] = []

    @inlinable public init(capacity: Int = 0) { elements.reserveCapacity(capacity) }

    @inlinable public var count: Int { elements.count }
    @inlinable public var isEmpty: Bool { elements.isEmpty }
    @inlinable public var first: Element? { elements.first }

    @inlinable
    public mutating func push(_ element: Element) {
        elements.append(element)
        elements.withUnsafeMutableBufferPointer { heap in
            // Sift up, moving parents down into the hole rather than swapping.
            var hole = heap.count - 1
            while hole > 0 {
                let parent = (hole - 1) / 2
                guard element < heap[parent] else { break }
                heap[hole] = heap[parent]
                hole = parent
            }
            heap[hole] = element
        }
    }

    @inlinable @discardableResult
    public mutating func popFirst() -> Element? {
        guard let top = elements.first else { return nil }
        let last = elements.removeLast()
        if !elements.isEmpty { siftDown(last, from: 0) }
        return top
    }

    /// Removes the elements `shouldRemove` picks and restores the heap order (O(n)).
    @inlinable
    public mutating func removeAll(where shouldRemove: (Element) throws -> Bool) rethrows {
        try elements.removeAll(where: shouldRemove)
        for index in stride(from: elements.count / 2 - 1, through: 0, by: -1) { siftDown(elements[index], from: index) }
    }

    /// Puts `element` at `start` and sifts it down, moving smaller children up into the hole.
    @inlinable
    mutating func siftDown(_ element: Element, from start: Int) {
        elements.withUnsafeMutableBufferPointer { heap in
            var hole = start
            while true {
                let left = 2 * hole + 1
                guard left < heap.count else { break }
                let right = left + 1
                let child = right < heap.count && heap[right] < heap[left] ? right : left
                guard heap[child] < element else { break }
                heap[hole] = heap[child]
                hole = child
            }
            heap[hole] = element
        }
    }
}
