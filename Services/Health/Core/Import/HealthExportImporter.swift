import Foundation
import Storage
import Zip

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

    mutating func reject(_ line: Int, _ reason: String) {
        rejected += 1
        if rejections.count < 20 { rejections.append("line \(line): \(reason)") }
    }
}

/// A start tag's attributes by name: a record has about ten, so a linear search beats hashing them into a
/// dictionary, a million times over.
struct Attributes {
    let pairs: [(String, String)]
    init(_ pairs: [(String, String)]) { self.pairs = pairs }
    subscript(name: String) -> String? {
        for (key, value) in pairs where key == name { return value }
        return nil
    }
}

/// Imports an Apple Health export (`export.xml`) into a user's samples in one transaction: a malformed file
/// (broken XML, a record without a date, a value that is not a number) imports nothing and the error names
/// its line. The file streams through in 1 MiB chunks.
///
/// Two threads share the work, as two cores can: one reads and parses the file and makes each record a
/// validated sample, the calling thread writes them, a batch at a time. At most `batchesInFlight` batches wait
/// between the two, so a file of several GB never sits in memory; either side's error stops the other, and the
/// transaction is rolled back.
///
/// Each record becomes a sample with a deterministic UUID (SHA-256 of its type, source, version, device,
/// unit, value, dates and metadata), so importing the same file twice adds nothing, and byte-identical
/// records in the file (sleep, typically) become one sample. The sample keeps the zone it was recorded in:
/// its `HKTimeZone` metadata when that names a zone, else the offset its start date was written with.
public struct HealthExportImporter {
    public let store: HealthStore
    public let user: Int64
    /// How much of the file is read at a time.
    public var chunkSize = 1 << 20
    /// Samples handed from the parser to the writer at a time.
    public var batchSize = 2048
    /// Batches parsed ahead of the writer, at most.
    public var batchesInFlight = 8
    /// What a zip may declare before it is refused unread.
    public var zipLimits = ZipLimits.standard

    public init(store: HealthStore, user: Int64) {
        self.store = store
        self.user = user
    }

    /// Imports the file at `path`. `progress` gets the bytes whose records are written and the file size
    /// after each batch (nothing is committed before the end).
    ///
    /// A zip (the Health app's `export.zip`) is read directly: its `apple_health_export/export.xml` is inflated
    /// as it is parsed, after every entry's declared size was checked against `zipLimits`; the rest of the zip
    /// (`export_cda.xml`, workout routes, ECGs) is not modelled and is left alone. Progress then counts the
    /// inflated bytes of export.xml.
    /// The shared zip reader's errors as the import's own, with their category.
    private static func healthErrors<T>(_ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let error as ZipError {
            throw HealthError(error.category, error.message)
        }
    }

    public func importFile(atPath path: String, progress: ((Int64, Int64) -> Void)? = nil) throws -> ImportReport {
        guard FileManager.default.isReadableFile(atPath: path), let file = FileHandle(forReadingAtPath: path) else {
            throw HealthError.notFound("cannot open \(path)")
        }
        var size = (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? NSNumber)?.int64Value ?? 0
        var read: @Sendable (Int) throws -> Data = { try file.read(upToCount: $0) ?? Data() }
        var source = path
        if ZipArchive.isZip(atPath: path) {
            let (archive, entry, reader) = try Self.healthErrors {
                let archive = try ZipArchive(path: path, limits: zipLimits)
                let entry = try archive.exportXML()
                return (archive, entry, UncheckedBox(try archive.reader(for: entry)))
            }
            _ = archive
            size = Int64(entry.size)
            read = { size in try Self.healthErrors { try reader.value.read(upTo: size) } }
            source = "\(path): \(entry.name)"
        }
        let user = self.user
        let handoff = SampleHandoff(capacity: batchesInFlight)
        let parser = ExportParser(
            read: read, chunkSize: chunkSize, batchSize: batchSize, limits: store.limits, handoff: handoff)
        return try store.database.write { db in
            var writer = try ChangeWriter(db: db, user: user, pulled: false)
            let thread = Thread { parser.run() }
            thread.name = "health-import-parser"
            thread.start()
            // However this ends, the parser stops and is waited for before the transaction ends.
            defer {
                handoff.cancel()
                handoff.waitUntilParserEnded()
                try? file.close()
            }
            var (added, duplicates, conflicts) = (0, 0, 0)
            var rejected: [(line: Int, reason: String)] = []
            while let batch = handoff.next() {
                for (sample, line) in zip(batch.samples, batch.lines) {
                    var result = WriteResult()
                    do {
                        try writer.insert(sample, serverWins: false, into: &result)
                    } catch let error as HealthError {
                        rejected.append((line, error.message))
                    }
                    added += result.added
                    duplicates += result.duplicates + result.alreadyDeleted
                    conflicts += result.conflictCount
                }
                progress?(batch.bytesRead, size)
            }
            progress?(handoff.bytesRead, size)
            var report: ImportReport
            switch handoff.outcome {
            case .success(let parsed): report = parsed
            case .failure(let error as XMLFormatError):
                throw HealthError.invalid("\(source): \(error.description); nothing was imported")
            case .failure(let error): throw error
            case nil: throw HealthError.invalid("\(path): the import stopped before the end of the file")
            }
            try writer.finish()
            report.added = added
            report.duplicates = duplicates
            report.conflicts = conflicts
            for (line, reason) in rejected { report.reject(line, reason) }
            return report
        }
    }
}

/// Samples parsed from the file, with the line of each record and how far the file had been read.
struct ParsedBatch: Sendable {
    var samples: [HealthSample] = []
    var lines: [Int] = []
    var bytesRead: Int64 = 0
}

/// The queue between the parser thread and the writer: bounded, so the parser waits while the writer is
/// `capacity` batches behind, and cancellable from the writer's side (its error, or the end of the import).
final class SampleHandoff: @unchecked Sendable {
    private let condition = NSCondition()
    private let capacity: Int
    private var queue: [ParsedBatch] = []
    private var cancelled = false
    private var parserEnded = false
    /// The parser's result once it ended: its report, or why it stopped.
    private var result: Result<ImportReport, any Error>?
    /// How far the parser has read the file: written by the parser, read by the writer from batches and,
    /// once the parser ended, from here.
    var bytesRead: Int64 = 0

    init(capacity: Int) { self.capacity = max(1, capacity) }

    /// Parser side: queues a batch, waiting for room; false when the writer gave up (stop parsing).
    func put(_ batch: ParsedBatch) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        while queue.count >= capacity, !cancelled { condition.wait() }
        guard !cancelled else { return false }
        queue.append(batch)
        condition.broadcast()
        return true
    }

    /// Parser side, last: how parsing ended.
    func finish(_ outcome: Result<ImportReport, any Error>) {
        condition.lock()
        result = outcome
        parserEnded = true
        condition.broadcast()
        condition.unlock()
    }

    /// Writer side: the next batch; nil once the parser ended and everything was taken, or at once when it
    /// failed (the import will be rolled back, so what it queued before need not be written).
    func next() -> ParsedBatch? {
        condition.lock()
        defer { condition.unlock() }
        while queue.isEmpty, !parserEnded { condition.wait() }
        if case .failure = result { return nil }
        guard !queue.isEmpty else { return nil }
        let batch = queue.removeFirst()
        condition.broadcast()
        return batch
    }

    var outcome: Result<ImportReport, any Error>? {
        condition.lock()
        defer { condition.unlock() }
        return result
    }

    /// Writer side: stop the parser at its next batch.
    func cancel() {
        condition.lock()
        cancelled = true
        queue.removeAll()
        condition.broadcast()
        condition.unlock()
    }

    var isCancelled: Bool {
        condition.lock()
        defer { condition.unlock() }
        return cancelled
    }

    func waitUntilParserEnded() {
        condition.lock()
        while !parserEnded { condition.wait() }
        condition.unlock()
    }
}

/// The parser thread's work: scans the file and hands validated samples over in batches.
struct ExportParser: @unchecked Sendable {
    // The file (or zip entry) is read by this thread alone until the writer, after waiting for it, closes it.
    let read: @Sendable (Int) throws -> Data
    let chunkSize: Int
    let batchSize: Int
    let limits: SampleLimits
    let handoff: SampleHandoff

    func run() {
        let outcome: Result<ImportReport, any Error>
        do {
            var handler = ExportHandler(limits: limits, batchSize: batchSize, handoff: handoff)
            var scanner = XMLScanner(read: read, chunkSize: chunkSize) { [handoff] read in handoff.bytesRead = read }
            try scanner.scan(&handler)
            try handler.flush()
            outcome = .success(handler.report)
        } catch {
            outcome = .failure(error)
        }
        handoff.finish(outcome)
    }
}

/// The writer gave up; the parser stops quietly.
struct ImportCancelled: Error {}

/// Turns scanner events into samples.
struct ExportHandler: XMLScannerDelegate {
    let limits: SampleLimits
    let batchSize: Int
    let handoff: SampleHandoff
    var report = ImportReport()
    /// Samples made since the last handoff.
    private(set) var batch = ParsedBatch()
    private var depth = 0
    /// Elements seen since the last look at whether the writer gave up.
    private var sinceCancelCheck = 0
    /// Depth of a skipped subtree's root, while inside one.
    private var skippingFrom: Int?
    private var correlationDepth: Int?
    /// The record being read (its MetadataEntry children come before its end tag).
    private var pending: (attributes: [(String, String)], metadata: [MetadataEntry], line: Int, depth: Int)?

    init(limits: SampleLimits, batchSize: Int, handoff: SampleHandoff) {
        self.limits = limits
        self.batchSize = batchSize
        self.handoff = handoff
    }

    /// Hands the samples made so far to the writer.
    mutating func flush() throws {
        guard !batch.samples.isEmpty else { return }
        batch.bytesRead = handoff.bytesRead
        guard handoff.put(batch) else { throw ImportCancelled() }
        batch = ParsedBatch()
        batch.samples.reserveCapacity(batchSize)
        batch.lines.reserveCapacity(batchSize)
    }

    mutating func startElement(_ name: String, attributes: [(String, String)], selfClosing: Bool, line: Int) throws {
        sinceCancelCheck += 1
        if sinceCancelCheck == 4096 {
            // A long stretch without records (workouts, say) still stops soon after the writer gave up.
            sinceCancelCheck = 0
            if handoff.isCancelled { throw ImportCancelled() }
        }
        depth += 1
        defer { if selfClosing { depth -= 1 } }
        if skippingFrom != nil { return }
        if depth == 1 {
            guard name == "HealthData" else {
                throw XMLFormatError(line: line, reason: "the root is <\(name)>, not <HealthData>")
            }
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
        let fields = Attributes(record.attributes)
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
                throw XMLFormatError(
                    line: line, reason: "\(attribute) \"\(text)\" is not a date like 2026-05-01 09:14:23 -0700")
            }
            return parsed
        }
        let (start, offset) = try date("startDate")
        let (end, _) = try date("endDate")
        guard let rawValue = fields["value"] else {
            throw XMLFormatError(line: line, reason: "a \(typeName) record without a value")
        }

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
        var identity: [UInt8] = []
        identity.reserveCapacity(512)
        identity += typeName.utf8
        for key in Self.identityKeys {
            identity.append(0x1F)
            if let value = fields[key] { identity += value.utf8 }
        }
        for entry in record.metadata {
            identity.append(0x1E)
            identity += entry.key.utf8
            identity.append(0x1F)
            identity += entry.value.utf8
        }
        do {
            let sample = try HealthSample(
                uuid: .named(identity), type: type, value: value, unit: unit, start: start, end: end,
                source: fields["sourceName"] ?? "unknown", timeZone: zone, metadata: metadata)
            try sample.validate(limits)
            batch.samples.append(sample)
            batch.lines.append(line)
            if batch.samples.count >= batchSize { try flush() }
        } catch let error as HealthError {
            report.reject(line, error.message)
        }
    }

    private static let identityKeys = [
        "sourceName", "sourceVersion", "device", "unit", "creationDate", "startDate", "endDate", "value",
    ]

    private mutating func reject(_ line: Int, _ reason: String) { report.reject(line, reason) }

    static func offsetName(_ seconds: Int) -> String {
        let magnitude = abs(seconds) / 60
        let digits = String(magnitude / 60 * 100 + magnitude % 60)
        return (seconds < 0 ? "-" : "+") + String(repeating: "0", count: max(0, 4 - digits.count)) + digits
    }
}

/// Hands a value that one thread at a time uses (the zip reader, used by the parser thread alone) to a
/// `@Sendable` closure.
final class UncheckedBox<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}
