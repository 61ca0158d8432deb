import Foundation
import Testing
@testable import OCRCore

/// An RFC 4180 reader, to check that what the export writes reads back the same.
func parseCSV(_ text: String) -> [[String]] {
    var rows: [[String]] = [], row: [String] = [], field = ""
    var quoted = false, afterQuote = false
    var iterator = Array(text.unicodeScalars).makeIterator()
    var pending: Unicode.Scalar? = nil
    func next() -> Unicode.Scalar? { if let p = pending { pending = nil; return p }; return iterator.next() }
    while let c = next() {
        if quoted {
            if c == "\"" {
                if let d = next() {
                    if d == "\"" { field.unicodeScalars.append("\"") } else { quoted = false; afterQuote = true; pending = d }
                } else { quoted = false }
            } else { field.unicodeScalars.append(c) }
            continue
        }
        switch c {
        case "\"" where field.isEmpty && !afterQuote: quoted = true
        case ",": row.append(field); field = ""; afterQuote = false
        case "\r": break
        case "\n": row.append(field); rows.append(row); row = []; field = ""; afterQuote = false
        default: field.unicodeScalars.append(c)
        }
    }
    if !field.isEmpty || !row.isEmpty { row.append(field); rows.append(row) }
    return rows
}

@Suite struct RecordsCSVTests {
    let template = Template(
        id: 1, name: "Battery", description: "", createdAt: Date(timeIntervalSince1970: 0),
        values: [
            ValueDefinition(name: "Volts", region: NormalizedRect(x: 0, y: 0, width: 0.1, height: 0.1)),
            ValueDefinition(name: "Note, \"quoted\"", region: NormalizedRect(x: 0, y: 0.5, width: 0.1, height: 0.1)),
        ])

    func record(_ seconds: Double, _ texts: [String]) -> Record {
        Record(
            id: 1, templateID: 1, createdAt: Date(timeIntervalSince1970: seconds),
            values: texts.map { RecordValue(name: "", text: $0, confidence: 1) })
    }

    @Test func headerIsDateAndValueNamesQuotedWhereNeeded() {
        #expect(RecordsCSV.header(template) == "Date,Volts,\"Note, \"\"quoted\"\"\"\r\n")
    }

    @Test func timestampsAreISO8601InUTC() {
        #expect(RecordsCSV.timestamp(Date(timeIntervalSince1970: 1_795_000_000)) == "2026-11-18T11:06:40Z")
        #expect(RecordsCSV.timestamp(Date(timeIntervalSince1970: 1_795_000_000.25)) == "2026-11-18T11:06:40.250Z")
        #expect(RecordsCSV.timestamp(Date(timeIntervalSince1970: 0)) == "1970-01-01T00:00:00Z")
    }

    @Test func commasQuotesAndNewlinesSurviveARoundTrip() {
        let nasty = ["12,6", "say \"hi\"\nnext line", "crlf\r\nhere", "", "čeština ✓", "\"", " leading space"]
        let records = nasty.enumerated().map { record(Double($0.offset), [$0.element, "x"]) }
        let csv = RecordsCSV.export(template, records: records)
        let rows = parseCSV(csv)
        #expect(rows.count == 1 + nasty.count)
        #expect(rows[0] == ["Date", "Volts", "Note, \"quoted\""])
        #expect(rows.dropFirst().map { $0[1] } == nasty)
        #expect(rows.dropFirst().map { $0[0] } == (0..<nasty.count).map { RecordsCSV.timestamp(Date(timeIntervalSince1970: Double($0))) })
        #expect(csv.hasSuffix("\r\n"))
        #expect(Array(csv.utf8.prefix(3)) != [0xEF, 0xBB, 0xBF], "no byte-order mark")
    }
}
