import Foundation

/// How much slower than an idle machine the tests' timings may run: `MENAGERIE_TEST_TIME_SCALE` (a number, 1 when
/// unset or not one above 0). A test's bounds on how long something may take are `scaled`, so a loaded CI host
/// widens them in one place instead of each test carrying its own slack.
public enum TestTime {
    public static let scale: Double = {
        guard let text = ProcessInfo.processInfo.environment["MENAGERIE_TEST_TIME_SCALE"], let value = Double(text), value > 0 else { return 1 }
        return value
    }()

    /// `duration` times the scale.
    public static func scaled(_ duration: Duration) -> Duration { duration * scale }
}
