import Base
import Foundation
import RPC
import Synchronization

/// Latency samples and call count of one benchmark run.
struct Measurement {
    var calls = 0
    var elapsed: Duration = .zero
    var latencies: [Duration] = []
    /// CPU time (user + system, every thread of the process) spent during the measured part of the run.
    var cpuSeconds = 0.0

    /// Process CPU microseconds per call: client and server together, robust against a busy machine.
    var cpuMicrosPerCall: Double { calls > 0 ? cpuSeconds * 1e6 / Double(calls) : 0 }

    /// Several runs of one configuration as one: the median run's throughput and CPU per call, and
    /// every run's latency samples.
    static func combining(_ runs: [Measurement]) -> Measurement {
        guard
            let typical = runs.sorted(by: { $0.callsPerSecond < $1.callsPerSecond }).dropFirst((runs.count - 1) / 2)
                .first
        else {
            return Measurement()
        }
        var combined = typical
        combined.latencies = runs.flatMap(\.latencies)
        combined.cpuSeconds = median(runs.map(\.cpuMicrosPerCall)) * Double(typical.calls) / 1e6
        return combined
    }

    var callsPerSecond: Double {
        let seconds = elapsed.seconds
        return seconds > 0 ? Double(calls) / seconds : 0
    }

    /// The latency below which `fraction` of calls finished, in milliseconds.
    func percentileMilliseconds(_ fraction: Double) -> Double {
        guard !latencies.isEmpty else { return 0 }
        let sorted = latencies.sorted()
        let index = min(sorted.count - 1, Int((Double(sorted.count) * fraction).rounded(.up)) - 1)
        let value = sorted[max(0, index)]
        return value.seconds * 1000
    }

    /// Runs `callers` concurrent loops of `call` for `duration` (after a short warm-up).
    static func run(callers: Int, duration: Duration, _ call: @escaping @Sendable () async throws -> Void) async throws
        -> Measurement
    {
        let warmUpEnd = ContinuousClock.now + .milliseconds(300)
        let end = warmUpEnd + duration
        let cpuAtWarmUpEnd = CPUMark()
        let perCaller = try await withThrowingTaskGroup(of: [Duration].self) { group in
            for _ in 0..<callers {
                group.addTask {
                    var samples: [Duration] = []
                    samples.reserveCapacity(100_000)
                    while true {
                        let started = ContinuousClock.now
                        if started >= end { break }
                        try await call()
                        if started >= warmUpEnd {
                            samples.append(.now - started)
                            if samples.count == 1 { cpuAtWarmUpEnd.setOnce() }
                        }
                    }
                    return samples
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        let cpu = processCPUSeconds() - (cpuAtWarmUpEnd.value ?? processCPUSeconds())
        let latencies = perCaller.flatMap { $0 }
        return Measurement(calls: latencies.count, elapsed: duration, latencies: latencies, cpuSeconds: cpu)
    }
}

/// The middle value (the lower middle one of an even count); 0 when there is none.
func median(_ values: [Double]) -> Double {
    let sorted = values.sorted()
    return sorted.isEmpty ? 0 : sorted[(sorted.count - 1) / 2]
}

/// User plus system CPU seconds this process has used so far.
func processCPUSeconds() -> Double {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    func seconds(_ time: timeval) -> Double { Double(time.tv_sec) + Double(time.tv_usec) / 1e6 }
    return seconds(usage.ru_utime) + seconds(usage.ru_stime)
}

/// Formats a table with right-aligned columns.
func printTable(_ header: [String], _ rows: [[String]]) {
    let widths = header.indices.map { column in ([header] + rows).map { $0[column].count }.max() ?? 0 }
    for row in [header] + rows {
        print(
            row.enumerated().map { String(repeating: " ", count: widths[$0] - $1.count) + $1 }.joined(separator: "  "))
    }
}

/// The process CPU time when the first caller finished warming up.
private final class CPUMark: Sendable {
    private let mark = Mutex<Double?>(nil)

    func setOnce() { mark.withLock { $0 = $0 ?? processCPUSeconds() } }

    var value: Double? { mark.withLock { $0 } }
}

/// The `zoo` executable built beside this benchmark (the abuse and HTTP suites start it), or nil after saying
/// how to build it; `suite` names the caller in that message.
func zooExecutableBesideBenchmark(suite: String) -> URL? {
    let binary = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
        .appendingPathComponent("zoo")
    guard FileManager.default.isExecutableFile(atPath: binary.path) else {
        print(
            "\(suite) benchmark: no zoo executable at \(binary.path); build it first (swift build [-c release] --product zoo)"
        )
        return nil
    }
    return binary
}
