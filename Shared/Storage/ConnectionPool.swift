import Dispatch
import Synchronization

/// Lends up to `capacity` handles at once, one per caller; further callers wait for one to come back.
/// Handles open lazily and stay open for reuse.
final class ConnectionPool: Sendable {
    private let slots: DispatchSemaphore
    private let idle: Mutex<[SQLiteHandle]>
    private let open: @Sendable () throws -> SQLiteHandle

    init(capacity: Int, idle: [SQLiteHandle] = [], open: @escaping @Sendable () throws -> SQLiteHandle) {
        slots = DispatchSemaphore(value: capacity)
        self.idle = Mutex(idle)
        self.open = open
    }

    /// Runs `body` with a handle no other thread is using.
    func withHandle<T>(_ body: (SQLiteHandle) throws -> T) throws -> T {
        slots.wait()
        defer { slots.signal() }
        let handle = try idle.withLock { $0.popLast() } ?? open()
        defer {
            // A handle stuck in a transaction (its ROLLBACK failed) is dropped; closing it rolls back.
            if handle.isAutocommit { idle.withLock { $0.append(handle) } }
        }
        return try body(handle)
    }
}
