import Foundation

/// How long a test may wait for something that takes time (a process to start, another connection to notice a
/// change, a stalled peer to be cut off), as a multiple of what it takes on an idle machine. A test's waits and
/// deadlines go through `scaled`, never fixed short seconds, so the suite passes on a busy machine (CI beside other
/// jobs, two `yes` hogs) and still fails when the thing never happens.
///
/// The factor is `MENAGERIE_TEST_TIME_SCALE` when set (at least 1), else the machine's load per core when the
/// process starts, between 1 and 10.
public enum TestTime {
    public static let scale: Double = {
        if let text = ProcessInfo.processInfo.environment["MENAGERIE_TEST_TIME_SCALE"], let value = Double(text),
            value.isFinite
        {
            return max(1, value)
        }
        return min(10, max(1, loadPerCore()))
    }()

    /// `duration` stretched by the scale factor.
    public static func scaled(_ duration: Duration) -> Duration { duration * scale }

    /// The one-minute load average over the cores (0 where /proc/loadavg cannot be read).
    static func loadPerCore() -> Double {
        guard let text = try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8),
            let first = text.split(separator: " ").first, let load = Double(first)
        else { return 0 }
        return load / Double(max(1, ProcessInfo.processInfo.activeProcessorCount))
    }
}
