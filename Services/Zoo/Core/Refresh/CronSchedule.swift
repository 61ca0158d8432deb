import Foundation

/// A cron expression (`minute hour day-of-month month day-of-week`, as in crontab(5)), e.g. `0 2 * * 6` for
/// Saturdays at 02:00.
///
/// Fields take `*`, numbers, ranges `a-b`, steps `*/n` and `a-b/n`, lists `a,b`, and names (`JAN`…`DEC`,
/// `SUN`…`SAT`; day of week 0 and 7 are Sunday). `@yearly`, `@monthly`, `@weekly`, `@daily` and `@hourly` are
/// accepted. As in Vixie cron, when both day fields are restricted a day matching either one fires.
public struct CronSchedule: Sendable, Equatable, CustomStringConvertible {
    /// Why an expression was refused.
    public struct ParseError: Error, Equatable, CustomStringConvertible {
        public var description: String
    }

    /// The expression as given.
    public let description: String
    let minutes: Set<Int>
    let hours: Set<Int>
    let daysOfMonth: Set<Int>
    let months: Set<Int>
    /// 0 = Sunday.
    let daysOfWeek: Set<Int>
    let dayOfMonthIsStar: Bool
    let dayOfWeekIsStar: Bool

    private static let macros = [
        "@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *", "@weekly": "0 0 * * 0",
        "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@hourly": "0 * * * *",
    ]
    private static let monthNames = [
        "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC",
    ]
    private static let dayNames = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"]

    public init(_ expression: String) throws(ParseError) {
        let trimmed = expression.trimmingCharacters(in: .whitespaces)
        let expanded = Self.macros[trimmed.lowercased()] ?? trimmed
        let fields = expanded.split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init)
        guard fields.count == 5 else {
            throw ParseError(
                description:
                    "\"\(expression)\" is not a cron expression: it needs 5 fields (minute hour day-of-month month day-of-week), it has \(fields.count)"
            )
        }
        description = trimmed
        minutes = try Self.field(fields[0], name: "minute", range: 0...59, names: [])
        hours = try Self.field(fields[1], name: "hour", range: 0...23, names: [])
        daysOfMonth = try Self.field(fields[2], name: "day of month", range: 1...31, names: [])
        months = try Self.field(fields[3], name: "month", range: 1...12, names: Self.monthNames, firstNameValue: 1)
        daysOfWeek = Set(
            try Self.field(fields[4], name: "day of week", range: 0...7, names: Self.dayNames).map { $0 % 7 })
        dayOfMonthIsStar = fields[2].hasPrefix("*")
        dayOfWeekIsStar = fields[4].hasPrefix("*")
        let possibleDay = months.contains { month in daysOfMonth.contains { $0 <= Self.longestMonth[month - 1] } }
        guard possibleDay || (!dayOfMonthIsStar && !dayOfWeekIsStar) else {
            throw ParseError(description: "\"\(expression)\" never fires: no chosen month has the chosen day")
        }
    }

    private static let longestMonth = [31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]

    /// The first firing strictly after `date`, in `calendar`'s time zone; nil when none comes within 30 years.
    public func nextDate(after date: Date, in calendar: Calendar) -> Date? {
        guard var candidate = calendar.dateInterval(of: .minute, for: date)?.end else { return nil }
        let limit = date.addingTimeInterval(30 * 366 * 86_400)
        while candidate < limit {
            let parts = calendar.dateComponents([.month, .day, .hour, .minute, .weekday], from: candidate)
            let next: Calendar.Component?
            if !months.contains(parts.month ?? 0) {
                next = .month
            } else if !dayMatches(day: parts.day ?? 0, weekday: (parts.weekday ?? 1) - 1) {
                next = .day
            } else if !hours.contains(parts.hour ?? 0) {
                next = .hour
            } else if !minutes.contains(parts.minute ?? 0) {
                next = .minute
            } else {
                next = nil
            }
            guard let next else { return candidate }
            guard let following = calendar.dateInterval(of: next, for: candidate)?.end else { return nil }
            candidate = following
        }
        return nil
    }

    private func dayMatches(day: Int, weekday: Int) -> Bool {
        switch (dayOfMonthIsStar, dayOfWeekIsStar) {
        case (false, false): daysOfMonth.contains(day) || daysOfWeek.contains(weekday)
        case (false, true): daysOfMonth.contains(day)
        case (true, false): daysOfWeek.contains(weekday)
        case (true, true): true
        }
    }

    private static func field(
        _ text: String, name: String, range: ClosedRange<Int>, names: [String], firstNameValue: Int = 0
    ) throws(ParseError) -> Set<Int> {
        func value(_ token: Substring) throws(ParseError) -> Int {
            if let number = Int(token), range.contains(number) { return number }
            if let index = names.firstIndex(of: token.uppercased()) { return index + firstNameValue }
            throw ParseError(description: "\(name) \"\(token)\" is not within \(range.lowerBound)–\(range.upperBound)")
        }
        var values = Set<Int>()
        for item in text.split(separator: ",", omittingEmptySubsequences: false) {
            let parts = item.split(separator: "/", omittingEmptySubsequences: false)
            guard parts.count <= 2, !parts[0].isEmpty else {
                throw ParseError(description: "\(name) field \"\(text)\" is malformed")
            }
            var step = 1
            if parts.count == 2 {
                guard let parsed = Int(parts[1]), parsed > 0 else {
                    throw ParseError(description: "\(name) step \"\(parts[1])\" must be a positive number")
                }
                step = parsed
            }
            let bounds: ClosedRange<Int>
            if parts[0] == "*" {
                bounds = range
            } else if let dash = parts[0].firstIndex(of: "-") {
                let low = try value(parts[0][..<dash]), high = try value(parts[0][parts[0].index(after: dash)...])
                guard low <= high else { throw ParseError(description: "\(name) range \"\(parts[0])\" runs backwards") }
                bounds = low...high
            } else {
                let start = try value(parts[0])
                bounds = start...(parts.count == 2 ? range.upperBound : start)
            }
            values.formUnion(stride(from: bounds.lowerBound, through: bounds.upperBound, by: step))
        }
        return values
    }
}
