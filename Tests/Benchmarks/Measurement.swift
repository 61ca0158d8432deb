import Foundation

/// Latency samples and call count of one benchmark run.
struct Measurement {
    var calls = 0
    var elapsed: Duration = .zero
    var latencies: [Duration] = []

    var callsPerSecond: Double {
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        return seconds > 0 ? Double(calls) / seconds : 0
    }

    /// The latency below which `fraction` of calls finished, in milliseconds.
    func percentileMilliseconds(_ fraction: Double) -> Double {
        guard !latencies.isEmpty else { return 0 }
        let sorted = latencies.sorted()
        let index = min(sorted.count - 1, Int((Double(sorted.count) * fraction).rounded(.up)) - 1)
        let value = sorted[max(0, index)]
        return Double(value.components.seconds) * 1000 + Double(value.components.attoseconds) / 1e15
    }

    /// Runs `callers` concurrent loops of `call` for `duration` (after a short warm-up).
    static func run(callers: Int, duration: Duration, _ call: @escaping @Sendable () async throws -> Void) async throws -> Measurement {
        let warmUpEnd = ContinuousClock.now + .milliseconds(300)
        let end = warmUpEnd + duration
        let perCaller = try await withThrowingTaskGroup(of: [Duration].self) { group in
            for _ in 0..<callers {
                group.addTask {
                    var samples: [Duration] = []
                    samples.reserveCapacity(100_000)
                    while true {
                        let started = ContinuousClock.now
                        if started >= end { break }
                        try await call()
                        if started >= warmUpEnd { samples.append(.now - started) }
                    }
                    return samples
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        let latencies = perCaller.flatMap { $0 }
        return Measurement(calls: latencies.count, elapsed: duration, latencies: latencies)
    }
}

/// Formats a table with right-aligned columns.
func printTable(_ header: [String], _ rows: [[String]]) {
    let widths = header.indices.map { column in ([header] + rows).map { $0[column].count }.max() ?? 0 }
    for row in [header] + rows {
        print(row.enumerated().map { String(repeating: " ", count: widths[$0] - $1.count) + $1 }.joined(separator: "  "))
    }
}
