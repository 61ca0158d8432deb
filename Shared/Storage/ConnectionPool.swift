import Dispatch
import Synchronization

/// Lends up to `capacity` handles at once, one per caller; further callers wait for one to come back.
/// Handles open lazily and stay open for reuse.
final class ConnectionPool: Sendable {
    private let slots: DispatchSemaphore
    private let idle: Mutex<[any StorageHandle]>
    private let open: @Sendable () throws -> any StorageHandle

    init(capacity: Int, idle: [any StorageHandle] = [], open: @escaping @Sendable () throws -> any StorageHandle) {
        slots = DispatchSemaphore(value: capacity)
        self.idle = Mutex(idle)
        self.open = open
    }

    /// Runs `body` with a handle no other thread is using.
    func withHandle<T>(_ body: (any StorageHandle) throws -> T) throws -> T {
        slots.wait()
        defer { slots.signal() }
        // An idle handle can go bad while it waits (a cluster's session on a leader that stopped answering).
        var reusable: (any StorageHandle)?
        while reusable == nil, let candidate = idle.withLock({ $0.popLast() }) {
            if candidate.isReusable { reusable = candidate }
        }
        let handle = try reusable ?? open()
        defer {
            // A handle stuck in a transaction (its ROLLBACK failed) or cut off from its server is dropped.
            if handle.isReusable { idle.withLock { $0.append(handle) } }
        }
        return try body(handle)
    }
}
