import Foundation
import Storage
import StorageTestSupport
import Testing
import TextRecognition

@testable import OCRCore

/// Issue 40, "never silently wrong": a power meter's `9.8v` for 239.8 V and `24.9` for 2124.9 were stored
/// unflagged at 0.91 (the shape counted no digits), a thermometer template's first record `00` at 0.56 unflagged
/// (first records were never checked), and stray characters (`229.5,`, `224.5v`) made a CSV column text.
@Suite struct NeverSilentlyWrongTests {
    static func word(_ text: String, x: Int, y: Int, width: Int = 60, confidence: Double = 0.95) -> Observation {
        let box = PixelRect(x: x, y: y, width: width, height: 30)
        return Observation(
            level: .word, text: text, confidence: confidence, box: box,
            normalizedBox: NormalizedRect(box, imageWidth: 600, imageHeight: 400))
    }

    /// A power meter: label, value and (unless read glued to the value, `9.8v`) the voltage's unit as a word.
    static func meter(volts: String, watts: String, confidence: Double = 0.95) -> [Observation] {
        [word("Napětí", x: 50, y: 100), word(volts, x: 300, y: 100, confidence: confidence)]
            + (volts.last!.isLetter ? [] : [word("V", x: 370, y: 100, width: 20)])
            + [word("Výkon", x: 50, y: 150), word(watts, x: 300, y: 150, confidence: confidence)]
    }

    @Test func theShapeCountsDigitsSignAndDecimals() {
        #expect(ValueShape.skeleton("239.8 V") == "###.#V" && ValueShape.skeleton("9.8v") == "#.#V")
        #expect(
            ValueShape.skeleton("−4.5") == "-#.#" && ValueShape.skeleton("-4.5") == "-#.#"
                && ValueShape.skeleton("79") == "##")
        #expect(ValueShape.skeleton("9,5 v") == "#.#V" && ValueShape.skeleton("45 %") == "##%")
        #expect(ValueShape.digitsDiffer(learned: "###.#V", candidate: "#.#V"))
        #expect(ValueShape.digitsDiffer(learned: "####.#", candidate: "##.#"))
        #expect(!ValueShape.digitsDiffer(learned: "###.#V", candidate: "###.#V"))
        #expect(!ValueShape.digitsDiffer(learned: "~#.#V", candidate: "##.##V"), "a legacy shape counted no digits")
        #expect(ValueShape.similarity(learned: "###.#V", candidate: "#.#V") == 0.7)
        #expect(ValueShape.similarity(learned: "~#.#V", candidate: "##.##V") == 1)
        #expect(ValueShape.similarity(learned: "-#.#", candidate: "#.#") < 0.7, "a lost minus sign is another shape")
        #expect(ValueShape.differentUnit(learned: "#.##A", candidate: "#.##V")?.candidate == "V")
        #expect(
            ValueShape.differentUnit(learned: "#.##A", candidate: "#.##") == nil, "a unit not read is no other unit")
    }

    /// The issue's photo: both values lost leading digits and were read at 0.91–0.92. They still fill their slots
    /// (nothing else does), flagged with why, normalised with the text as read beside.
    @Test func aReadingThatLostLeadingDigitsIsFlagged() {
        let first = Self.meter(volts: "239.8", watts: "2124.9")
        let template = [
            ValueDefinition(name: "Napětí", observation: first[1], among: first),
            ValueDefinition(name: "Výkon", observation: first[4], among: first),
        ]
        #expect(template.map(\.shape) == ["###.#V", "####.#"])
        let values = TemplateMatcher.match(template, in: Self.meter(volts: "9.8v", watts: "24.9", confidence: 0.91))
        #expect(values.map(\.text) == ["9.8", "24.9"], "\(values)")
        #expect(values[0].raw == "9.8v" && values[0].unit == "V")
        #expect(values.allSatisfy { $0.uncertainty.contains("is not the learned") }, "\(values)")
        // The same digits' count is no doubt.
        let right = TemplateMatcher.match(template, in: Self.meter(volts: "231.4", watts: "2098.0"))
        #expect(right.allSatisfy { !$0.isUncertain }, "\(right)")
        #expect(right[0].unit == "V", "the unit read beside the value")
    }

    @Test func valuesAreNormalisedWithTheirUnit() {
        let cases: [(String, String, String)] = [
            ("229.5,", "229.5", ""), ("224.5v", "224.5", "V"), ("13,03V", "13.03", "V"),
            ("1 234,5 kWh", "1234.5", "kWh"),
            ("−4.5", "-4.5", ""), ("- 4.5 °C", "-4.5", "°C"), ("+3", "3", ""), ("001.7A", "001.7", "A"),
            ("55 %", "55", "%"),
            ("'12.5", "12.5", ""), ("1.234,5", "1234.5", ""), (".5", "0.5", ""), ("", "", ""),
            // Not one number with a unit: only trimmed, for a person to look at.
            ("1 8.4W", "1 8.4W", ""), ("OK", "OK", ""), ("12:30", "12:30", ""), ("1.2.3", "1.2.3", ""),
            ("13.03V 001.7A", "13.03V 001.7A", ""), (" Napětí 13.52V ", "Napětí 13.52V", ""),
        ]
        for (raw, text, unit) in cases {
            let normalised = ValueText.normalise(raw)
            #expect(normalised.text == text && normalised.unit == unit, "\(raw) → \(normalised)")
        }
    }

    /// The thermometer's first record: `00` and `0000` for −4.5 and 79 at 0.56–0.61 were stored with an empty
    /// Uncertain column. A first record is checked as every stored record is; a value a person typed (confidence
    /// 1) is not second-guessed.
    @Test func aTemplatesFirstRecordIsChecked() throws {
        let store = try TemplateStore.inMemory(using: .testBackend)
        let definitions = [
            ValueDefinition(
                name: "Teplota", region: NormalizedRect(x: 0.1, y: 0.1, width: 0.2, height: 0.1), shape: "##"),
            ValueDefinition(
                name: "Vlhkost", region: NormalizedRect(x: 0.1, y: 0.3, width: 0.2, height: 0.1), shape: "####"),
            ValueDefinition(
                name: "Baterie", region: NormalizedRect(x: 0.1, y: 0.5, width: 0.2, height: 0.1), shape: "##%"),
        ]
        let (template, record) = try store.createTemplate(
            name: "Teploměr", values: definitions,
            firstRecord: [
                RecordValue(name: "Teplota", text: "00", confidence: 0.56),
                RecordValue(name: "Vlhkost", text: "0000", confidence: 0.61),
                RecordValue(name: "Baterie", text: "80 %", confidence: 0.93),
            ])
        let values = try #require(record).values
        #expect(values[0].uncertainty == "read with confidence 0.56 (under 0.85)" && values[1].isUncertain, "\(values)")
        // Just under the threshold reads as under it (display seven-segment-3's 0.849 was "0.85 (under 0.85)").
        #expect(TemplateMatcher.lowConfidence(0.849) == "read with confidence 0.84 (under 0.85)")
        #expect(
            TemplateMatcher.lowConfidence(0.29) == "read with confidence 0.29 (under 0.85)", "0.29 × 100 is 28.999…")
        #expect(!values[2].isUncertain && values[2].text == "80" && values[2].unit == "%" && values[2].raw == "80 %")
        // A record whose client dropped the flag is flagged all the same; a typed value is the person's.
        let added = try store.addRecord(
            templateID: template.id,
            values: [
                RecordValue(name: "Teplota", text: "-4.5", confidence: 0.7),
                RecordValue(name: "Vlhkost", text: "", confidence: 0),
                RecordValue(name: "Baterie", text: "79", confidence: 1),
            ])
        #expect(added.values.map(\.isUncertain) == [true, true, false], "\(added.values)")
        let csv = try store.exportCSV(templateID: template.id)
        #expect(
            csv.contains(
                ",00,0000,80,Teplota: read with confidence 0.56 (under 0.85); Vlhkost: read with confidence 0.61 (under 0.85)\r\n"
            ), "\(csv)")
    }

    @Test func storedValuesAreNormalisedWithTheRawTextKeptAndTheCSVNumeric() throws {
        let store = try TemplateStore.inMemory(using: .testBackend)
        let definitions = ["Napětí", "Proud"].enumerated().map { index, name in
            ValueDefinition(
                name: name, region: NormalizedRect(x: 0.1, y: 0.1 + 0.2 * Double(index), width: 0.2, height: 0.1))
        }
        let template = try store.createTemplate(name: "Nabíječka", values: definitions).template
        let record = try store.addRecord(
            templateID: template.id,
            values: [
                RecordValue(name: "Napětí", text: "229.5,", confidence: 0.95),
                RecordValue(name: "Proud", text: "224.5v", confidence: 0.95),
            ])
        let stored = try #require(try store.allRecords(templateID: template.id).first)
        #expect(stored == record)
        #expect(stored.values.map(\.text) == ["229.5", "224.5"] && stored.values.map(\.raw) == ["229.5,", "224.5v"])
        #expect(stored.values.map(\.unit) == ["", "V"])
        // A correction is normalised too, the unit read kept when none is typed.
        let edited = try store.updateRecord(id: record.id, values: ["Proud": "230,1"])
        #expect(
            edited.values[1].text == "230.1" && edited.values[1].raw == "230,1" && edited.values[1].unit == "V",
            "\(edited.values[1])")
        let csv = try store.exportCSV(templateID: template.id)
        #expect(csv.hasSuffix(",229.5,230.1,\r\n"), "\(csv)")
    }

    /// Shapes learned before digits were counted are marked legacy by migration 5, so their templates' records are
    /// not all flagged for a digits' count the template never learned.
    @Test func migrationFiveMarksLegacyShapes() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("ocr-v4-\(UUID().uuidString).sqlite")
            .path
        defer {
            for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
        }
        do {
            let old = try Database(path: path, migrations: Array(OCRSchema.migrations.prefix(4)))
            try old.write { db in
                try db.execute(
                    "INSERT INTO templates (id, owner, name, description, created_ms) VALUES (1, 'admin', 'Old', '', 1000)"
                )
                try db.execute(
                    """
                    INSERT INTO template_values (template_id, position, name, level, x, y, width, height, shape, label)
                    VALUES (1, 0, 'Volts', 'word', 0.1, 0.1, 0.1, 0.1, '#.#V', 'Napětí'), (1, 1, 'Amps', 'word', 0.1, 0.3, 0.1, 0.1, '', '')
                    """)
                try db.execute("INSERT INTO records (id, template_id, created_ms) VALUES (7, 1, 1790000000000)")
                try db.execute(
                    "INSERT INTO record_values (record_id, position, text, confidence) VALUES (7, 0, '12.6', 0.9)")
            }
        }
        let store = try TemplateStore(path: path)
        #expect(try store.template(id: 1).values.map(\.shape) == ["~#.#V", ""])
        let record = try #require(try store.allRecords(templateID: 1).first)
        #expect(record.values[0].text == "12.6" && record.values[0].raw == "12.6" && record.values[0].unit == "")
    }
}
