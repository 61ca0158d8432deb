import Foundation
import Storage
import StorageTestSupport
import Testing

@testable import OCRCore

@Suite struct TemplateStoreTests {
    let store: TemplateStore
    let values = [
        ValueDefinition(name: "Volts", region: NormalizedRect(x: 0.5, y: 0.1, width: 0.1, height: 0.05)),
        ValueDefinition(name: "Amps", region: NormalizedRect(x: 0.5, y: 0.3, width: 0.1, height: 0.05), level: .line),
    ]

    init() throws { store = try TemplateStore.inMemory(using: .testBackend) }

    func values(_ texts: String...) -> [RecordValue] {
        // Sure readings: one under `TemplateMatcher.minimumConfidence` is stored flagged (NeverSilentlyWrongTests).
        texts.map { RecordValue(name: "", text: $0, confidence: 0.9) }
    }

    @Test func shapesLabelsAndUncertainValuesAreStoredExportedAndClearedByAnEdit() throws {
        let learned = [
            ValueDefinition(name: "Napětí", region: values[0].region, shape: "#.#V", label: "Napětí"),
            ValueDefinition(name: "Proud", region: values[1].region, shape: "#.#A", label: "Proud"),
        ]
        let (template, _) = try store.createTemplate(name: "Charger", values: learned)
        #expect(try store.template(id: template.id).values == learned)
        let record = try store.addRecord(
            templateID: template.id,
            values: [
                RecordValue(
                    name: "", text: "14.30", confidence: 0.7, uncertainty: "read with confidence 0.70 (under 0.80)"),
                RecordValue(name: "", text: "2.10", confidence: 0.95),
            ], at: Date(timeIntervalSince1970: 1_790_000_000))
        #expect(record.values.map(\.isUncertain) == [true, false])
        #expect(
            try store.allRecords(templateID: template.id)[0].values[0].uncertainty
                == "read with confidence 0.70 (under 0.80)")
        #expect(
            parseCSV(try store.exportCSV(templateID: template.id))[1] == [
                "2026-09-21T14:13:20Z", "upload", "14.30", "2.10", "Napětí: read with confidence 0.70 (under 0.80)",
            ])
        let corrected = try store.updateRecord(id: record.id, values: ["Napětí": "14.38"])
        #expect(corrected.values.map(\.isUncertain) == [false, false] && corrected.values[0].confidence == 1)
        #expect(parseCSV(try store.exportCSV(templateID: template.id))[1].last == "")
        #expect(throws: OCRError.self) {
            try store.createTemplate(
                name: "Long",
                values: [
                    ValueDefinition(name: "V", region: values[0].region, label: String(repeating: "x", count: 201))
                ])
        }
    }

    /// A correction of the template's first record teaches the shape its misreading taught (a thermostat's first
    /// photo read `2~6` for 27.6: every later 27.x was flagged "its shape ##.# is not the learned #~#"); a later
    /// record's correction, or one of a value read as learned, teaches nothing.
    @Test func correctingTheFirstRecordRelearnsItsShape() throws {
        let learned = [
            ValueDefinition(name: "Set", region: values[0].region, shape: "#~#", label: "SET"),
            ValueDefinition(name: "Room", region: values[1].region, shape: "#.#°C", label: "ROOM"),
        ]
        let (template, first) = try store.createTemplate(
            name: "Thermostat", values: learned,
            firstRecord: [
                RecordValue(name: "", text: "2~6", confidence: 0.6),
                RecordValue(name: "", text: "6.8", confidence: 0.9, raw: "6.8"),
            ])
        let later = try store.addRecord(templateID: template.id, values: values("27.1", "7.0"))
        _ = try store.updateRecord(id: later.id, values: ["Set": "27.9"])
        #expect(try store.template(id: template.id).values.map(\.shape) == ["#~#", "#.#°C"], "a later record")
        _ = try store.updateRecord(id: try #require(first).id, values: ["Set": "27.6", "Room": "6.8"])
        #expect(try store.template(id: template.id).values.map(\.shape) == ["##.#", "#.#°C"])
        // The unit learned beside the value stays when the correction types none.
        #expect(ValueShape.relearned("#.#°C", readAs: "6.8", or: "", correctedTo: "16.8") == "##.#°C")
        #expect(ValueShape.relearned("#.#V", readAs: "", or: "9.8", correctedTo: "239.8 V") == "###.#V")
        #expect(ValueShape.relearned("##.#V", readAs: "9.8", or: "", correctedTo: "239.8") == nil, "not what taught it")
        #expect(ValueShape.relearned("~#.#V", readAs: "9.8", or: "", correctedTo: "239.8") == nil, "a legacy shape")
    }

    @Test func createListShowRenameAndDelete() throws {
        let (battery, first) = try store.createTemplate(
            name: "Battery", description: "the shed's monitor", values: values, firstRecord: values("12.6", "3.2"),
            at: Date(timeIntervalSince1970: 100))
        #expect(first?.values.map(\.name) == ["Volts", "Amps"])
        _ = try store.createTemplate(name: "Attic meter", values: [values[0]])
        #expect(try store.templates().map(\.name) == ["Attic meter", "Battery"])
        #expect(try store.template(named: "Battery") == battery)
        #expect(try store.template("\(battery.id)") == battery)
        #expect(try store.template(id: battery.id).values == values)

        let renamed = try store.rename(templateID: battery.id, to: "Shed battery")
        #expect(renamed.name == "Shed battery")
        #expect(throws: OCRError(.alreadyExists, "a template named \"Attic meter\" already exists")) {
            try store.rename(templateID: battery.id, to: "Attic meter")
        }

        try store.deleteTemplate(id: battery.id)
        #expect(throws: OCRError(.notFound, "no template \"\(battery.id)\"")) { try store.template(id: battery.id) }
        #expect(throws: OCRError(.notFound, "no template \"\(battery.id)\"")) {
            try store.latestRecords(templateID: battery.id)
        }
        #expect(
            try store.database.read { try $0.queryOne("SELECT count(*) FROM record_values")?.int(0) } == 0,
            "the records went with the template")
    }

    @Test func invalidTemplatesAreRefused() throws {
        #expect(throws: OCRError(.invalidArgument, "a template needs at least one value")) {
            try store.createTemplate(name: "Empty", values: [])
        }
        #expect(throws: OCRError(.invalidArgument, "value name \"Volts\" is used twice")) {
            try store.createTemplate(name: "Twice", values: [values[0], values[0]])
        }
        let outside = ValueDefinition(name: "Out", region: NormalizedRect(x: 0.95, y: 0, width: 0.1, height: 0.1))
        #expect(throws: OCRError.self) { try store.createTemplate(name: "Outside", values: [outside]) }
        _ = try store.createTemplate(name: "Once", values: values)
        #expect(throws: OCRError(.alreadyExists, "a template named \"Once\" already exists")) {
            try store.createTemplate(name: "Once", values: values)
        }
        #expect(throws: OCRError(.notFound, "no template \"Nope\"")) { try store.template("Nope") }
    }

    @Test func renamingValuesKeepsTheRecordsValues() throws {
        let template = try store.createTemplate(name: "B", values: values, firstRecord: values("12.6", "3.2")).template
        let swapped = try store.renameValues(templateID: template.id, ["Volts": "Amps", "Amps": "Volts"])
        #expect(swapped.values.map(\.name) == ["Amps", "Volts"])
        let record = try store.latestRecords(templateID: template.id)[0]
        #expect(record.values.map(\.name) == ["Amps", "Volts"])
        #expect(record.values.map(\.text) == ["12.6", "3.2"])
        #expect(throws: OCRError(.notFound, "template \"B\" has no value named \"Watts\"")) {
            try store.renameValues(templateID: template.id, ["Watts": "W"])
        }
        #expect(throws: OCRError.self) { try store.renameValues(templateID: template.id, ["Amps": "Volts"]) }
    }

    @Test func latestFivePagesAndExportInTimeOrder() throws {
        let template = try store.createTemplate(name: "B", values: values).template
        // Added out of time order: the order is the records' time, not their insertion.
        for second in [5, 3, 9, 1, 7, 2, 8, 4, 6, 0] {
            _ = try store.addRecord(
                templateID: template.id, values: values("\(second)", "a,\"b\""),
                at: Date(timeIntervalSince1970: 1_790_000_000 + Double(second)))
        }
        #expect(
            try store.latestRecords(templateID: template.id).map { $0.values[0].text } == ["9", "8", "7", "6", "5"])

        var seen: [String] = []
        var token: String?
        var pages = 0
        repeat {
            let page = try store.records(templateID: template.id, pageSize: 3, pageToken: token)
            seen += page.records.map { $0.values[0].text }
            token = page.nextPageToken
            pages += 1
        } while token != nil
        #expect(seen == (0...9).map(String.init))
        #expect(pages == 4)
        #expect(throws: OCRError(.invalidArgument, "invalid page token")) {
            try store.records(templateID: template.id, pageToken: "garbage")
        }

        let rows = parseCSV(try store.exportCSV(templateID: template.id))
        #expect(rows[0] == ["Date", "Date source", "Volts", "Amps", "Uncertain"])
        #expect(rows.dropFirst().map { $0[2] } == (0...9).map(String.init))
        #expect(rows[1] == ["2026-09-21T14:13:20Z", "upload", "0", "a,\"b\"", ""])

        let oldest = try store.records(templateID: template.id, pageSize: 1).records[0]
        try store.deleteRecord(id: oldest.id)
        #expect(throws: OCRError(.notFound, "no record \(oldest.id)")) { try store.deleteRecord(id: oldest.id) }
        #expect(try store.allRecords(templateID: template.id).count == 9)
    }

    @Test func recordsMustHaveOneValuePerTemplateValue() throws {
        let template = try store.createTemplate(name: "B", values: values).template
        #expect(throws: OCRError(.invalidArgument, "a record of this template has 2 values, got 1")) {
            try store.addRecord(templateID: template.id, values: values("1"))
        }
        #expect(throws: OCRError(.notFound, "no template \"999\"")) {
            try store.addRecord(templateID: 999, values: values("1", "2"))
        }
    }

    @Test func recordsAreCorrectedByValueNameAndDate() throws {
        let template = try store.createTemplate(name: "B", values: values).template
        let other = try store.createTemplate(name: "C", values: values).template
        let record = try store.addRecord(templateID: template.id, values: values("12.6", "3.2"))
        #expect(record.dateSource == .upload)

        let edited = try store.updateRecord(id: record.id, values: ["Amps": "3.4"])
        #expect(
            edited.values.map(\.text) == ["12.6", "3.4"] && edited.values[1].confidence == 1
                && edited.values[0].confidence == 0.9)
        #expect(edited.createdAt == record.createdAt && edited.dateSource == .upload)

        let taken = Date(timeIntervalSince1970: 1_790_000_000)
        let backdated = try store.updateRecord(id: record.id, templateID: template.id, date: taken)
        #expect(
            backdated.createdAt == taken && backdated.dateSource == .given
                && backdated.values.map(\.text) == ["12.6", "3.4"])
        #expect(try store.allRecords(templateID: template.id).first == backdated)

        #expect(
            throws: OCRError.invalid("template \"B\" has no value named \"Watts\"; its values: \"Volts\", \"Amps\"")
        ) {
            try store.updateRecord(id: record.id, values: ["Watts": "1"])
        }
        #expect(throws: OCRError(.notFound, "no record \(record.id) of template \(other.id)")) {
            try store.updateRecord(id: record.id, templateID: other.id, values: ["Volts": "1"])
        }
        #expect(throws: OCRError(.notFound, "no record 999")) {
            try store.updateRecord(id: 999, values: ["Volts": "1"])
        }
        #expect(throws: OCRError.invalid("a record's date must not be more than a day in the future")) {
            try store.updateRecord(id: record.id, date: Date().addingTimeInterval(2 * 86_400))
        }
        #expect(throws: OCRError.invalid("a record's date must not be before 1970-01-01")) {
            try store.addRecord(
                templateID: template.id, values: values("1", "2"), at: Date(timeIntervalSince1970: -1),
                dateSource: .given)
        }
        let exif = try store.addRecord(templateID: template.id, values: values("1", "2"), at: taken, dateSource: .exif)
        #expect(
            try store.latestRecords(templateID: template.id, limit: 10).first { $0.id == exif.id }?.dateSource == .exif)
        #expect(
            try store.allRecords(templateID: template.id).map(\.values[0].text) == ["12.6", "1"],
            "the unchanged record failed as a whole")
    }

    @Test func templateEditsNameDescriptionAndValuesAtOnce() throws {
        let template = try store.createTemplate(name: "B", description: "old", values: values).template
        _ = try store.createTemplate(name: "Taken", values: values)
        let edited = try store.updateTemplate(
            id: template.id, name: "Shed", description: "the shed's charger", renames: ["Volts": "Napětí"])
        #expect(
            edited.name == "Shed" && edited.description == "the shed's charger"
                && edited.values.map(\.name) == ["Napětí", "Amps"])
        #expect(try store.template(id: template.id) == edited)
        #expect(throws: OCRError(.alreadyExists, "a template named \"Taken\" already exists")) {
            try store.updateTemplate(id: template.id, name: "Taken", description: "lost")
        }
        #expect(throws: OCRError(.notFound, "template \"Shed\" has no value named \"Volts\"")) {
            try store.updateTemplate(id: template.id, description: "lost", renames: ["Volts": "V"])
        }
        #expect(try store.template(id: template.id) == edited, "all or nothing")
        #expect(try store.updateTemplate(id: template.id, description: "").description == "")
    }

    /// A database of the first schema (before records had date sources) opens with its records, dated by upload.
    @Test func aVersionOneDatabaseMigratesWithItsRecords() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("ocr-v1-\(UUID().uuidString).sqlite")
            .path
        defer {
            for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
        }
        do {
            let old = try Database(path: path, migrations: [OCRSchema.migrations[0]])
            try old.write { db in
                try db.execute("INSERT INTO templates (id, name, description, created_ms) VALUES (1, 'Old', '', 1000)")
                try db.execute(
                    "INSERT INTO template_values (template_id, position, name, level, x, y, width, height) VALUES (1, 0, 'Volts', 'word', 0.1, 0.1, 0.1, 0.1)"
                )
                try db.execute("INSERT INTO records (id, template_id, created_ms) VALUES (7, 1, 1790000000000)")
                try db.execute(
                    "INSERT INTO record_values (record_id, position, text, confidence) VALUES (7, 0, '12.6', 0.9)")
            }
        }
        let store = try TemplateStore(path: path)
        let records = try store.allRecords(templateID: 1)
        #expect(records.map(\.id) == [7] && records[0].dateSource == .upload && records[0].values[0].text == "12.6")
        #expect(try store.updateRecord(id: 7, values: ["Volts": "12.7"]).values[0].text == "12.7")
        #expect(
            try store.exportCSV(templateID: 1)
                == "Date,Date source,Volts,Uncertain\r\n2026-09-21T14:13:20Z,upload,12.7,\r\n")
    }

}

@Suite struct TextLimitTests {
    /// "a" and 300 combining accents is one character but 301 scalars: lengths count scalars, so such text cannot
    /// pass as short (it could be megabytes and cost seconds to count as characters).
    @Test func lengthsCountScalarsNotCharacters() throws {
        let store = try TemplateStore.inMemory(using: .testBackend)
        let value = ValueDefinition(name: "V", region: NormalizedRect(x: 0, y: 0, width: 0.1, height: 0.1))
        let heavy = "a" + String(repeating: "\u{301}", count: 300)
        #expect(heavy.count == 1)
        #expect(throws: OCRError(.invalidArgument, "template name is longer than 200 characters")) {
            try store.createTemplate(name: heavy, values: [value])
        }
        #expect(throws: OCRError.self) {
            try store.createTemplate(
                name: "Long description", description: String(repeating: "x", count: 2001), values: [value])
        }
        let template = try store.createTemplate(name: String(repeating: "ř", count: 200), values: [value]).template
        #expect(throws: OCRError.self) {
            try store.addRecord(
                templateID: template.id,
                values: [RecordValue(name: "V", text: String(repeating: "1", count: 1001), confidence: 1)])
        }
        #expect(throws: OCRError.self) {
            try RecognitionOptions(customWords: ["a" + String(repeating: "\u{301}", count: 64)]).validate()
        }
        #expect(throws: OCRError.self) { try RecognitionOptions(customWords: ["nul\0"]).validate() }
        try RecognitionOptions(customWords: [String(repeating: "ž", count: 64)]).validate()
    }
}
