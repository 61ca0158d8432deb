import Synchronization

/// The bytes a process holds for its clients that they control — large frames still arriving and
/// answers not yet taken (the transport's), uploads being joined, batches waiting for their job,
/// models being loaded (the services') — under one limit (`--memory-budget`). Thread-safe: the
/// loop draws from it, and so do handlers and jobs on their own threads.
///
/// A frame of `largeFrame` bytes or more is admitted only when its whole length fits in what is
/// left of the budget (the buffer for it is made when its header arrives); otherwise it is refused
/// with RESOURCE_EXHAUSTED, as is an upload chunk that does not fit. Answers are not refused (a call
/// that ran has to be answered), but once they take the budget past its limit the connections
/// holding the most are closed.
public final class MemoryBudget: Sendable {
    /// Frames at least this large count against the budget; smaller ones are bounded by the
    /// connection limit (64 KiB × 1,024 connections = 64 MiB).
    public static let largeFrame = 64 << 10
    public let limit: Int
    private let taken = Atomic<Int>(0)
    private let refusals = Atomic<Int>(0)

    public init(limit: Int) { self.limit = limit }

    /// Bytes held now.
    public var used: Int { taken.load(ordering: .relaxed) }
    /// Reservations refused so far.
    public var refused: Int { refusals.load(ordering: .relaxed) }

    /// Takes `bytes` when they fit.
    public func reserve(_ bytes: Int) -> Bool {
        if take(bytes) { return true }
        refusals.add(1, ordering: .relaxed)
        return false
    }

    /// How long a holder that can wait (an upload's next chunk, a large answer) waits for room before it is
    /// refused: long enough for other clients' uploads and slow readers to finish, short enough that a client
    /// is told rather than left hanging.
    public static let patience: Duration = .seconds(10)

    /// Takes `bytes` once they fit, waiting up to `patience` for other holders to give theirs back —
    /// backpressure before refusal: the caller consumes nothing of its client's stream meanwhile, so flow
    /// control stops the client within one window. False when they still do not fit, or at once when
    /// `gaveUp` says the caller is gone (checked between tries; a cancelled task gives up too).
    public func reserve(_ bytes: Int, waitingUpTo patience: Duration, unless gaveUp: @Sendable () -> Bool = { false })
        async -> Bool
    {
        let started = ContinuousClock.now
        var pause = Duration.milliseconds(5)
        while !take(bytes) {
            guard !gaveUp(), ContinuousClock.now - started < patience, (try? await Task.sleep(for: pause)) != nil else {
                refusals.add(1, ordering: .relaxed)
                return false
            }
            pause = min(pause * 2, .milliseconds(100))
        }
        return true
    }

    private func take(_ bytes: Int) -> Bool {
        var current = taken.load(ordering: .relaxed)
        while true {
            guard current + bytes <= limit else { return false }
            let (exchanged, original) = taken.compareExchange(
                expected: current, desired: current + bytes, ordering: .relaxed)
            if exchanged { return true }
            current = original
        }
    }

    /// Takes `bytes` whether or not they fit; true when the budget is now exceeded.
    public func charge(_ bytes: Int) -> Bool {
        taken.add(bytes, ordering: .relaxed).newValue > limit
    }

    public func release(_ bytes: Int) { taken.subtract(bytes, ordering: .relaxed) }

    // MARK: The process's

    private static let installed = Mutex<MemoryBudget?>(nil)

    /// The budget of this process: the server's, once a service runner installed it; until then (a
    /// library used on its own, a test) an unlimited one that still counts.
    public static var process: MemoryBudget {
        installed.withLock { current in
            if let current { return current }
            let made = MemoryBudget(limit: Int.max / 2)
            current = made
            return made
        }
    }

    /// Makes `budget` the process's (the service runner does, with its server's).
    public static func install(_ budget: MemoryBudget) {
        installed.withLock { $0 = budget }
    }
}

/// Bytes held of a budget by one holder (an upload, a queued batch): grown as data arrives, given
/// back in full when the holder is done or dropped, so a client that goes away returns its share.
public final class MemoryReservation: Sendable {
    public let budget: MemoryBudget
    private let held = Atomic<Int>(0)

    public init(_ budget: MemoryBudget = .process) { self.budget = budget }

    public var bytes: Int { held.load(ordering: .relaxed) }

    /// Takes `bytes` more, or false (nothing taken) when the budget cannot hold them.
    public func grow(by bytes: Int) -> Bool {
        guard bytes > 0 else { return true }
        guard budget.reserve(bytes) else { return false }
        held.add(bytes, ordering: .relaxed)
        return true
    }

    /// Takes `bytes` more once the budget has room, waiting up to `patience` (see `MemoryBudget.reserve(_:waitingUpTo:unless:)`);
    /// false, nothing taken, when it still has none.
    public func grow(by bytes: Int, waitingUpTo patience: Duration) async -> Bool {
        guard bytes > 0 else { return true }
        guard await budget.reserve(bytes, waitingUpTo: patience) else { return false }
        held.add(bytes, ordering: .relaxed)
        return true
    }

    /// Gives back everything held.
    public func releaseAll() {
        let bytes = held.exchange(0, ordering: .relaxed)
        if bytes > 0 { budget.release(bytes) }
    }

    deinit { releaseAll() }
}
