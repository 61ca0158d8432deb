import Base
import Testing

/// The one place durations become seconds, microseconds and milliseconds.
@Suite struct DurationUnitsTests {
    @Test func reportsRoundDownAndTimersRoundUp() {
        let duration = Duration.milliseconds(1500) + .nanoseconds(1)
        #expect(duration.seconds > 1.5 && duration.seconds < 1.500_001)
        #expect(duration.wholeMicroseconds == 1_500_000)
        #expect(duration.millisecondsRoundedUp == 1501)
        #expect(Duration.milliseconds(2).millisecondsRoundedUp == 2)
        #expect(Duration.zero.millisecondsRoundedUp == 0)
        // A deadline already past: nothing left, not a huge unsigned number.
        #expect(Duration.milliseconds(-3).wholeMicroseconds == 0)
        #expect(Duration.milliseconds(-3).millisecondsRoundedUp == 0)
        #expect(Duration.nanoseconds(-1).wholeMicroseconds == 0)
    }

    /// The worker pool's measure of a job: nanoseconds, clamped where `Int64` ends.
    @Test func wholeNanosecondsRoundTowardZeroAndClamp() {
        #expect((Duration.milliseconds(1500) + .nanoseconds(7)).wholeNanoseconds == 1_500_000_007)
        #expect((Duration.nanoseconds(3) + .seconds(0.5e-9)).wholeNanoseconds == 3)
        #expect(Duration.nanoseconds(-42).wholeNanoseconds == -42)
        #expect(Duration.zero.wholeNanoseconds == 0)
        #expect(Duration.seconds(Int64.max).wholeNanoseconds == .max)
        #expect(Duration.seconds(Int64.min).wholeNanoseconds == .min)
        #expect(Duration.seconds(9_223_372_036).wholeNanoseconds == 9_223_372_036_000_000_000)
    }
}
