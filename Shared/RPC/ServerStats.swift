import Base
import Foundation
import Synchronization

/// Per-method call counts, error counts and latency percentiles, plus connection counters.
public final class ServerStats: Sendable {
    /// A snapshot of one method's figures.
    public struct MethodFigures: Sendable, Hashable {
        public var path: String
        public var calls: UInt64
        public var errors: UInt64
        public var p50Milliseconds: Double
        public var p99Milliseconds: Double
        /// Calls answered with each status code (index: the code), OK included.
        public var byStatus: [UInt64]
        /// Of `calls`, those answered from the answer cache (`AnswerCachePolicy`) without their handler.
        public var kept: UInt64 = 0
    }

    /// Where calls to methods this server does not offer are counted: one entry, so that clients
    /// cannot grow the table with made-up names.
    public static let unknownMethod = "(unknown method)"

    private let methods = Mutex<[String: MethodStats]>([:])
    private let connections = Mutex(ConnectionCounters())
    private let loop = Mutex<(@Sendable () -> LoopFigures)?>(nil)

    public init() {}

    /// The counters of `method`, created on first use; a server keeps them per route, so recording
    /// a call costs no lookup.
    public func counters(for method: String) -> MethodStats {
        methods.withLock { table in
            if let counters = table[method] { return counters }
            let counters = MethodStats()
            table[method] = counters
            return counters
        }
    }

    /// Records one finished call.
    public func record(method: String, duration: Duration, failed: Bool) {
        counters(for: method).record(duration: duration, failed: failed)
    }

    /// Records a call the transport answered with `code` without serving it (too many calls, a
    /// NUL in its method, shutting down, unknown method): under its method when this server
    /// offers it, else under `unknownMethod`.
    public func recordRefused(_ method: String, code: StatusCode) {
        let counters = methods.withLock { table -> MethodStats in
            if let counters = table[method] { return counters }
            if let counters = table[Self.unknownMethod] { return counters }
            let counters = MethodStats()
            table[Self.unknownMethod] = counters
            return counters
        }
        counters.record(duration: .zero, code: code)
    }

    public func connectionOpened() {
        connections.withLock {
            $0.open += 1
            $0.total += 1
        }
    }
    public func connectionClosed() { connections.withLock { $0.open -= 1 } }
    public func connectionRejected() { connections.withLock { $0.rejected += 1 } }

    /// Where `loopFigures` come from: the transport's event loop.
    public func reportLoop(_ figures: @escaping @Sendable () -> LoopFigures) { loop.withLock { $0 = figures } }

    /// How long the event loop's turns kept it busy; nil without one (the in-process transport).
    public var loopFigures: LoopFigures? { loop.withLock { $0 }?() }

    /// Open, total accepted and rejected connections.
    public var connectionFigures: (open: UInt64, total: UInt64, rejected: UInt64) {
        connections.withLock { ($0.open, $0.total, $0.rejected) }
    }

    /// Every method that was called at least once, sorted by path.
    public func snapshot() -> [MethodFigures] {
        methods.withLock { $0 }.compactMap { path, stats in
            let counters = stats.counters
            guard counters.calls > 0 else { return nil }
            return MethodFigures(
                path: path, calls: counters.calls, errors: counters.errors,
                p50Milliseconds: counters.latency.percentile(0.50) / 1000,
                p99Milliseconds: counters.latency.percentile(0.99) / 1000,
                byStatus: counters.byStatus, kept: counters.kept)
        }.sorted { $0.path < $1.path }
    }
}

/// Call count, error count and latency histogram of one method.
public final class MethodStats: Sendable {
    private let state = Mutex(MethodCounters())

    /// Records one finished call.
    public func record(duration: Duration, failed: Bool) {
        record(duration: duration, code: failed ? .unknown : .ok)
    }

    /// Records one answered call and the status it was answered with.
    public func record(duration: Duration, code: StatusCode) {
        let micros = Int64(clamping: duration.wholeMicroseconds)
        state.withLock { $0.record(micros: micros, code: code) }
    }

    /// Records one call answered OK from the answer cache: a call as any other, and one `kept`.
    public func recordKept(duration: Duration) {
        let micros = Int64(clamping: duration.wholeMicroseconds)
        state.withLock { counters in
            counters.record(micros: micros, code: .ok)
            counters.kept += 1
        }
    }

    /// Counts as kept a call whose answer came from the answer cache and that is recorded as a call where it ends.
    public func countKept() { state.withLock { $0.kept += 1 } }

    fileprivate var counters: MethodCounters { state.withLock { $0 } }
}

private struct ConnectionCounters {
    var open: UInt64 = 0
    var total: UInt64 = 0
    var rejected: UInt64 = 0
}

private struct MethodCounters {
    var calls: UInt64 = 0
    var errors: UInt64 = 0
    /// By status code 0-16; codes outside gRPC's range count as UNKNOWN (2).
    var byStatus = [UInt64](repeating: 0, count: 17)
    var kept: UInt64 = 0
    var latency = LatencyHistogram()

    mutating func record(micros: Int64, code: StatusCode) {
        calls += 1
        if code != .ok { errors += 1 }
        let index = Int(code.rawValue)
        byStatus[index < byStatus.count ? index : 2] += 1
        latency.add(micros: micros)
    }
}

/// Log-scale histogram of latencies in microseconds (buckets 5% apart), constant memory.
struct LatencyHistogram: Sendable {
    private static let growth = 1.05
    private static let bucketCount = 400  // 1 µs … well past an hour
    private var buckets = [UInt64](repeating: 0, count: bucketCount)
    private var count: UInt64 = 0

    mutating func add(micros: Int64) {
        let index = micros <= 1 ? 0 : Int(log(Double(micros)) / log(Self.growth)) + 1
        buckets[min(index, Self.bucketCount - 1)] += 1
        count += 1
    }

    /// The value in microseconds below which `fraction` of the samples fall (bucket upper bound).
    func percentile(_ fraction: Double) -> Double {
        guard count > 0 else { return 0 }
        let rank = UInt64((Double(count) * fraction).rounded(.up))
        var seen: UInt64 = 0
        for (index, samples) in buckets.enumerated() {
            seen += samples
            if seen >= max(rank, 1) { return index == 0 ? 1 : pow(Self.growth, Double(index)) }
        }
        return pow(Self.growth, Double(Self.bucketCount))
    }
}

/// How long an event loop's turns kept it busy (the loop's lag): every connection's reads and writes
/// wait while a turn runs.
public struct LoopFigures: Sendable, Equatable {
    /// Turns counted in `turnsOver`: longer than 1, 10 and 100 ms.
    public static let thresholdsMilliseconds: [Double] = [1, 10, 100]
    public var turns: UInt64 = 0
    public var busySeconds: Double = 0
    public var longestMilliseconds: Double = 0
    /// Turns longer than each of `thresholdsMilliseconds`.
    public var turnsOver: [UInt64] = thresholdsMilliseconds.map { _ in 0 }

    public init() {}
}
