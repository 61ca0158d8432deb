import Foundation
import Testing

@testable import OCRCore

/// An RFC 4180 reader, to check that what the export writes reads back the same.
func parseCSV(_ text: String) -> [[String]] {
    var rows: [[String]] = [], row: [String] = [], field = ""
    var quoted = false, afterQuote = false
    var iterator = Array(text.unicodeScalars).makeIterator()
    var pending: Unicode.Scalar? = nil
    func next() -> Unicode.Scalar? {
        if let p = pending {
            pending = nil
            return p
        }
        return iterator.next()
    }
    while let c = next() {
        if quoted {
            if c == "\"" {
                if let d = next() {
                    if d == "\"" {
                        field.unicodeScalars.append("\"")
                    } else {
                        quoted = false
                        afterQuote = true
                        pending = d
                    }
                } else {
                    quoted = false
                }
            } else {
                field.unicodeScalars.append(c)
            }
            continue
        }
        switch c {
        case "\"" where field.isEmpty && !afterQuote: quoted = true
        case ",":
            row.append(field)
            field = ""
            afterQuote = false
        case "\r": break
        case "\n":
            row.append(field)
            rows.append(row)
            row = []
            field = ""
            afterQuote = false
        default: field.unicodeScalars.append(c)
        }
    }
    if !field.isEmpty || !row.isEmpty {
        row.append(field)
        rows.append(row)
    }
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
        #expect(RecordsCSV.header(template) == "Date,Date source,Volts,\"Note, \"\"quoted\"\"\",Uncertain\r\n")
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
        #expect(rows[0] == ["Date", "Date source", "Volts", "Note, \"quoted\"", "Uncertain"])
        #expect(rows.dropFirst().map { $0[2] } == nasty)
        #expect(rows.dropFirst().allSatisfy { $0[1] == "upload" })
        #expect(
            rows.dropFirst().map { $0[0] }
                == (0..<nasty.count).map { RecordsCSV.timestamp(Date(timeIntervalSince1970: Double($0))) })
        #expect(csv.hasSuffix("\r\n"))
        #expect(Array(csv.utf8.prefix(3)) != [0xEF, 0xBB, 0xBF], "no byte-order mark")
    }

    @Test func formulaLookingValuesAreNeutralisedUnlessRaw() {
        let risky = ["=1+2", "+SUM(A1)", "-2+3", "@cmd", "\tTAB", "\rCR", "=HYPERLINK(\"x\",\"y\")"]
        let safe = ["-12.5", "+3", "-0,5", "12.6", "", "a=b", "14.37V"]
        let records = (risky + safe).enumerated().map { record(Double($0.offset), [$0.element, "x"]) }
        let rows = parseCSV(RecordsCSV.export(template, records: records))
        #expect(rows.dropFirst().map { $0[2] } == risky.map { "'" + $0 } + safe)
        let raw = parseCSV(RecordsCSV.export(template, records: records, format: RecordsCSV.Format(raw: true)))
        #expect(raw.dropFirst().map { $0[2] } == risky + safe)
        // Value names are neutralised as values are.
        let named = Template(
            id: 1, name: "T", description: "", createdAt: Date(),
            values: [
                ValueDefinition(name: "=cmd", region: NormalizedRect(x: 0, y: 0, width: 0.1, height: 0.1))
            ])
        #expect(RecordsCSV.header(named) == "Date,Date source,'=cmd,Uncertain\r\n")
        #expect(RecordsCSV.isPlainNumber("-1e5") == false && RecordsCSV.isPlainNumber("-1.2.3") == false)
        #expect(RecordsCSV.isPlainNumber("-") == false && RecordsCSV.isPlainNumber("-.5") == false)
    }

    @Test func byteOrderMarkDelimiterAndTimeZone() throws {
        let czech = Template(
            id: 1, name: "T", description: "", createdAt: Date(),
            values: [
                ValueDefinition(name: "Napětí", region: NormalizedRect(x: 0, y: 0, width: 0.1, height: 0.1)),
                ValueDefinition(name: "Proud", region: NormalizedRect(x: 0, y: 0.5, width: 0.1, height: 0.1)),
            ])
        let winter = Record(
            id: 1, templateID: 1, createdAt: Date(timeIntervalSince1970: 1_795_352_709.25),
            values: [
                RecordValue(name: "", text: "14,37", confidence: 1), RecordValue(name: "", text: "a;b", confidence: 1),
            ],
            dateSource: .exif)
        let summer = Record(
            id: 2, templateID: 1, createdAt: Date(timeIntervalSince1970: 1_782_885_600),
            values: [
                RecordValue(name: "", text: "12", confidence: 1), RecordValue(name: "", text: "=1", confidence: 1),
            ],
            dateSource: .given)
        let format = try RecordsCSV.Format(raw: false, byteOrderMark: true, delimiter: ";", timeZone: "Europe/Prague")
        let csv = RecordsCSV.export(czech, records: [winter, summer], format: format)
        #expect(Array(csv.utf8.prefix(3)) == [0xEF, 0xBB, 0xBF])
        #expect(
            csv.dropFirst() == """
                Date;Date source;Napětí;Proud;Uncertain\r
                2026-11-22T14:05:09.250+01:00;exif;14,37;"a;b";\r
                2026-07-01T08:00:00+02:00;given;12;'=1;\r

                """)
        let tabs = RecordsCSV.export(czech, records: [winter], format: RecordsCSV.Format(delimiter: "\t"))
        #expect(
            tabs.hasPrefix(
                "Date\tDate source\tNapětí\tProud\tUncertain\r\n2026-11-22T13:05:09.250Z\texif\t14,37\ta;b\t\r\n"))

        #expect(throws: OCRError.invalid("the delimiter must be \",\", \";\" or a tab (got \"|\")")) {
            try RecordsCSV.Format(raw: false, byteOrderMark: false, delimiter: "|", timeZone: "")
        }
        #expect(throws: OCRError.self) {
            try RecordsCSV.Format(raw: false, byteOrderMark: false, delimiter: ",", timeZone: "Mars/Olympus")
        }
        #expect(
            RecordsCSV.timestamp(Date(timeIntervalSince1970: 0), in: TimeZone(identifier: "America/New_York"))
                == "1969-12-31T19:00:00-05:00")
    }
}
