import Foundation
import Storage

/// What an import did.
public struct ImportReport: Sendable, Hashable {
    /// `Record` elements seen (top level and inside correlations).
    public var records = 0
    public var added = 0
    /// Records whose sample was already stored (imported before, or byte-identical records in the file).
    public var duplicates = 0
    /// Records of types the service does not model, by export type (`HKQuantityTypeIdentifierVO2Max`: 3).
    public var skippedTypes: [String: Int] = [:]
    /// Other top-level elements skipped with their children, by name (`Workout`, `ActivitySummary`).
    public var skippedElements: [String: Int] = [:]
    /// Records of a modelled type refused by validation (an implausible value, an unknown unit), with reasons.
    public var rejected = 0
    /// The first rejections, "line N: reason".
    public var rejections: [String] = []
    /// Correlations read (blood pressure: their systolic and diastolic records are imported).
    public var correlations = 0
    /// The export's `ExportDate value`, as written.
    public var exportDate: String?
    /// Conflicts with stored samples (same deterministic UUID, other content): the stored version was kept.
    public var conflicts = 0

    public init() {}
}

/// Imports an Apple Health export (`export.xml`) into a user's samples in one transaction: a malformed file
/// (broken XML, a record without a date, a value that is not a number) imports nothing and the error names
/// its line. The file streams through in 1 MiB chunks; samples are written as they are read.
///
/// Each record becomes a sample with a deterministic UUID (SHA-256 of its type, source, version, device,
/// unit, value, dates and metadata), so importing the same file twice adds nothing, and byte-identical
/// records in the file (sleep, typically) become one sample. The sample keeps the zone it was recorded in:
/// its `HKTimeZone` metadata when that names a zone, else the offset its start date was written with.
public struct HealthExportImporter {
    public let store: HealthStore
    public let user: Int64
    /// How much of the file is read at a time (and how often progress is reported).
    public var chunkSize = 1 << 20

    public init(store: HealthStore, user: Int64) {
        self.store = store
        self.user = user
    }

    /// Imports the file at `path`. `progress` gets the bytes read and the file size after each chunk read
    /// (samples written up to there are not committed before the end).
    public func importFile(atPath path: String, progress: ((Int64, Int64) -> Void)? = nil) throws -> ImportReport {
        guard let file = FileHandle(forReadingAtPath: path) else { throw HealthError.notFound("cannot open \(path)") }
        defer { try? file.close() }
        let size = (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? NSNumber)?.int64Value ?? 0
        let user = self.user
        return try store.database.write { db in
            var writer = try ChangeWriter(db: db, user: user, pulled: false)
            var handler = ExportHandler(writer: writer, limits: store.limits)
            var scanner = XMLScanner(file: file, chunkSize: chunkSize) { read in progress?(read, size) }
            do {
                try scanner.scan(&handler)
            } catch let error as XMLFormatError {
                throw HealthError.invalid("\(path): \(error.description); nothing was imported")
            }
            writer = handler.writer
            try writer.finish()
            return handler.report
        }
    }
}

/// Turns scanner events into samples.
struct ExportHandler: XMLScannerDelegate {
    var writer: ChangeWriter
    let limits: SampleLimits
    var report = ImportReport()
    private var depth = 0
    /// Depth of a skipped subtree's root, while inside one.
    private var skippingFrom: Int?
    private var correlationDepth: Int?
    /// The record being read (its MetadataEntry children come before its end tag).
    private var pending: (attributes: [(String, String)], metadata: [MetadataEntry], line: Int, depth: Int)?

    init(writer: ChangeWriter, limits: SampleLimits) {
        self.writer = writer
        self.limits = limits
    }

    mutating func startElement(_ name: String, attributes: [(String, String)], selfClosing: Bool, line: Int) throws {
        depth += 1
        defer { if selfClosing { depth -= 1 } }
        if skippingFrom != nil { return }
        if depth == 1 {
            guard name == "HealthData" else { throw XMLFormatError(line: line, reason: "the root is <\(name)>, not <HealthData>") }
            return
        }
        if var record = pending {
            if name == "MetadataEntry", depth == record.depth + 1 {
                guard let key = attributes.first(where: { $0.0 == "key" })?.1 else {
                    throw XMLFormatError(line: line, reason: "MetadataEntry without a key")
                }
                record.metadata.append(MetadataEntry(key, attributes.first(where: { $0.0 == "value" })?.1 ?? ""))
                pending = record
            }
            return  // other children of a record (HeartRateVariabilityMetadataList …) are not modelled
        }
        switch name {
        case "Record" where depth == 2 || (correlationDepth.map { depth == $0 + 1 } ?? false):
            pending = (attributes, [], line, depth)
            if selfClosing { try finishRecord() }
        case "Correlation" where depth == 2:
            report.correlations += 1
            if !selfClosing { correlationDepth = depth }
        case "ExportDate" where depth == 2:
            report.exportDate = attributes.first(where: { $0.0 == "value" })?.1
        case "Me" where depth == 2:
            break
        case _ where correlationDepth != nil:
            break  // a correlation's own MetadataEntry
        default:
            report.skippedElements[name, default: 0] += 1
            if !selfClosing { skippingFrom = depth }
        }
    }

    mutating func endElement(_ name: String, line: Int) throws {
        defer { depth -= 1 }
        if let from = skippingFrom {
            if depth == from { skippingFrom = nil }
            return
        }
        if let record = pending, depth == record.depth {
            try finishRecord()
        } else if let correlation = correlationDepth, depth == correlation {
            correlationDepth = nil
        }
    }

    private mutating func finishRecord() throws {
        guard let record = pending else { return }
        pending = nil
        report.records += 1
        var fields: [String: String] = [:]
        for (key, value) in record.attributes { fields[key] = value }
        let line = record.line
        guard let typeName = fields["type"] else { throw XMLFormatError(line: line, reason: "a Record without a type") }
        guard let type = HealthType(healthKitIdentifier: typeName) else {
            report.skippedTypes[typeName, default: 0] += 1
            return
        }
        func date(_ attribute: String) throws -> (EpochMilliseconds, offset: Int) {
            guard let text = fields[attribute] else {
                throw XMLFormatError(line: line, reason: "a \(typeName) record without \(attribute)")
            }
            guard let parsed = Timestamps.parse(Array(text.utf8)) else {
                throw XMLFormatError(line: line, reason: "\(attribute) \"\(text)\" is not a date like 2026-05-01 09:14:23 -0700")
            }
            return parsed
        }
        let (start, offset) = try date("startDate")
        let (end, _) = try date("endDate")
        guard let rawValue = fields["value"] else { throw XMLFormatError(line: line, reason: "a \(typeName) record without a value") }

        var metadata: [MetadataEntry] = []
        if let version = fields["sourceVersion"] { metadata.append(MetadataEntry("HKSourceVersion", version)) }
        if let device = fields["device"] { metadata.append(MetadataEntry("HKDevice", device)) }
        if let created = fields["creationDate"] { metadata.append(MetadataEntry("HKCreationDate", created)) }
        metadata += record.metadata
        let zoneName = record.metadata.first(where: { $0.key == "HKTimeZone" })?.value
        let zone = zoneName.flatMap { TimeZoneName.isValid($0) ? $0 : nil } ?? Self.offsetName(offset)

        let value: Double
        let unit: HealthUnit
        if type.kind == .category {
            guard let stage = SleepValue(name: rawValue) else {
                reject(line, "unknown \(typeName) value \(rawValue)")
                return
            }
            value = Double(stage.rawValue)
            unit = .count
        } else {
            guard let number = Double(rawValue) else {
                throw XMLFormatError(line: line, reason: "value \"\(rawValue)\" is not a number")
            }
            value = number
            do {
                unit = try HealthUnit.parse(fields["unit"] ?? type.canonicalUnit.symbol)
            } catch {
                reject(line, error.message)
                return
            }
        }
        // The identity: every field of the record as written, so identical records share one UUID.
        var identity = typeName
        for key in ["sourceName", "sourceVersion", "device", "unit", "creationDate", "startDate", "endDate", "value"] {
            identity += "\u{1F}" + (fields[key] ?? "")
        }
        for entry in record.metadata { identity += "\u{1E}\(entry.key)\u{1F}\(entry.value)" }
        do {
            let sample = try HealthSample(
                uuid: .named(identity.utf8), type: type, value: value, unit: unit, start: start, end: end,
                source: fields["sourceName"] ?? "unknown", timeZone: zone, metadata: metadata)
            try sample.validate(limits)
            var result = WriteResult()
            try writer.insert(sample, serverWins: false, into: &result)
            report.added += result.added
            report.duplicates += result.duplicates + result.alreadyDeleted
            report.conflicts += result.conflicts.count
        } catch let error as HealthError {
            reject(line, error.message)
        }
    }

    private mutating func reject(_ line: Int, _ reason: String) {
        report.rejected += 1
        if report.rejections.count < 20 { report.rejections.append("line \(line): \(reason)") }
    }

    static func offsetName(_ seconds: Int) -> String {
        let magnitude = abs(seconds) / 60
        let digits = String(magnitude / 60 * 100 + magnitude % 60)
        return (seconds < 0 ? "-" : "+") + String(repeating: "0", count: max(0, 4 - digits.count)) + digits
    }
}
