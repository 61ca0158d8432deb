import Foundation
import Storage
import StorageTestSupport
import Testing

@testable import OCRCore

/// Templates and records belong to the user who made them; those made before owners existed are the admin's.
@Suite struct TemplateOwnershipTests {
    let values = [ValueDefinition(name: "Volts", region: NormalizedRect(x: 0.5, y: 0.1, width: 0.1, height: 0.05))]
    let reading = [RecordValue(name: "", text: "12.6", confidence: 0.9)]

    @Test func aUserSeesChangesAndDeletesOnlyTheirOwn() throws {
        let store = try TemplateStore.inMemory(using: .testBackend)
        let alice = store.owned(by: "alice"), bob = store.owned(by: "bob")
        let (mine, record) = try alice.createTemplate(name: "Meter", values: values, firstRecord: reading)
        #expect(try bob.templates().isEmpty)
        #expect(throws: OCRError.self) { try bob.template(named: "Meter") }
        #expect(throws: OCRError.self) { try bob.template(id: mine.id) }
        #expect(throws: OCRError.self) { try bob.deleteTemplate(id: mine.id) }
        #expect(throws: OCRError.self) { try bob.deleteRecord(id: record!.id) }
        #expect(throws: OCRError.self) { try bob.updateRecord(id: record!.id, values: ["Volts": "0"]) }
        #expect(throws: OCRError.self) { try bob.addRecord(templateID: mine.id, values: reading) }
        #expect(throws: OCRError.self) { try bob.records(templateID: mine.id) }
        // Names are unique per user, not across users.
        _ = try bob.createTemplate(name: "Meter", values: values)
        #expect(throws: OCRError.self) { try alice.createTemplate(name: "Meter", values: values) }
        #expect(try alice.latestRecords(templateID: mine.id).map(\.values.first?.text) == ["12.6"])
        #expect(try store.templates().isEmpty, "the admin saw users' templates")
    }

    @Test func templatesAndRecordsFromBeforeOwnersBecomeTheAdminsOnUpgrade() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent(
            "ocr-owners-\(UUID().uuidString).sqlite"
        ).path
        defer { for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) } }
        do {
            // The schema as it was before owners (migrations 1 and 2), with a template, its value and a record.
            let old = try Database(path: path, migrations: Array(OCRSchema.migrations.prefix(2)))
            try old.write { db in
                try db.execute(
                    "INSERT INTO templates (id, name, description, created_ms) VALUES (7, 'Battery', 'shed', 100)")
                try db.execute("INSERT INTO template_values VALUES (7, 0, 'Volts', 'word', 0.5, 0.1, 0.1, 0.05)")
                try db.execute("INSERT INTO records (id, template_id, created_ms) VALUES (3, 7, 200)")
                try db.execute("INSERT INTO record_values VALUES (3, 0, '12.6', 0.9)")
            }
        }
        let store = try TemplateStore(path: path)
        let battery = try store.template(named: "Battery")
        #expect(battery.id == 7 && battery.description == "shed" && battery.values.map(\.name) == ["Volts"])
        #expect(try store.latestRecords(templateID: 7).map(\.values.first?.text) == ["12.6"])
        #expect(try store.owned(by: "alice").templates().isEmpty)
        // The values and records still refer to the rebuilt table: deleting the template cascades to them.
        try store.deleteTemplate(id: 7)
        let left = try store.database.read { db in
            (
                try db.queryOne("SELECT count(*) FROM template_values")?.int(0),
                try db.queryOne("SELECT count(*) FROM records")?.int(0)
            )
        }
        #expect(left.0 == 0 && left.1 == 0)
        #expect(try store.database.read { try $0.queryOne("PRAGMA foreign_key_check") } == nil)
    }
}
