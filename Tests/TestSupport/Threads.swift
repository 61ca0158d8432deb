import Foundation
import Synchronization

/// A door threads wait at until it is opened: tests hold lane, storage or pool threads on it to fill
/// them, then let them go.
public final class Gate: Sendable {
    private let semaphore = DispatchSemaphore(value: 0)
    private let isOpen = Atomic<Bool>(false)

    public init() {}

    public func open() {
        if !isOpen.exchange(true, ordering: .sequentiallyConsistent) { semaphore.signal() }
    }

    /// Blocks the calling thread: for lane, storage and pool threads only.
    public func wait() {
        semaphore.wait()
        semaphore.signal()
    }

    /// Suspends until the gate is open, without blocking a thread of the cooperative pool (which has only a
    /// couple of threads, shared by the tests running in parallel).
    public func opened() async {
        while !isOpen.load(ordering: .sequentiallyConsistent) { try? await Task.sleep(for: .milliseconds(1)) }
    }
}

/// A value shared between threads.
public final class Box<Value: Sendable>: Sendable {
    private let mutex: Mutex<Value>
    public init(_ value: Value) { mutex = Mutex(value) }
    public var value: Value { mutex.withLock { $0 } }
    public func set(_ value: Value) { mutex.withLock { $0 = value } }
    @discardableResult
    public func update<T: Sendable>(_ body: (inout Value) -> T) -> T { mutex.withLock { body(&$0) } }
}
