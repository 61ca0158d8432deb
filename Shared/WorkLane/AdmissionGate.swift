import Synchronization

/// Lets at most `limit` holders in at once; the rest wait, suspended and in arrival order, until one leaves.
///
/// A waiting task costs no thread and no queue slot, which is the point: work that a client paces (the pages of
/// a server stream, built one at a time as the client reads) waits here instead of in a thread pool's bounded
/// queue, where a few hundred such streams would leave no slot for a quick call. A waiter whose task is
/// cancelled (its client went away) leaves the line at once with `CancellationError`.
public final class AdmissionGate: Sendable {
    private struct Waiter {
        let id: UInt64
        let continuation: CheckedContinuation<Void, any Error>
    }

    private struct State {
        var inside = 0
        var waiters: [Waiter] = []
        var nextID: UInt64 = 0
    }

    /// Holders at most.
    public let limit: Int
    private let state = Mutex(State())

    public init(limit: Int) { self.limit = max(1, limit) }

    /// Holders inside now, and tasks waiting to enter.
    public var counts: (inside: Int, waiting: Int) { state.withLock { ($0.inside, $0.waiters.count) } }

    /// Runs `body` once let in, and lets the next waiter in when it ends (thrown or returned).
    public func withAdmission<T>(_ body: () async throws -> T) async throws -> T {
        try await enter()
        defer { leave() }
        return try await body()
    }

    /// Waits for a place (throws `CancellationError`, holding none, when the task is cancelled meanwhile).
    public func enter() async throws {
        let id = state.withLock { state -> UInt64 in
            state.nextID += 1
            return state.nextID
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                enum Outcome { case admitted, cancelled, waiting }
                let outcome = state.withLock { state -> Outcome in
                    // Cancelled before the handler could find this waiter in the line: never enqueue it.
                    if Task.isCancelled { return .cancelled }
                    if state.inside < limit {
                        state.inside += 1
                        return .admitted
                    }
                    state.waiters.append(Waiter(id: id, continuation: continuation))
                    return .waiting
                }
                switch outcome {
                case .admitted: continuation.resume()
                case .cancelled: continuation.resume(throwing: CancellationError())
                case .waiting: break
                }
            }
        } onCancel: {
            let waiter = state.withLock { state -> Waiter? in
                guard let index = state.waiters.firstIndex(where: { $0.id == id }) else { return nil }
                return state.waiters.remove(at: index)
            }
            waiter?.continuation.resume(throwing: CancellationError())
        }
    }

    /// Gives a place back: to the first waiter when there is one (its place passes on), else to the gate.
    public func leave() {
        let next = state.withLock { state -> Waiter? in
            guard !state.waiters.isEmpty else {
                state.inside -= 1
                return nil
            }
            return state.waiters.removeFirst()
        }
        next?.continuation.resume()
    }
}
