import Foundation
import Testing

@testable import HealthCore

/// Issue 39: `2026-03-29T02:30` in Prague (skipped) was stored as 03:30 and `2026-10-25T02:30` (twice) as +01:00,
/// without a word. Resolved as java.time's ZonedDateTime.of does, with a note saying how.
@Suite struct LocalTimeTests {
    func wall(_ text: String) -> Int64 { T.ms(text + "Z") }

    @Test func aSkippedTimeMovesLaterByTheGapWithANote() {
        let resolved = LocalTime.resolve(wall: wall("2026-03-29T02:30:00"), in: T.prague)
        #expect(resolved.instant == T.ms("2026-03-29T03:30:00+02:00"))
        #expect(resolved.note?.contains("does not exist in Europe/Prague") == true, "\(resolved.note ?? "")")
        #expect(
            resolved.note?.contains("2026-03-29T03:30:00+02:00") == true
                && resolved.note?.contains("60 minutes") == true)
    }

    @Test func aTimeShownTwiceTakesTheEarlierOffsetWithANote() {
        let resolved = LocalTime.resolve(wall: wall("2026-10-25T02:30:00"), in: T.prague)
        #expect(resolved.instant == T.ms("2026-10-25T02:30:00+02:00"))
        #expect(
            resolved.note?.contains("happens twice") == true
                && resolved.note?.contains("2026-10-25T02:30:00+01:00") == true,
            "\(resolved.note ?? "")")
    }

    @Test func ordinaryTimesHaveNoNote() {
        for (text, instant) in [
            ("2026-03-29T01:59:00", "2026-03-29T01:59:00+01:00"), ("2026-03-29T03:00:00", "2026-03-29T03:00:00+02:00"),
            ("2026-10-25T01:59:00", "2026-10-25T01:59:00+02:00"), ("2026-10-25T03:00:00", "2026-10-25T03:00:00+01:00"),
            ("2026-07-01T12:00:00", "2026-07-01T12:00:00+02:00"),
        ] {
            let resolved = LocalTime.resolve(wall: wall(text), in: T.prague)
            #expect(resolved.instant == T.ms(instant) && resolved.note == nil, "\(text): \(resolved)")
        }
        // Lord Howe's half-hour change and a zone without DST.
        let lordHowe = LocalTime.resolve(
            wall: wall("2026-10-04T02:15:00"), in: TimeZone(identifier: "Australia/Lord_Howe")!)
        #expect(lordHowe.instant == T.ms("2026-10-04T02:45:00+11:00") && lordHowe.note != nil, "\(lordHowe)")
        #expect(LocalTime.resolve(wall: wall("2026-03-29T02:30:00"), in: T.utc).note == nil)
    }
}
