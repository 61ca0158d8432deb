import Foundation

/// Runs blocking work (a socket read, a child process) on a thread of its own and awaits it, so it
/// never holds one of the few cooperative-pool threads that the servers under test need.
public func offPool<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread { continuation.resume(with: Result { try body() }) }.start()
    }
}
