/// Parsing and formatting of instants without DateFormatter (too slow for a million records, and locale-bound).
public enum Timestamps {
    /// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's `days_from_civil`).
    static func days(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let doy = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }

    /// The date of `days` since 1970-01-01 (`civil_from_days`).
    static func civil(days: Int) -> (year: Int, month: Int, day: Int) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let day = doy - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        return (yoe + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }

    /// Parses `2026-05-01 09:14:23 -0700` (Apple Health exports), `2026-05-01T09:14:23Z`,
    /// `2026-05-01T09:14:23.250+02:00`: the instant and the offset (seconds east of UTC) it was written in.
    /// Nil for anything else, including out-of-range fields (month 13, 25 h).
    public static func parse<Bytes: RandomAccessCollection>(_ text: Bytes) -> (EpochMilliseconds, offset: Int)?
    where Bytes.Element == UInt8, Bytes.Index == Int {
        var i = text.startIndex
        let end = text.endIndex
        func number(_ digits: Int) -> Int? {
            guard end - i >= digits else { return nil }
            var value = 0
            for _ in 0..<digits {
                let byte = text[i]
                guard byte >= 48, byte <= 57 else { return nil }
                value = value * 10 + Int(byte - 48)
                i += 1
            }
            return value
        }
        func expect(_ byte: UInt8) -> Bool {
            guard i < end, text[i] == byte else { return false }
            i += 1
            return true
        }
        guard let year = number(4), expect(45), let month = number(2), expect(45), let day = number(2) else {
            return nil
        }
        guard i < end, text[i] == 32 || text[i] == 84 else { return nil }  // ' ' or 'T'
        i += 1
        guard let hour = number(2), expect(58), let minute = number(2), expect(58), let second = number(2) else {
            return nil
        }
        var millis = 0
        if i < end, text[i] == 46 {  // '.'
            i += 1
            var scale = 100
            var digits = 0
            while i < end, text[i] >= 48, text[i] <= 57 {
                millis += Int(text[i] - 48) * scale
                scale /= 10
                digits += 1
                i += 1
            }
            guard digits > 0 else { return nil }
        }
        if i < end, text[i] == 32 { i += 1 }
        var offset = 0
        guard i < end else { return nil }
        if text[i] == 90 {  // 'Z'
            i += 1
        } else if text[i] == 43 || text[i] == 45 {
            let negative = text[i] == 45
            i += 1
            guard let hours = number(2) else { return nil }
            _ = expect(58)
            guard let minutes = number(2), hours <= 14, minutes < 60 else { return nil }
            offset = (hours * 3600 + minutes * 60) * (negative ? -1 : 1)
        } else {
            return nil
        }
        guard i == end, (1...12).contains(month), day >= 1, day <= daysIn(month: month, year: year), hour < 24,
            minute < 60, second < 61
        else { return nil }
        let seconds = days(year: year, month: month, day: day) * 86_400 + hour * 3600 + minute * 60 + second - offset
        return (Int64(seconds) * 1000 + Int64(millis), offset)
    }

    /// Convenience over `parse` for strings.
    public static func parse(_ text: String) -> (EpochMilliseconds, offset: Int)? {
        parse(Array(text.utf8))
    }

    static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    /// `2026-05-01T09:14:23.250+02:00` (or `Z` for offset 0); milliseconds only when not zero.
    public static func format(_ instant: EpochMilliseconds, offset: Int = 0) -> String {
        let local = instant + Int64(offset) * 1000
        let (dayNumber, msOfDay) = floorDivide(local, 86_400_000)
        let (year, month, day) = civil(days: Int(dayNumber))
        let seconds = Int(msOfDay / 1000), millis = Int(msOfDay % 1000)
        func two(_ value: Int) -> String { value < 10 ? "0\(value)" : "\(value)" }
        var text =
            "\(year)-\(two(month))-\(two(day))T\(two(seconds / 3600)):\(two(seconds / 60 % 60)):\(two(seconds % 60))"
        if millis != 0 { text += "." + String(String(millis + 1000).dropFirst()) }
        if offset == 0 { return text + "Z" }
        let magnitude = abs(offset)
        return text + (offset < 0 ? "-" : "+") + two(magnitude / 3600) + ":" + two(magnitude / 60 % 60)
    }

    /// Division rounding toward minus infinity, and the non-negative remainder.
    static func floorDivide(_ value: Int64, _ divisor: Int64) -> (Int64, Int64) {
        let quotient = value >= 0 ? value / divisor : -((-value + divisor - 1) / divisor)
        return (quotient, value - quotient * divisor)
    }
}
