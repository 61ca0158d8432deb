import Foundation

/// CSV of a template's records as RFC 4180 has it: a header `Date`, `Date source` plus the value names in order,
/// one row per record in time order, CRLF line ends, fields with the delimiter, a quote, CR or LF quoted with quotes
/// doubled, UTF-8. Timestamps are ISO 8601, in UTC (`2026-11-22T14:05:09Z`) or in `Format.timeZone` with its offset
/// (`2026-11-22T15:05:09+01:00`), with milliseconds when the record has them; the date source is `given`, `exif` or
/// `upload` (`DateSource`). A last column, `Uncertain`, names the record's values that were stored flagged
/// (`RecordValue.uncertainty`: a reading nobody checked that may be wrong), each with its reason
/// (`Napětí: read with confidence 0.70 (under 0.85)`), separated by `; `, empty when none: whoever opens the
/// spreadsheet sees which cells to check and why without asking the service.
///
/// For spreadsheets: unless `Format.raw`, a field starting with `=`, `+`, `-`, `@`, a tab or CR gets a leading `'`
/// (OWASP's advice: Excel and LibreOffice would run it as a formula); a plain number such as `-12.5` or `+3` is
/// left alone, since a spreadsheet reads it as the number it is and the prefix would turn readings into text.
public enum RecordsCSV {
    /// How the CSV is written for whoever opens it.
    public struct Format: Sendable, Hashable {
        /// Values as recorded, formula-looking or not.
        public var raw: Bool
        /// A UTF-8 byte-order mark first: Excel then reads the file as UTF-8 (Czech names stay readable).
        public var byteOrderMark: Bool
        public var delimiter: Character
        /// nil: UTC with `Z`.
        public var timeZone: TimeZone?

        public static let delimiters: [Character] = [",", ";", "\t"]

        public init(
            raw: Bool = false, byteOrderMark: Bool = false, delimiter: Character = ",", timeZone: TimeZone? = nil
        ) {
            self.raw = raw
            self.byteOrderMark = byteOrderMark
            self.delimiter = delimiter
            self.timeZone = timeZone
        }

        /// Checks the delimiter and names the zone: INVALID_ARGUMENT for a delimiter other than `,`, `;` or a tab,
        /// or a zone name the system's time-zone database does not know.
        public init(raw: Bool, byteOrderMark: Bool, delimiter: String, timeZone: String) throws {
            let delimiter = delimiter.isEmpty ? "," : delimiter
            guard delimiter.count == 1, let character = delimiter.first, Self.delimiters.contains(character) else {
                throw OCRError.invalid("the delimiter must be \",\", \";\" or a tab (got \"\(delimiter.prefix(20))\")")
            }
            var zone: TimeZone?
            if !timeZone.isEmpty {
                guard timeZone.utf8.count <= 64, let known = TimeZone(identifier: timeZone) else {
                    throw OCRError.invalid(
                        "unknown time zone \"\(timeZone.prefix(64))\" (an IANA name such as Europe/Prague)")
                }
                zone = known
            }
            self.init(raw: raw, byteOrderMark: byteOrderMark, delimiter: character, timeZone: zone)
        }
    }

    public static func header(_ template: Template, format: Format = Format()) -> String {
        (format.byteOrderMark ? "\u{FEFF}" : "")
            + row(["Date", "Date source"] + template.values.map(\.name) + ["Uncertain"], format: format)
    }

    /// One line (with its CRLF) for `record`, its values in the template's order.
    public static func line(_ record: Record, template: Template, format: Format = Format()) -> String {
        let texts = template.values.indices.map { index in
            index < record.values.count ? record.values[index].text : ""
        }
        let uncertain = record.values.filter(\.isUncertain).map { "\($0.name): \($0.uncertainty)" }
            .joined(separator: "; ")
        return row(
            [timestamp(record.createdAt, in: format.timeZone), record.dateSource.rawValue] + texts + [uncertain],
            format: format)
    }

    /// The whole export for records already in time order.
    public static func export(_ template: Template, records: [Record], format: Format = Format()) -> String {
        header(template, format: format) + records.map { line($0, template: template, format: format) }.joined()
    }

    static func row(_ fields: [String], format: Format) -> String {
        fields.map { field(format.raw ? $0 : neutralised($0), delimiter: format.delimiter) }
            .joined(separator: String(format.delimiter)) + "\r\n"
    }

    static func field(_ text: String, delimiter: Character = ",") -> String {
        guard text.contains(where: { $0 == delimiter || $0 == "\"" || $0 == "\n" || $0 == "\r" || $0 == "\r\n" }) else {
            return text
        }
        return "\"" + text.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }

    /// `text` with a leading `'` when a spreadsheet would take it for a formula (see the type's comment).
    static func neutralised(_ text: String) -> String {
        guard let first = text.unicodeScalars.first, "=+-@\t\r".unicodeScalars.contains(first) else { return text }
        return isPlainNumber(text) ? text : "'" + text
    }

    /// `-12.5`, `+3`, `-0,5`: a sign, digits and at most one decimal point or comma between digits.
    static func isPlainNumber(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        guard bytes.count >= 2, bytes.count <= 40, bytes[0] == UInt8(ascii: "-") || bytes[0] == UInt8(ascii: "+") else {
            return false
        }
        var digitsBefore = 0, separators = 0, digitsAfter = 0
        for byte in bytes.dropFirst() {
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"):
                if separators == 0 { digitsBefore += 1 } else { digitsAfter += 1 }
            case UInt8(ascii: "."), UInt8(ascii: ","): separators += 1
            default: return false
            }
        }
        return digitsBefore > 0 && (separators == 0 || (separators == 1 && digitsAfter > 0))
    }

    /// ISO 8601 in UTC (`Z`), or in `zone` with the offset it had at that moment (`+01:00`, `+02:00` in summer).
    public static func timestamp(_ date: Date, in zone: TimeZone? = nil) -> String {
        let milliseconds = Int64((date.timeIntervalSince1970 * 1000).rounded(.down))
        let seconds = milliseconds >= 0 ? milliseconds / 1000 : -((-milliseconds + 999) / 1000)
        let remainder = Int(milliseconds - seconds * 1000)
        let offset = zone?.secondsFromGMT(for: Date(timeIntervalSince1970: TimeInterval(seconds))) ?? 0
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        let parts = calendar.dateComponents(
            [.year, .month, .day, .hour, .minute, .second],
            from: Date(timeIntervalSince1970: TimeInterval(seconds + Int64(offset))))
        func two(_ value: Int?) -> String { String(format: "%02d", value ?? 0) }
        var text =
            "\(String(format: "%04d", parts.year ?? 0))-\(two(parts.month))-\(two(parts.day))T"
            + "\(two(parts.hour)):\(two(parts.minute)):\(two(parts.second))"
        if remainder != 0 { text += String(format: ".%03d", remainder) }
        guard zone != nil else { return text + "Z" }
        let minutes = abs(offset) / 60
        return text + (offset < 0 ? "-" : "+") + two(minutes / 60) + ":" + two(minutes % 60)
    }
}
