import Foundation
import Synchronization

/// Wall-clock time and sleeping, injectable so schedules can be tested without waiting.
public protocol WallClock: Sendable {
    var now: Date { get }
    /// Returns once `date` has come (at once when it has passed); throws `CancellationError` when cancelled.
    func sleep(until date: Date) async throws
}

/// The system's clock. Sleeps in steps of at most a minute, so clock changes are noticed.
public struct SystemWallClock: WallClock {
    public init() {}

    public var now: Date { Date() }

    public func sleep(until date: Date) async throws {
        while true {
            let remaining = date.timeIntervalSinceNow
            if remaining <= 0 { return }
            try await Task.sleep(for: .milliseconds(Int64(min(remaining, 60) * 1000) + 1))
        }
    }
}

/// Fires an action at each time a cron schedule names.
public final class RefreshScheduler: Sendable {
    public let schedule: CronSchedule
    public let calendar: Calendar
    private let clock: any WallClock
    private let upcoming = Mutex<Date?>(nil)

    public init(schedule: CronSchedule, calendar: Calendar = .current, clock: any WallClock = SystemWallClock()) {
        self.schedule = schedule
        self.calendar = calendar
        self.clock = clock
    }

    /// When the action runs next (nil before `run` or once no firing remains).
    public var nextRun: Date? {
        upcoming.withLock { $0 } ?? schedule.nextDate(after: clock.now, in: calendar)
    }

    /// Runs `action` at every firing, with the firing's time, until the task is cancelled. A firing missed
    /// while the action ran is skipped, not caught up.
    public func run(_ action: @Sendable (Date) async -> Void) async {
        var previous: Date?
        while !Task.isCancelled {
            let after = max(clock.now, previous ?? .distantPast)
            guard let next = schedule.nextDate(after: after, in: calendar) else { break }
            upcoming.withLock { $0 = next }
            do { try await clock.sleep(until: next) } catch { break }
            await action(next)
            previous = next
        }
        upcoming.withLock { $0 = nil }
    }
}
