import Foundation

/// A plain (non priority-inheriting) mutex for the transport's short, hot critical sections,
/// where the event loop and the worker threads meet on every call. Under contention it spins
/// briefly before sleeping, which is far cheaper here than a priority-inheriting futex.
public final class Lock<State>: @unchecked Sendable {
    @usableFromInline let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    @usableFromInline var state: State

    public init(_ state: State) {
        self.state = state
        var attributes = pthread_mutexattr_t()
        pthread_mutexattr_init(&attributes)
        pthread_mutexattr_settype(&attributes, Int32(PTHREAD_MUTEX_ADAPTIVE_NP))
        pthread_mutex_init(mutex, &attributes)
        pthread_mutexattr_destroy(&attributes)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    /// Public and inlinable, so the modules above specialise it for their state (it is on every call's path; Swift 6.3
    /// specialises no `package` generic code across modules).
    @inlinable
    public func withLock<T>(_ body: (inout State) throws -> T) rethrows -> T {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&state)
    }
}
