/// A value's text as stored: a number read from a display (`229.5,`, `224.5v`, `1 234,5 kWh`, `−4.5`) becomes the
/// number a spreadsheet reads (`229.5`, `224.5`, `1234.5`, `-4.5`) and its unit (`V`, `kWh`), so a CSV column is
/// numeric; the text as read is kept beside it (`RecordValue.raw`). The digits are kept as read (`001.7` stays),
/// never parsed and printed again. A text that is not one number with at most a unit (a status word, `1 8.4W` with
/// a gap a person must look at, `12:30`) is only trimmed.
public enum ValueText {
    /// Characters a display does not show beside a number but Tesseract reads off specks and edges.
    static let stray: Set<Character> = [",", ".", ";", ":", "'", "\"", "`", "|", "_", "‘", "’", "“", "”"]
    static let maxUnitLength = 4

    public static func normalise(_ raw: String) -> (text: String, unit: String) {
        let trimmed = raw.trimmingCharacters(in: .whitespacesAndNewlines)
        var rest = Substring(trimmed)
        while let first = rest.first, stray.contains(first),
            first != "." || !(rest.dropFirst().first?.isASCIIDigit ?? false)
        {
            rest = rest.dropFirst()
        }
        var sign = ""
        if let first = rest.first, "-−+".contains(first) {
            sign = first == "+" ? "" : "-"
            rest = rest.dropFirst().drop(while: \.isWhitespace)
        }
        if rest.first == "." { rest = Substring("0" + rest) }
        guard rest.first?.isASCIIDigit ?? false else { return (trimmed, "") }
        var number = String(rest.prefix { $0.isASCIIDigit || $0 == "." || $0 == "," || $0 == " " })
        var unit = rest.dropFirst(number.count)
        while let last = number.last, !last.isASCIIDigit { number.removeLast() }  // `229.5,`: a stray comma
        unit = unit.drop(while: { $0.isWhitespace || stray.contains($0) })
        while let last = unit.last, last.isWhitespace || stray.contains(last) { unit = unit.dropLast() }
        guard unit.count <= maxUnitLength, !unit.contains(where: { $0.isNumber || $0.isWhitespace }),
            let digits = plainNumber(number)
        else { return (trimmed, "") }
        // A lone letter's case is Tesseract's guess (`v` for `V`); longer units keep theirs (`kWh`, `mA`).
        let cased = unit.count == 1 && unit.first!.isLetter ? unit.uppercased() : String(unit)
        return (sign + digits, cased)
    }

    /// `1 234,5` → `1234.5`, `13,5` → `13.5`, `1.234,5` → `1234.5`; nil for digits a person must look at (`1 8.4`,
    /// `1.2.3`). A single point or comma is the decimal point; with both, the last one is, and the others group
    /// thousands, as do spaces, in threes after the first group.
    static func plainNumber(_ number: String) -> String? {
        let separators = number.filter { $0 == "." || $0 == "," }
        var decimal: Character?
        if separators.count == 1 || (Set(separators).count == 2 && separators.last != separators.dropLast().last) {
            decimal = separators.last
        }
        var integer = Substring(number), fraction: Substring = ""
        if let decimal, let index = number.lastIndex(of: decimal) {
            integer = number[..<index]
            fraction = number[number.index(after: index)...]
        }
        guard fraction.allSatisfy(\.isASCIIDigit) else { return nil }
        let groups = integer.split(whereSeparator: { $0 == " " || $0 == "." || $0 == "," }).map(String.init)
        guard !groups.isEmpty, groups.allSatisfy({ $0.allSatisfy(\.isASCIIDigit) }) else { return nil }
        if groups.count > 1 {
            // Only thousands separate an integer's digits; only one kind of separator does.
            let kinds = Set(integer.filter { !$0.isASCIIDigit })
            guard kinds.count == 1, (1...3).contains(groups[0].count), groups.dropFirst().allSatisfy({ $0.count == 3 }),
                integer.filter({ !$0.isASCIIDigit }).count == groups.count - 1
            else { return nil }
        }
        let joined = groups.joined()
        return fraction.isEmpty ? joined : joined + "." + fraction
    }
}

extension Character {
    fileprivate var isASCIIDigit: Bool { isASCII && isNumber }
}
