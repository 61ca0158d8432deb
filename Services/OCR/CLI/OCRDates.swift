import Foundation
import GatewayKit
import OCRAPI

/// Dates as people type them for a record (`--date`), and as the service reports a photo's EXIF time.
enum OCRDates {
    /// ISO 8601: `2026-11-22`, `2026-11-22T14:05`, `2026-11-22T14:05:09`, `…T14:05:09.250`, each with an optional `Z`,
    /// `+01:00` or `+0100`; a space may stand for the `T`. Without an offset the time is in `zone` (the gateway's
    /// local zone: where the person typing, or the camera, is). Nil for anything else.
    static func parse(_ text: String, zone: TimeZone = .current) -> Date? {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        guard trimmed.utf8.count <= 40 else { return nil }
        let pattern =
            #"^(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?)?(Z|[+-]\d{2}:?\d{2})?$"#
        guard let regex = try? NSRegularExpression(pattern: pattern),
            let match = regex.firstMatch(in: trimmed, range: NSRange(trimmed.startIndex..., in: trimmed))
        else { return nil }
        func group(_ index: Int) -> String? {
            Range(match.range(at: index), in: trimmed).map { String(trimmed[$0]) }
        }
        func number(_ index: Int) -> Int { group(index).flatMap { Int($0) } ?? 0 }
        let (year, month, day, hour, minute, second) = (
            number(1), number(2), number(3), number(4), number(5), number(6)
        )
        guard (1...12).contains(month), day >= 1, hour < 24, minute < 60, second < 60 else { return nil }
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = zone
        if let offset = group(8) {
            guard offset != "Z" else {
                calendar.timeZone = TimeZone(identifier: "UTC")!
                return date(calendar, year, month, day, hour, minute, second, group(7))
            }
            let digits = offset.dropFirst().filter(\.isNumber)
            let hours = Int(digits.prefix(2)) ?? 0, minutes = Int(digits.suffix(2)) ?? 0
            guard hours <= 14, minutes < 60,
                let fixed = TimeZone(secondsFromGMT: (offset.hasPrefix("-") ? -1 : 1) * (hours * 3600 + minutes * 60))
            else { return nil }
            calendar.timeZone = fixed
        }
        return date(calendar, year, month, day, hour, minute, second, group(7))
    }

    private static func date(
        _ calendar: Calendar, _ year: Int, _ month: Int, _ day: Int, _ hour: Int, _ minute: Int, _ second: Int,
        _ fraction: String?
    ) -> Date? {
        let components = DateComponents(year: year, month: month, day: day, hour: hour, minute: minute, second: second)
        // Calendar rolls 2026-02-30 over into March: a date that does not exist must not become another one.
        guard components.isValidDate(in: calendar), let date = calendar.date(from: components) else { return nil }
        let milliseconds = fraction.map { Double("0." + $0) ?? 0 } ?? 0
        return date.addingTimeInterval((milliseconds * 1000).rounded(.down) / 1000)
    }

    /// `--date` checked as the service checks a record's date (1970 to a day from now), before anything connects.
    static func option(_ text: String, name: String = "--date") throws -> Date {
        guard let date = parse(text) else {
            throw InvalidValue(
                "\(name) \"\(text)\" is not an ISO 8601 date or time (2026-11-22, 2026-11-22T14:05, 2026-11-22T14:05:09+01:00)"
            )
        }
        guard date.timeIntervalSince1970 >= 0 else { throw InvalidValue("\(name) \(text) is before 1970") }
        guard date.timeIntervalSinceNow <= 86_400 else {
            throw InvalidValue("\(name) \(text) is more than a day in the future")
        }
        return date
    }

    static func sourceName(_ source: OcrV1.DateSource) -> String {
        switch source {
        case .given: "given"
        case .exif: "exif"
        case .upload, .unspecified: "upload"
        case .unrecognized(let value): "source \(value)"
        }
    }
}
