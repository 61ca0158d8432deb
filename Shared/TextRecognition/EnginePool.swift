import Foundation
import Synchronization
import WorkLane

/// Initialised engines kept for reuse, per `EngineConfiguration`, so no request pays Tesseract's start-up
/// (~0.3 s for `ces+eng`, longer than recognising a small photo).
///
/// Bounded twice: at most `maxEnginesPerConfiguration` engines of one configuration exist at once (lent or
/// idle; a caller beyond that waits, without blocking a thread, until one is returned), and at most
/// `maxIdleEngines` idle engines are kept over all configurations (the least recently used goes first), so
/// requests with ever new custom word lists cannot fill memory with engines (~40 MB each).
///
/// The pool only lends: recognition runs synchronously on whatever thread the borrower uses (the service's lane for
/// heavy work), one engine per thread.
public final class EnginePool: Sendable {
    public typealias Factory = @Sendable (EngineConfiguration) throws -> TesseractEngine

    public let maxEnginesPerConfiguration: Int
    public let maxIdleEngines: Int
    private let factory: Factory
    private let state = Mutex(State())

    private struct Slot {
        var idle: [TesseractEngine] = []
        /// Engines lent out or being created.
        var lent = 0
        var waiters: [(id: UInt64, continuation: CheckedContinuation<TesseractEngine?, Error>)] = []
    }

    private struct State {
        var slots: [EngineConfiguration: Slot] = [:]
        /// Idle engines, least recently returned first.
        var idleOrder: [ObjectIdentifier] = []
        var nextWaiter: UInt64 = 0
        var created = 0
    }

    public init(
        maxEnginesPerConfiguration: Int = ProcessInfo.processInfo.activeProcessorCount,
        maxIdleEngines: Int = max(4, 2 * ProcessInfo.processInfo.activeProcessorCount),
        factory: @escaping Factory = { try TesseractEngine(configuration: $0) }
    ) {
        self.maxEnginesPerConfiguration = max(1, maxEnginesPerConfiguration)
        self.maxIdleEngines = max(0, maxIdleEngines)
        self.factory = factory
    }

    /// Engines made so far (for tests and stats: reuse shows as a count that stays put).
    public var enginesCreated: Int { state.withLock { $0.created } }

    /// Idle engines kept right now.
    public var idleCount: Int { state.withLock { $0.idleOrder.count } }

    /// An idle engine of `configuration`, a new one while fewer than `maxEnginesPerConfiguration` exist, or the next
    /// one returned. Throws `CancellationError` when the task is cancelled while waiting, and the factory's error
    /// when a new engine cannot be made. Every engine checked out must be checked in.
    public func checkout(_ configuration: EngineConfiguration) async throws -> TesseractEngine {
        while true {
            try Task.checkCancellation()
            enum Step { case lend(TesseractEngine), create, wait }
            let step: Step = state.withLock { state in
                var slot = state.slots[configuration, default: Slot()]
                defer { state.slots[configuration] = slot }
                if let engine = slot.idle.popLast() {
                    state.idleOrder.removeAll { $0 == ObjectIdentifier(engine) }
                    slot.lent += 1
                    return .lend(engine)
                }
                if slot.lent < maxEnginesPerConfiguration {
                    slot.lent += 1
                    return .create
                }
                return .wait
            }
            switch step {
            case .lend(let engine):
                return engine
            case .create:
                do {
                    let engine = try factory(configuration)
                    state.withLock { $0.created += 1 }
                    return engine
                } catch {
                    releaseReservation(configuration)
                    throw error
                }
            case .wait:
                if let engine = try await waitForEngine(configuration) { return engine }
            }
        }
    }

    /// `checkout` for a thread of its own (the service's lane for heavy work), which may block: checking out where
    /// the engine is used, rather than before queueing for a thread, means no engine sits idle in a queue while a
    /// running thread waits for it. Lend the engine back with `checkin` on any thread.
    public func checkoutBlocking(_ configuration: EngineConfiguration) throws -> TesseractEngine {
        final class Outcome: @unchecked Sendable {
            // Written once before `done` is signalled, read after the wait: the semaphore orders the two.
            var result: Result<TesseractEngine, any Error>?
            let done = DispatchSemaphore(value: 0)
        }
        let outcome = Outcome()
        Task.detached {
            do { outcome.result = .success(try await self.checkout(configuration)) } catch {
                outcome.result = .failure(error)
            }
            outcome.done.signal()
        }
        outcome.done.wait()
        return try outcome.result!.get()
    }

    /// Returns an engine to the pool: to the longest waiter of its configuration, else to the idle engines.
    public func checkin(_ engine: TesseractEngine) {
        let configuration = engine.configuration
        var evicted: [TesseractEngine] = []
        let waiter = state.withLock { state -> CheckedContinuation<TesseractEngine?, Error>? in
            guard var slot = state.slots[configuration] else { return nil }
            defer { state.slots[configuration] = slot }
            if !slot.waiters.isEmpty { return slot.waiters.removeFirst().continuation }
            slot.lent -= 1
            slot.idle.append(engine)
            state.idleOrder.append(ObjectIdentifier(engine))
            state.slots[configuration] = slot
            while state.idleOrder.count > maxIdleEngines {
                let oldest = state.idleOrder.removeFirst()
                for key in state.slots.keys {
                    if let index = state.slots[key]!.idle.firstIndex(where: { ObjectIdentifier($0) == oldest }) {
                        evicted.append(state.slots[key]!.idle.remove(at: index))
                        if key == configuration { slot = state.slots[key]! }
                        break
                    }
                }
            }
            state.slots = state.slots.filter {
                $0.key == configuration || $0.value.lent > 0 || !$0.value.idle.isEmpty || !$0.value.waiters.isEmpty
            }
            return nil
        }
        waiter?.resume(returning: engine)
        evicted.removeAll()  // engines are destroyed outside the lock
    }

    /// Makes engines of `languages` (with their orientation detectors) until `count` exist, each on a thread of
    /// `lane` (in parallel, as requests would), and keeps them idle: run at service start with one per lane thread,
    /// so no request pays Tesseract's start-up (~0.3 s for `ces+eng`) nor the detector's on its first accurate
    /// scan. Requests queued on the lane meanwhile run after it and find the engines ready. Returns the number
    /// made (fewer when engines of `languages` exist already); throws when an engine cannot be made.
    @discardableResult
    public func prewarm(languages: [String] = ["ces", "eng"], count: Int, lane: WorkLane) async throws -> Int {
        let configuration = EngineConfiguration(languages: languages)
        return try await withThrowingTaskGroup(of: Bool.self) { group in
            for _ in 0..<max(0, count) {
                group.addTask { try await lane.run { try self.prewarmOne(configuration, upTo: count) } }
            }
            var made = 0
            for try await madeOne in group where madeOne { made += 1 }
            return made
        }
    }

    /// Makes one engine of `configuration` and its orientation detector on the calling thread and keeps it idle,
    /// unless `count` engines of it (or the per-configuration bound) exist already. Returns whether it made one.
    public func prewarmOne(_ configuration: EngineConfiguration, upTo count: Int) throws -> Bool {
        let reserved = state.withLock { state -> Bool in
            var slot = state.slots[configuration, default: Slot()]
            guard slot.lent + slot.idle.count < min(count, maxEnginesPerConfiguration) else { return false }
            slot.lent += 1
            state.slots[configuration] = slot
            return true
        }
        guard reserved else { return false }
        let engine: TesseractEngine
        do {
            engine = try factory(configuration)
        } catch {
            releaseReservation(configuration)
            throw error
        }
        state.withLock { $0.created += 1 }
        defer { checkin(engine) }
        try engine.prepareOrientationDetector()
        return true
    }

    /// Gives up a place reserved for an engine that could not be made, and lets one waiter try in its turn.
    private func releaseReservation(_ configuration: EngineConfiguration) {
        let waiter = state.withLock { state -> CheckedContinuation<TesseractEngine?, Error>? in
            state.slots[configuration]?.lent -= 1
            guard state.slots[configuration]?.waiters.isEmpty == false else { return nil }
            return state.slots[configuration]?.waiters.removeFirst().continuation
        }
        waiter?.resume(returning: nil)
    }

    /// Waits for an engine handed over by `checkin` (or nil: a slot freed up, try again).
    private func waitForEngine(_ configuration: EngineConfiguration) async throws -> TesseractEngine? {
        let id = state.withLock { state -> UInt64 in
            state.nextWaiter += 1
            return state.nextWaiter
        }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<TesseractEngine?, Error>) in
                let cancelled = state.withLock { state -> Bool in
                    if Task.isCancelled { return true }
                    state.slots[configuration, default: Slot()].waiters.append((id, continuation))
                    return false
                }
                if cancelled { continuation.resume(throwing: CancellationError()) }
            }
        } onCancel: {
            let continuation = state.withLock { state -> CheckedContinuation<TesseractEngine?, Error>? in
                guard let index = state.slots[configuration]?.waiters.firstIndex(where: { $0.id == id }) else {
                    return nil
                }
                return state.slots[configuration]?.waiters.remove(at: index).continuation
            }
            continuation?.resume(throwing: CancellationError())
        }
    }
}
