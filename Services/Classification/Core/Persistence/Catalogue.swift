import Base
import Foundation
import Storage
import TLS

/// A catalogue entry of an app, keyed by label (a breed, a species): what the app shows beside the top prediction.
public struct CatalogueEntry: Sendable, Equatable {
    public var label: String
    public var name: String
    public var localName: String
    /// Free attributes (fur, size, weight, height, colour, life expectancy, country of origin, description) in the
    /// order the app wrote them: it shows them so.
    public var attributes: [Attribute]

    public struct Attribute: Sendable, Equatable, Codable {
        public var key: String
        public var value: String
        public init(_ key: String, _ value: String) {
            self.key = key
            self.value = value
        }
    }

    public init(label: String, name: String, localName: String, attributes: [Attribute] = []) {
        self.label = label
        self.name = name
        self.localName = localName
        self.attributes = attributes
    }

    /// The value of the attribute `key`, if it has one.
    public subscript(attribute key: String) -> String? { attributes.first { $0.key == key }?.value }
}

/// Case- and diacritics-insensitive folding for search and sorting ("Čivava" matches "civava").
func folded(_ text: String) -> String {
    text.folding(options: [.caseInsensitive, .diacriticInsensitive, .widthInsensitive], locale: nil)
}

extension ClassificationStore {
    /// Imports `app`'s entries, replacing those of the app with the same labels; returns how many were written.
    /// Labels must be unique and non-empty (INVALID_ARGUMENT naming the entry).
    @discardableResult
    public func importCatalogue(_ entries: [CatalogueEntry], app: String) throws -> Int {
        try Self.validName(app, "app")
        var seen: [String: Int] = [:]
        for (i, entry) in entries.enumerated() {
            guard !entry.label.isEmpty else { throw ClassificationError.invalid("catalogue[\(i)]: the label is empty") }
            if let first = seen.updateValue(i, forKey: entry.label) {
                throw ClassificationError.invalid(
                    "catalogue[\(i)]: label \"\(entry.label)\" is catalogue[\(first)]'s too")
            }
        }
        return try database.write { db in
            let statement = try db.prepare(
                """
                INSERT OR REPLACE INTO catalogue (app, label, name, local_name, attributes, search) VALUES (?, ?, ?, ?, ?, ?)
                """)
            for entry in entries {
                let text =
                    ([entry.label, entry.name, entry.localName] + entry.attributes.flatMap { [$0.key, $0.value] })
                    .map(folded).joined(separator: "\u{1F}")
                let pairs = entry.attributes.map { [$0.key, $0.value] }
                try statement.execute([
                    app, entry.label, entry.name, entry.localName,
                    String(decoding: try JSONEncoder().encode(pairs), as: UTF8.self), text,
                ])
            }
            return entries.count
        }
    }

    public func catalogueEntry(label: String, app: String) throws -> CatalogueEntry? {
        try database.read { db in
            try db.queryOne(
                "SELECT label, name, local_name, attributes FROM catalogue WHERE app = ? AND label = ?", [app, label]
            ).map(Self.entry)
        }
    }

    /// `app`'s entries whose any field contains the query (folded), sorted by folded local name; all for an empty query.
    public func searchCatalogue(_ query: String, app: String, limit: Int = 100) throws -> [CatalogueEntry] {
        let needle = folded(query.trimmingCharacters(in: .whitespaces))
        let rows = try database.read { db in
            try db.query("SELECT label, name, local_name, attributes, search FROM catalogue WHERE app = ?", [app])
        }
        return rows.filter { needle.isEmpty || ($0.string(4) ?? "").contains(needle) }
            .map(Self.entry)
            .sorted { (folded($0.localName), $0.label) < (folded($1.localName), $1.label) }
            .prefix(max(0, limit)).map { $0 }
    }

    /// A row as an entry: attributes an array of [key, value] in the app's order, or (rows from before migration 7)
    /// an object, in key order as it was kept.
    private static func entry(_ row: Row) -> CatalogueEntry {
        let json = Data((row.string(3) ?? "[]").utf8)
        let attributes: [CatalogueEntry.Attribute] =
            if let pairs = try? JSONDecoder().decode([[String]].self, from: json) {
                pairs.filter { $0.count == 2 }.map { CatalogueEntry.Attribute($0[0], $0[1]) }
            } else {
                ((try? JSONDecoder().decode([String: String].self, from: json)) ?? [:]).sorted { $0.key < $1.key }.map {
                    CatalogueEntry.Attribute($0.key, $0.value)
                }
            }
        return CatalogueEntry(
            label: row.string(0) ?? "", name: row.string(1) ?? "", localName: row.string(2) ?? "",
            attributes: attributes)
    }

    // MARK: Feedback

    /// The dataset feedback photos of a kind go to.
    public static func feedbackDataset(_ kind: ModelHeader.Kind) -> String { "feedback-\(kind.rawValue)" }

    /// The classifier feedback dataset, or nil while no photo has been kept.
    public func feedbackDataset() throws -> Dataset? {
        do { return try dataset(named: Self.feedbackDataset(.classifier)) } catch let error as ClassificationError
            where error.category == .notFound
        {
            return nil
        }
    }

    /// Checks what a feedback says before anything is kept: a label no classifier knows would be a photo every later
    /// `--include-feedback` training refuses, so it is refused here. With `model` named (it must be a classifier),
    /// `label` and `predictedLabel` (when given) must be among its labels; without, `label` must be among some
    /// classifier's. Unknown model NOT_FOUND, the rest INVALID_ARGUMENT naming the labels known.
    public func checkFeedback(label: String, model: String, predictedLabel: String) throws {
        func listed(_ labels: [String]) -> String {
            labels.count <= 20
                ? labels.joined(separator: ", ")
                : labels.prefix(20).joined(separator: ", ") + " and \(labels.count - 20) more"
        }
        if !model.isEmpty {
            let header = try self.model(named: model).header
            guard header.kind == .classifier else {
                throw ClassificationError.invalid(
                    "model: \(model) is a \(header.kind.rawValue); feedback is for classifiers")
            }
            guard header.labels.contains(label) else {
                throw ClassificationError.invalid(
                    "label: model \(model) does not know \"\(label)\" (its labels: \(listed(header.labels)))")
            }
            guard predictedLabel.isEmpty || header.labels.contains(predictedLabel) else {
                throw ClassificationError.invalid(
                    "predicted_label: model \(model) has no label \"\(predictedLabel)\" (its labels: \(listed(header.labels)))"
                )
            }
            return
        }
        guard predictedLabel.isEmpty else {
            throw ClassificationError.invalid("predicted_label: name the model that predicted it")
        }
        let known = Set(try models().filter { $0.header.kind == .classifier }.flatMap(\.header.labels)).sorted()
        guard known.contains(label) else {
            throw ClassificationError.invalid(
                known.isEmpty
                    ? "label: no classifier knows \"\(label)\" (there are no classifiers yet)"
                    : "label: no classifier knows \"\(label)\" (their labels: \(listed(known)))")
        }
    }

    /// One feedback kept: the photo's content hash, the right label, and the model and prediction it corrects or
    /// confirms (empty when not given).
    public struct FeedbackRecord: Sendable, Equatable {
        public var dataset: String
        public var hash: String
        public var label: String
        public var model: String
        public var predictedLabel: String
        public var createdAt: Date
    }

    /// Every feedback kept, oldest first.
    public func feedbackRecords() throws -> [FeedbackRecord] {
        try database.read { db in
            try db.query("SELECT dataset, hash, label, model, predicted_label, created_at FROM feedback ORDER BY id")
                .map { r in
                    FeedbackRecord(
                        dataset: r.string(0) ?? "", hash: r.string(1) ?? "", label: r.string(2) ?? "",
                        model: r.string(3) ?? "",
                        predictedLabel: r.string(4) ?? "", createdAt: Date(timeIntervalSince1970: r.double(5) ?? 0))
                }
        }
    }

    /// Keeps a confirmed or corrected photo under `label` in the classifier feedback dataset, with a record of the
    /// model and prediction it answers — only with the user's consent; without it nothing is stored and nil is
    /// returned. The image must decode. The labels are the caller's to check (`checkFeedback`).
    @discardableResult
    public func recordFeedback(
        image bytes: [UInt8], label: String, consent: Bool, model: String = "", predictedLabel: String = "",
        pixelLimit: Int = RGBImage.defaultPixelLimit
    ) throws -> String? {
        guard consent else { return nil }
        guard !label.isEmpty, !label.contains("/") else {
            throw ClassificationError.invalid("feedback label \"\(label)\" is empty or has a slash")
        }
        let image = try RGBImage.decode(bytes, name: "feedback image", pixelLimit: pixelLimit)
        let hash = SHA256.hex(bytes)
        let name = Self.feedbackDataset(.classifier)
        try storeImages([bytes])
        try database.write { db in
            if try db.queryOne("SELECT 1 FROM datasets WHERE name = ?", [name]) == nil {
                try db.execute(
                    "INSERT INTO datasets (name, kind, labels, created_at) VALUES (?, 'classification', '[]', ?)",
                    [name, Date().timeIntervalSince1970])
            }
            let labelsText = try db.queryOne("SELECT labels FROM datasets WHERE name = ?", [name])?.string(0) ?? "[]"
            var labels = try JSONDecoder().decode([String].self, from: Data(labelsText.utf8))
            try db.execute(imageInsert, imageArguments(hash, bytes))
            // The same photo confirmed again replaces its earlier label.
            try db.execute("DELETE FROM dataset_samples WHERE dataset = ? AND hash = ?", [name, hash])
            if !labels.contains(label) {
                // Labels stay sorted, so sample label indices are rewritten when a new label sorts before others.
                let old = labels
                labels.append(label)
                labels.sort()
                for (oldIndex, oldLabel) in old.enumerated() {
                    try db.execute(
                        "UPDATE dataset_samples SET label = ? WHERE dataset = ? AND label = ?",
                        [-1 - labels.firstIndex(of: oldLabel)!, name, oldIndex])
                }
                try db.execute("UPDATE dataset_samples SET label = -1 - label WHERE dataset = ? AND label < 0", [name])
                try db.execute(
                    "UPDATE datasets SET labels = ? WHERE name = ?",
                    [String(decoding: try JSONEncoder().encode(labels), as: UTF8.self), name])
            }
            let position =
                (try db.queryOne(
                    "SELECT COALESCE(MAX(position), -1) + 1 FROM dataset_samples WHERE dataset = ?", [name])?.int(0))
                ?? 0
            try db.execute(
                """
                INSERT INTO dataset_samples (dataset, position, name, hash, width, height, label, objects)
                VALUES (?, ?, ?, ?, ?, ?, ?, '[]')
                """,
                [
                    name, position, "\(label)/\(hash.prefix(16)).img", hash, image.width, image.height,
                    labels.firstIndex(of: label)!,
                ])
            try db.execute(
                "INSERT INTO feedback (dataset, hash, label, model, predicted_label, created_at) VALUES (?, ?, ?, ?, ?, ?)",
                [name, hash, label, model, predictedLabel, Date().timeIntervalSince1970])
        }
        return name
    }
}
