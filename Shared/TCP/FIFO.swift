/// A first-in, first-out queue over an array: O(1) amortized `append` and `popFirst`, and popped
/// slots are released at once. Public and inlinable, so the modules above specialise it (the worker pool's
/// queues): Swift 6.3 specialises no `package` generic code across modules, `@inlinable` or not.
public struct FIFO<Element> {
    @usableFromInline var elements: [Element?] = []

    @inlinable public init() {}
    /// Index of the oldest element still queued.
    @usableFromInline var head = 0

    @inlinable public var isEmpty: Bool { head == elements.count }

    @inlinable public var count: Int { elements.count - head }

    /// The oldest element, left queued.
    @inlinable public var first: Element? { head < elements.count ? elements[head] : nil }

    @inlinable
    public mutating func append(_ element: Element) { elements.append(element) }

    @inlinable
    public mutating func popFirst() -> Element? {
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
