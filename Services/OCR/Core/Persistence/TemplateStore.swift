import Foundation
import Storage

/// Templates and their records in the service's SQLite database (replicas share the file, as zoo's do).
///
/// Templates and their records belong to the user who made them (`owner`): a store sees, changes and deletes
/// only its owner's (`owned(by:)` gives the store of a caller), so another user's template is NOT_FOUND, as an
/// unknown one is, and names are unique per user. Records belong to their template's owner.
///
/// Synchronous: each call is one short transaction. Unknown templates and records are NOT_FOUND, a taken template
/// name ALREADY_EXISTS, bad input INVALID_ARGUMENT; StorageError (busy, locked) passes through.
public struct TemplateStore: Sendable {
    public let database: Database
    /// Whose templates this store sees: the admin's unless `owned(by:)` said otherwise (data from before owners
    /// existed is the admin's).
    public let owner: String
    public static let maxPageSize = 1000
    public static let defaultPageSize = 100
    /// The owner of what was made before owners existed (the stack's admin, `IdentityStore.adminName`).
    public static let formerOwner = "admin"

    public init(database: Database, owner: String = Self.formerOwner) {
        self.database = database
        self.owner = owner
    }

    /// The same database, seen as `owner`'s.
    public func owned(by owner: String) -> TemplateStore { TemplateStore(database: database, owner: owner) }

    /// Opens (creating) the database at `path` with the ocr schema.
    public init(path: String) throws {
        self.init(database: try Database(path: path, migrations: OCRSchema.migrations))
    }

    /// A private store: in memory, or on the database `databases` opens (tests pass the backend they run on).
    public static func inMemory(using databases: DatabaseFactory = .inMemory) throws -> TemplateStore {
        TemplateStore(database: try databases.open(migrations: OCRSchema.migrations))
    }

    // MARK: Templates

    /// Creates a template; with `firstRecord`, the photo's values (in value order) become its first record, checked
    /// as every record is (`TemplateMatcher.checked`): its low-confidence readings are flagged too.
    public func createTemplate(
        name: String, description: String = "", values: [ValueDefinition], firstRecord: [RecordValue]? = nil,
        at date: Date = Date()
    ) throws -> (template: Template, record: Record?) {
        try Template.validate(name: name, description: description, values: values)
        if let firstRecord { try Self.validateRecord(firstRecord, count: values.count) }
        return try database.write { db in
            if try db.queryOne("SELECT 1 FROM templates WHERE name = ? AND owner = ?", [name, owner]) != nil {
                throw OCRError(.alreadyExists, "a template named \"\(name)\" already exists")
            }
            try db.execute(
                "INSERT INTO templates (owner, name, description, created_ms) VALUES (?, ?, ?, ?)",
                [owner, name, description, Self.milliseconds(date)])
            let id = db.lastInsertRowID
            let insert = try db.prepare(
                """
                INSERT INTO template_values (template_id, position, name, level, x, y, width, height, shape, label)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """)
            for (position, value) in values.enumerated() {
                try insert.execute([
                    id, Int64(position), value.name, value.level.rawValue, value.region.x, value.region.y,
                    value.region.width, value.region.height, value.shape, value.label,
                ])
            }
            let template = Template(
                id: id, name: name, description: description, createdAt: Self.date(Self.milliseconds(date)),
                values: values)
            let record = try firstRecord.map {
                try Self.insertRecord($0, template: template, at: date, source: .upload, db)
            }
            return (template, record)
        }
    }

    /// All templates by name.
    public func templates() throws -> [Template] {
        try database.read { db in
            try db.query("SELECT id FROM templates WHERE owner = ? ORDER BY name, id", [owner]).map { row in
                try Self.loadTemplate(id: try row.value(at: 0), owner: owner, db)!
            }
        }
    }

    public func template(id: Int64) throws -> Template {
        try database.read { db in try Self.loadTemplate(id: id, owner: owner, db) }
            ?? { throw Self.unknownTemplate("\(id)") }()
    }

    public func template(named name: String) throws -> Template {
        try database.read { db -> Template? in
            guard let row = try db.queryOne("SELECT id FROM templates WHERE name = ? AND owner = ?", [name, owner])
            else { return nil }
            return try Self.loadTemplate(id: try row.value(at: 0), owner: owner, db)
        } ?? { throw Self.unknownTemplate(name) }()
    }

    /// A template by name, or by id when `reference` is a number no template is named.
    public func template(_ reference: String) throws -> Template {
        do {
            return try template(named: reference)
        } catch let error as OCRError where error.category == .notFound {
            if let id = Int64(reference) { return try template(id: id) }
            throw error
        }
    }

    public func rename(templateID: Int64, to name: String) throws -> Template {
        try updateTemplate(id: templateID, name: name)
    }

    /// Renames values: `renames` maps current names to new ones; the records keep their values.
    public func renameValues(templateID: Int64, _ renames: [String: String]) throws -> Template {
        try updateTemplate(id: templateID, renames: renames)
    }

    /// Changes the name, the description and value names (current → new; the records keep their values) in one
    /// transaction: all or nothing. nil leaves a field as it is.
    public func updateTemplate(
        id templateID: Int64, name: String? = nil, description: String? = nil, renames: [String: String] = [:]
    ) throws -> Template {
        if let name { try Template.validateName(name, what: "template name") }
        if let description {
            try Template.validateLength(description, max: Template.maxDescriptionLength, what: "description")
        }
        return try database.write { db in
            guard var template = try Self.loadTemplate(id: templateID, owner: owner, db) else {
                throw Self.unknownTemplate("\(templateID)")
            }
            if let name {
                if try db.queryOne(
                    "SELECT 1 FROM templates WHERE name = ? AND owner = ? AND id <> ?", [name, owner, templateID])
                    != nil
                {
                    throw OCRError(.alreadyExists, "a template named \"\(name)\" already exists")
                }
                template.name = name
            }
            if let description { template.description = description }
            try db.execute(
                "UPDATE templates SET name = ?, description = ? WHERE id = ?",
                [template.name, template.description, templateID])
            guard !renames.isEmpty else { return template }
            for old in renames.keys.sorted() where !template.values.contains(where: { $0.name == old }) {
                throw OCRError(.notFound, "template \"\(template.name)\" has no value named \"\(old)\"")
            }
            for index in template.values.indices {
                if let new = renames[template.values[index].name] { template.values[index].name = new }
            }
            try Template.validateValueNames(template.values.map(\.name))
            // Two steps, so that swapping two names does not trip the UNIQUE constraint halfway.
            try db.execute("UPDATE template_values SET name = '\u{1}' || position WHERE template_id = ?", [templateID])
            let update = try db.prepare("UPDATE template_values SET name = ? WHERE template_id = ? AND position = ?")
            for (position, value) in template.values.enumerated() {
                try update.execute([value.name, templateID, Int64(position)])
            }
            return template
        }
    }

    /// Deletes a template with all its records.
    public func deleteTemplate(id: Int64) throws {
        try database.write { db in
            try db.execute("DELETE FROM templates WHERE id = ? AND owner = ?", [id, owner])
            if db.changes == 0 { throw Self.unknownTemplate("\(id)") }
        }
    }

    // MARK: Records

    /// Saves a record of `values` (in the template's value order, as many as it has values), dated `date` (from
    /// 1970 to a day from now) that came from `source`.
    public func addRecord(
        templateID: Int64, values: [RecordValue], at date: Date = Date(), dateSource: DateSource = .upload
    ) throws -> Record {
        try DateSource.validate(date)
        return try database.write { db in
            guard let template = try Self.loadTemplate(id: templateID, owner: owner, db) else {
                throw Self.unknownTemplate("\(templateID)")
            }
            try Self.validateRecord(values, count: template.values.count)
            return try Self.insertRecord(values, template: template, at: date, source: dateSource, db)
        }
    }

    /// Corrects a record: `values` maps value names to new texts (saved with confidence 1 and no longer uncertain:
    /// a person typed them);
    /// `date` replaces its date, which then counts as given. A record of another template than `templateID` (when
    /// given) is NOT_FOUND, as an unknown one; a name the template lacks is INVALID_ARGUMENT listing its names.
    public func updateRecord(
        id: Int64, templateID: Int64? = nil, values: [String: String] = [:], date: Date? = nil
    ) throws -> Record {
        if let date { try DateSource.validate(date) }
        return try database.write { db in
            guard
                let row = try db.queryOne(
                    "SELECT template_id FROM records WHERE id = ? AND template_id IN (SELECT id FROM templates WHERE owner = ?)",
                    [id, owner])
            else {
                throw OCRError(.notFound, "no record \(id)")
            }
            let parent: Int64 = try row.value(at: 0)
            if let templateID, templateID != parent {
                throw OCRError(.notFound, "no record \(id) of template \(templateID)")
            }
            guard let template = try Self.loadTemplate(id: parent, owner: owner, db) else {
                throw Self.unknownTemplate("\(parent)")
            }
            // Normalised as stored values are, the typed text kept as the raw; a unit typed replaces the one read.
            let update = try db.prepare(
                """
                INSERT INTO record_values (record_id, position, text, confidence, uncertainty, raw, unit)
                VALUES (?, ?, ?, 1, '', ?, ?)
                ON CONFLICT (record_id, position) DO UPDATE SET text = excluded.text, confidence = 1, uncertainty = '',
                    raw = excluded.raw, unit = CASE WHEN excluded.unit = '' THEN unit ELSE excluded.unit END
                """)
            // The template's first record (made with it, from the photo its shapes were learned from): a value
            // corrected there whose reading taught its shape teaches the corrected one (a first photo's `2~6` for 27.6
            // would otherwise flag every later 27.x as "not the learned #~#").
            let first = try db.queryOne(
                """
                SELECT MIN(records.id) FROM records JOIN templates ON templates.id = records.template_id
                WHERE records.template_id = ? AND records.created_ms = templates.created_ms
                """, [parent])
            let isFirst = try first?.value(at: 0, as: Int64?.self) == id
            let relearn = try db.prepare(
                "UPDATE template_values SET shape = ? WHERE template_id = ? AND position = ? AND shape = ?")
            for (name, text) in values.sorted(by: { $0.key < $1.key }) {
                guard let position = template.values.firstIndex(where: { $0.name == name }) else {
                    let names = template.values.map { "\"\($0.name)\"" }.joined(separator: ", ")
                    throw OCRError.invalid(
                        "template \"\(template.name)\" has no value named \"\(name.prefix(80))\"; its values: \(names)")
                }
                try Template.validateLength(
                    text, max: Template.maxValueTextLength, what: "the text of value \"\(name.prefix(80))\"")
                let (normalised, unit) = ValueText.normalise(text)
                if isFirst,
                    let raw = try db.queryOne(
                        "SELECT raw, text FROM record_values WHERE record_id = ? AND position = ?",
                        [id, Int64(position)]),
                    let shape = ValueShape.relearned(
                        template.values[position].shape, readAs: try raw.value(at: 0, as: String.self),
                        or: try raw.value(at: 1, as: String.self), correctedTo: text)
                {
                    try relearn.execute([shape, parent, Int64(position), template.values[position].shape])
                }
                try update.execute([id, Int64(position), normalised, text, unit])
            }
            if let date {
                try db.execute(
                    "UPDATE records SET created_ms = ?, date_source = ? WHERE id = ?",
                    [Self.milliseconds(date), DateSource.given.rawValue, id])
            }
            guard let updated = try db.queryOne("SELECT id, created_ms, date_source FROM records WHERE id = ?", [id])
            else {
                throw OCRError(.notFound, "no record \(id)")
            }
            return try Self.loadRecord(updated, template: template, db)
        }
    }

    /// The newest `limit` records, newest first.
    public func latestRecords(templateID: Int64, limit: Int = 5) throws -> [Record] {
        try database.read { db in
            guard let template = try Self.loadTemplate(id: templateID, owner: owner, db) else {
                throw Self.unknownTemplate("\(templateID)")
            }
            let rows = try db.query(
                "SELECT id, created_ms, date_source FROM records WHERE template_id = ? ORDER BY created_ms DESC, id DESC LIMIT ?",
                [templateID, Int64(max(0, limit))])
            return try rows.map { try Self.loadRecord($0, template: template, db) }
        }
    }

    /// Records in time order, a page at a time: pass the previous page's `nextPageToken` (nil: from the start) and
    /// stop when it comes back nil. Pages follow the order even while records are added.
    public func records(templateID: Int64, pageSize: Int = defaultPageSize, pageToken: String? = nil) throws
        -> (records: [Record], nextPageToken: String?)
    {
        guard pageSize >= 0, pageSize <= Self.maxPageSize else {
            throw OCRError.invalid("page size must be 1–\(Self.maxPageSize)")
        }
        let size = pageSize == 0 ? Self.defaultPageSize : pageSize
        var after: (Int64, Int64) = (.min, .min)
        if let pageToken, !pageToken.isEmpty {
            let parts = pageToken.split(separator: ":")
            guard parts.count == 2, let ms = Int64(parts[0]), let id = Int64(parts[1]) else {
                throw OCRError.invalid("invalid page token")
            }
            after = (ms, id)
        }
        return try database.read { db in
            guard let template = try Self.loadTemplate(id: templateID, owner: owner, db) else {
                throw Self.unknownTemplate("\(templateID)")
            }
            let rows = try db.query(
                """
                SELECT id, created_ms, date_source FROM records WHERE template_id = ? AND (created_ms, id) > (?, ?)
                ORDER BY created_ms, id LIMIT ?
                """, [templateID, after.0, after.1, Int64(size + 1)])
            let records = try rows.prefix(size).map { try Self.loadRecord($0, template: template, db) }
            let next = rows.count > size ? records.last.map { "\(Self.milliseconds($0.createdAt)):\($0.id)" } : nil
            return (records, next)
        }
    }

    /// Every record of a template in time order (for the CSV export).
    public func allRecords(templateID: Int64) throws -> [Record] {
        var all: [Record] = []
        var token: String?
        repeat {
            let page = try records(templateID: templateID, pageSize: Self.maxPageSize, pageToken: token)
            all += page.records
            token = page.nextPageToken
        } while token != nil
        return all
    }

    public func deleteRecord(id: Int64) throws {
        try database.write { db in
            try db.execute(
                "DELETE FROM records WHERE id = ? AND template_id IN (SELECT id FROM templates WHERE owner = ?)",
                [id, owner])
            if db.changes == 0 { throw OCRError(.notFound, "no record \(id)") }
        }
    }

    /// The CSV export of a template's records (see `RecordsCSV`).
    public func exportCSV(templateID: Int64, format: RecordsCSV.Format = RecordsCSV.Format()) throws -> String {
        let template = try template(id: templateID)
        return RecordsCSV.export(template, records: try allRecords(templateID: templateID), format: format)
    }

    // MARK: Rows

    private static func unknownTemplate(_ reference: String) -> OCRError {
        OCRError(.notFound, "no template \"\(reference)\"")
    }

    private static func validateRecord(_ values: [RecordValue], count: Int) throws {
        guard values.count == count else {
            throw OCRError.invalid("a record of this template has \(count) values, got \(values.count)")
        }
        for value in values {
            try Template.validateLength(
                value.text, max: Template.maxValueTextLength, what: "the text of value \"\(value.name.prefix(80))\"")
            guard (0...1).contains(value.confidence) else {
                throw OCRError.invalid("value \"\(value.name.prefix(80))\" must have a confidence in 0–1")
            }
            try Template.validateLength(
                value.uncertainty, max: Template.maxValueTextLength,
                what: "why value \"\(value.name.prefix(80))\" is uncertain")
            try Template.validateLength(
                value.raw, max: Template.maxValueTextLength, what: "the raw text of value \"\(value.name.prefix(80))\"")
            try Template.validateLength(
                value.unit, max: ValueShape.maxLabelLength, what: "the unit of value \"\(value.name.prefix(80))\"")
        }
    }

    private static func insertRecord(
        _ values: [RecordValue], template: Template, at date: Date, source: DateSource, _ db: Connection
    ) throws -> Record {
        try db.execute(
            "INSERT INTO records (template_id, created_ms, date_source) VALUES (?, ?, ?)",
            [template.id, milliseconds(date), source.rawValue])
        let id = db.lastInsertRowID
        let insert = try db.prepare(
            "INSERT INTO record_values (record_id, position, text, confidence, uncertainty, raw, unit) VALUES (?, ?, ?, ?, ?, ?, ?)"
        )
        // Never stored silently wrong: normalised, and checked as a reading unless it says why it is uncertain.
        let stored = values.map { TemplateMatcher.checked($0.normalised) }
        for (position, value) in stored.enumerated() {
            try insert.execute([
                id, Int64(position), value.text, value.confidence, value.uncertainty, value.raw, value.unit,
            ])
        }
        let named = zip(template.values, stored).map {
            RecordValue(
                name: $0.name, text: $1.text, confidence: $1.confidence, uncertainty: $1.uncertainty, raw: $1.raw,
                unit: $1.unit)
        }
        return Record(
            id: id, templateID: template.id, createdAt: self.date(milliseconds(date)), values: named, dateSource: source
        )
    }

    private static func loadTemplate(id: Int64, owner: String, _ db: Connection) throws -> Template? {
        guard
            let row = try db.queryOne(
                "SELECT name, description, created_ms FROM templates WHERE id = ? AND owner = ?", [id, owner])
        else { return nil }
        let values = try db.query(
            "SELECT name, level, x, y, width, height, shape, label FROM template_values WHERE template_id = ? ORDER BY position",
            [id]
        ).map { value in
            ValueDefinition(
                name: try value.value(at: 0),
                region: NormalizedRect(
                    x: try value.value(at: 2), y: try value.value(at: 3), width: try value.value(at: 4),
                    height: try value.value(at: 5)),
                level: ObservationLevel(rawValue: try value.value(at: 1)) ?? .word, shape: try value.value(at: 6),
                label: try value.value(at: 7))
        }
        return Template(
            id: id, name: try row.value(at: 0), description: try row.value(at: 1),
            createdAt: date(try row.value(at: 2)), values: values)
    }

    private static func loadRecord(_ row: Row, template: Template, _ db: Connection) throws -> Record {
        let id: Int64 = try row.value(at: 0)
        var values = template.values.map { RecordValue(name: $0.name, text: "", confidence: 0) }
        for value in try db.query(
            "SELECT position, text, confidence, uncertainty, raw, unit FROM record_values WHERE record_id = ? ORDER BY position",
            [id])
        {
            let position: Int64 = try value.value(at: 0)
            guard position >= 0, position < values.count else { continue }
            values[Int(position)].text = try value.value(at: 1)
            values[Int(position)].confidence = try value.value(at: 2)
            values[Int(position)].uncertainty = try value.value(at: 3)
            let raw: String = try value.value(at: 4)
            values[Int(position)].raw = raw.isEmpty ? values[Int(position)].text : raw
            values[Int(position)].unit = try value.value(at: 5)
        }
        let source: String = try row.value(at: 2)
        return Record(
            id: id, templateID: template.id, createdAt: date(try row.value(at: 1)), values: values,
            dateSource: DateSource(rawValue: source) ?? .upload)
    }

    static func milliseconds(_ date: Date) -> Int64 { Int64((date.timeIntervalSince1970 * 1000).rounded(.down)) }
    static func date(_ milliseconds: Int64) -> Date { Date(timeIntervalSince1970: Double(milliseconds) / 1000) }
}
