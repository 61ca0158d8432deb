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
}
