import Foundation
import Testing

@testable import ZooCore

@Suite struct CronScheduleTests {
    static let calendar: Calendar = {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        return calendar
    }()

    /// `2026-11-20 10:00` in UTC.
    static func date(_ text: String) -> Date {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyy-MM-dd HH:mm"
        return formatter.date(from: text)!
    }

    static func next(_ expression: String, after text: String) throws -> Date? {
        try CronSchedule(expression).nextDate(after: date(text), in: calendar)
    }

    @Test func weeklyOnSaturdayAtTwo() throws {
        #expect(try Self.next("0 2 * * 6", after: "2026-11-20 10:00") == Self.date("2026-11-21 02:00"))
        // Strictly after: at the firing itself, the next one is a week later.
        #expect(try Self.next("0 2 * * 6", after: "2026-11-21 02:00") == Self.date("2026-11-28 02:00"))
        #expect(try Self.next("0 2 * * SAT", after: "2026-11-21 01:59") == Self.date("2026-11-21 02:00"))
        #expect(try Self.next("@weekly", after: "2026-11-20 10:00") == Self.date("2026-11-22 00:00"))
    }

    @Test func stepsRangesListsAndNames() throws {
        #expect(try Self.next("*/15 * * * *", after: "2026-11-20 10:07") == Self.date("2026-11-20 10:15"))
        #expect(try Self.next("5-10/5 * * * *", after: "2026-11-20 10:07") == Self.date("2026-11-20 10:10"))
        #expect(try Self.next("0 9,17 * * MON-FRI", after: "2026-11-20 17:30") == Self.date("2026-11-23 09:00"))
        #expect(try Self.next("30 12 1 jan,jul *", after: "2026-11-20 10:00") == Self.date("2027-01-01 12:30"))
        #expect(try Self.next("0 0 * * 7", after: "2026-11-20 10:00") == Self.date("2026-11-22 00:00"))  // 7 is Sunday
        #expect(try Self.next("@hourly", after: "2026-11-20 10:00") == Self.date("2026-11-20 11:00"))
    }

    @Test func bothDayFieldsRestrictedMeansEither() throws {
        // The 13th or any Friday, whichever comes first.
        #expect(try Self.next("0 0 13 * 5", after: "2026-11-20 10:00") == Self.date("2026-11-27 00:00"))
        #expect(try Self.next("0 0 13 * 5", after: "2027-02-06 00:00") == Self.date("2027-02-12 00:00"))
        #expect(try Self.next("0 0 13 * *", after: "2027-02-06 00:00") == Self.date("2027-02-13 00:00"))
    }

    @Test func leapDaysAndMonthEnds() throws {
        #expect(try Self.next("0 0 29 2 *", after: "2026-11-20 10:00") == Self.date("2028-02-29 00:00"))
        #expect(try Self.next("0 0 31 * *", after: "2026-11-20 10:00") == Self.date("2026-12-31 00:00"))
    }

    @Test func malformedExpressionsAreRefused() {
        for bad in [
            "", "* * * *", "* * * * * *", "60 * * * *", "* 24 * * *", "* * 0 * *", "* * * 13 *", "* * * * 8",
            "*/0 * * * *", "5-1 * * * *", "a b c d e", "1,,2 * * * *", "0 0 31 2 *", "0 0 30 feb *", "@sometimes",
        ] {
            #expect(throws: CronSchedule.ParseError.self, "\(bad)") { try CronSchedule(bad) }
        }
    }
}
