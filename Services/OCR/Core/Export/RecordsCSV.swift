import Foundation

/// CSV of a template's records as RFC 4180 has it: a header `Date` plus the value names in order, one row per
/// record in time order, CRLF line ends, fields with a comma, quote, CR or LF quoted with quotes doubled, UTF-8
/// without a byte-order mark. Timestamps are ISO 8601 in UTC (`2026-11-22T14:05:09Z`, with milliseconds when the
/// record has them).
public enum RecordsCSV {
    public static func header(_ template: Template) -> String {
        row(["Date"] + template.values.map(\.name))
    }

    /// One line (with its CRLF) for `record`, its values in the template's order.
    public static func line(_ record: Record, template: Template) -> String {
        let texts = template.values.indices.map { index in
            index < record.values.count ? record.values[index].text : ""
        }
        return row([timestamp(record.createdAt)] + texts)
    }

    /// The whole export for records already in time order.
    public static func export(_ template: Template, records: [Record]) -> String {
        header(template) + records.map { line($0, template: template) }.joined()
    }

    static func row(_ fields: [String]) -> String {
        fields.map(field).joined(separator: ",") + "\r\n"
    }

    static func field(_ text: String) -> String {
        guard text.contains(where: { $0 == "," || $0 == "\"" || $0 == "\n" || $0 == "\r" || $0 == "\r\n" }) else {
            return text
        }
        return "\"" + text.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }

    public static func timestamp(_ date: Date) -> String {
        let milliseconds = Int64((date.timeIntervalSince1970 * 1000).rounded(.down))
        let seconds = milliseconds >= 0 ? milliseconds / 1000 : -((-milliseconds + 999) / 1000)
        let remainder = Int(milliseconds - seconds * 1000)
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        let parts = calendar.dateComponents(
            [.year, .month, .day, .hour, .minute, .second],
            from: Date(timeIntervalSince1970: TimeInterval(seconds)))
        func two(_ value: Int?) -> String { String(format: "%02d", value ?? 0) }
        let base = "\(String(format: "%04d", parts.year ?? 0))-\(two(parts.month))-\(two(parts.day))T"
            + "\(two(parts.hour)):\(two(parts.minute)):\(two(parts.second))"
        return remainder == 0 ? base + "Z" : base + String(format: ".%03dZ", remainder)
    }
}
