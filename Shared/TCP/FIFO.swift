/// A first-in, first-out queue over an array: O(1) amortized `append` and `popFirst`, and popped
/// slots are released at once.
package struct FIFO<Element> {
    private var elements: [Element?] = []

    package init() {}
    /// Index of the oldest element still queued.
    private var head = 0

    package var isEmpty: Bool { head == elements.count }

    package var count: Int { elements.count - head }

    /// The oldest element, left queued.
    package var first: Element? { head < elements.count ? elements[head] : nil }

    package mutating func append(_ element: Element) { elements.append(element) }

    package mutating func popFirst() -> Element? {
        guard head < elements.count else { return nil }
        let element = elements[head].take()
        head += 1
        if head == elements.count {
            elements.removeAll(keepingCapacity: true)
            head = 0
        } else if head >= 1024, head * 2 >= elements.count {
            elements.removeFirst(head)
            head = 0
        }
        return element
    }
}
