#if canImport(Glibc)
    import Glibc
#endif

/// Where the writes queued on this thread wait for the end of a burst before they are flushed: a server's worker
/// pool sets one on its workers (see `WorkerPool`), so the answers of quick calls go out together; on any other
/// thread a connection's write is flushed on its loop's next turn. Lives here, under the pool, so that a connection
/// knows no server: it only asks the thread it is called on.
package final class WriteBurst: Sendable {
    private let deferring: @Sendable (TCPConnection) -> Void

    /// A burst that `deferring` holds the flushes of (it flushes them when the burst ends).
    package init(deferring: @escaping @Sendable (TCPConnection) -> Void) { self.deferring = deferring }

    /// A job on this thread queued bytes on `connection`: its flush waits for the burst's end.
    package func deferFlush(of connection: TCPConnection) { deferring(connection) }

    /// The burst of the job running on this thread, if any.
    package static var current: WriteBurst? {
        pthread_getspecific(key).map { Unmanaged<WriteBurst>.fromOpaque($0).takeUnretainedValue() }
    }

    /// Makes `burst` this thread's (nil: none); its owner keeps it alive meanwhile.
    package static func setCurrent(_ burst: WriteBurst?) {
        pthread_setspecific(key, burst.map { Unmanaged.passUnretained($0).toOpaque() })
    }

    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key, nil)
        return key
    }()
}
