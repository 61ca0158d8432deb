import Base
import Synchronization

/// Slows down token guessing and keeps it out of the log, as fail2ban or nginx's `limit_req` would: failed
/// authentications are counted per key (a client address, its network, and a user when the token named one); after
/// `freeFailures` each further failure doubles a back-off (from `initialBackoff`, at most `maxBackoff`) during
/// which that key's failing calls are refused RESOURCE_EXHAUSTED (a valid token is never refused by it: see
/// `IdentityGuard`). A key's record is forgotten after
/// `forgetAfter` without failures, or when its user authenticates. Each key logs one line per `logWindow`:
/// its first failure, then, when a later window opens, how many failures the previous one had.
public final class FailedAuthThrottle: Sendable {
    public struct Policy: Sendable {
        public var freeFailures = 5
        public var initialBackoff: Duration = .seconds(1)
        public var maxBackoff: Duration = .seconds(300)
        public var forgetAfter: Duration = .seconds(900)
        public var logWindow: Duration = .seconds(60)
        /// Keys remembered at once; past it, records of keys no longer backing off are dropped.
        public var maxKeys = 10_000
        public init() {}
    }

    private struct Record {
        var failures = 0
        var blockedUntil: ContinuousClock.Instant?
        var lastFailure: ContinuousClock.Instant
        var windowStart: ContinuousClock.Instant
        var windowCount = 0
    }

    public let policy: Policy
    private let records = Mutex<[String: Record]>([:])
    private let logger: Logger?

    public init(policy: Policy = Policy(), logger: Logger? = nil) {
        self.policy = policy
        self.logger = logger
    }

    /// How long `key` must still wait; nil when it may try now. A refused try counts in the log window.
    public func backoff(for key: String, now: ContinuousClock.Instant = .now) -> Duration? {
        records.withLock { records in
            guard var record = records[key], let until = record.blockedUntil, until > now else { return nil }
            record.windowCount += 1
            records[key] = record
            return until - now
        }
    }

    /// Counts a failure of `key` (`reason` for the log); returns the back-off it now has, if any. `freeFailures`: how
    /// many it may have before backing off, when not the policy's (a network that many users share has more).
    @discardableResult
    public func recordFailure(
        _ key: String, reason: String, freeFailures: Int? = nil, now: ContinuousClock.Instant = .now
    ) -> Duration? {
        var line: String?
        let wait = records.withLock { records -> Duration? in
            if records.count >= policy.maxKeys, records[key] == nil {
                records = records.filter { ($0.value.blockedUntil ?? now) > now }
            }
            var record = records[key] ?? Record(lastFailure: now, windowStart: now)
            if now - record.lastFailure >= policy.forgetAfter { record = Record(lastFailure: now, windowStart: now) }
            if record.windowCount == 0 {
                line =
                    "failed authentication from \(key): \(reason) (further failures of it are counted for \(policy.logWindow))"
            } else if now - record.windowStart >= policy.logWindow {
                line =
                    "\(record.windowCount) failed authentications from \(key) in the last \(now - record.windowStart); latest: \(reason)"
                record.windowStart = now
                record.windowCount = 0
            }
            record.windowCount += 1
            record.failures += 1
            record.lastFailure = now
            let over = record.failures - (freeFailures ?? policy.freeFailures)
            if over > 0 {
                let wait = min(policy.maxBackoff, policy.initialBackoff * (1 << min(over - 1, 30)))
                record.blockedUntil = now + wait
            }
            records[key] = record
            return over > 0 ? record.blockedUntil.map { $0 - now } : nil
        }
        if let line { logger?.warning(line) }
        return wait
    }

    /// Forgets `key`'s failures (its user authenticated).
    public func recordSuccess(_ key: String) {
        records.withLock { records in
            if records[key] != nil { records[key] = nil }
        }
    }
}
