import Base
import Foundation
import Storage

/// A catalogue entry keyed by label (a breed, a species): what the app showed beside the top prediction.
public struct CatalogueEntry: Sendable, Equatable, Codable {
    public var label: String
    public var name: String
    public var localName: String
    /// Free attributes: fur, size, weight, height, colour, life expectancy, country of origin, description.
    public var attributes: [String: String]

    public init(label: String, name: String, localName: String, attributes: [String: String] = [:]) {
        self.label = label; self.name = name; self.localName = localName; self.attributes = attributes
    }

    enum CodingKeys: String, CodingKey { case label, name, localName = "local_name", attributes }

    public init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        label = try c.decode(String.self, forKey: .label)
        name = try c.decodeIfPresent(String.self, forKey: .name) ?? label
        localName = try c.decodeIfPresent(String.self, forKey: .localName) ?? name
        attributes = try c.decodeIfPresent([String: String].self, forKey: .attributes) ?? [:]
    }
}

/// Case- and diacritics-insensitive folding for search and sorting ("Čivava" matches "civava").
func folded(_ text: String) -> String {
    text.folding(options: [.caseInsensitive, .diacriticInsensitive, .widthInsensitive], locale: nil)
}

extension ClassificationStore {
    /// Parses a JSON array of entries (`label` required; `name`, `local_name`, `attributes` optional), naming the
    /// index of a bad one.
    public static func parseCatalogue(_ json: [UInt8]) throws -> [CatalogueEntry] {
        do {
            let entries = try JSONDecoder().decode([CatalogueEntry].self, from: Data(json))
            for (i, entry) in entries.enumerated() where entry.label.isEmpty {
                throw ClassificationError.invalid("catalogue[\(i)].label is empty")
            }
            return entries
        } catch let error as ClassificationError {
            throw error
        } catch let DecodingError.keyNotFound(key, context) {
            throw ClassificationError.invalid("catalogue\(path(context.codingPath)).\(key.stringValue): missing")
        } catch let DecodingError.typeMismatch(_, context) {
            throw ClassificationError.invalid("catalogue\(path(context.codingPath)): wrong type (\(context.debugDescription))")
        } catch {
            throw ClassificationError.invalid("catalogue: malformed JSON (\(error.localizedDescription))")
        }
    }

    private static func path(_ keys: [CodingKey]) -> String {
        keys.map { $0.intValue.map { "[\($0)]" } ?? ".\($0.stringValue)" }.joined()
    }

    /// Imports entries, replacing those with the same labels; returns how many were written.
    @discardableResult
    public func importCatalogue(_ entries: [CatalogueEntry]) throws -> Int {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        return try database.write { db in
            let statement = try db.prepare("""
                INSERT OR REPLACE INTO catalogue (label, name, local_name, attributes, search) VALUES (?, ?, ?, ?, ?)
                """)
            for entry in entries {
                let text = ([entry.label, entry.name, entry.localName] + entry.attributes.keys + entry.attributes.values)
                    .map(folded).joined(separator: "\u{1F}")
                try statement.execute([entry.label, entry.name, entry.localName,
                                       String(decoding: try encoder.encode(entry.attributes), as: UTF8.self), text])
            }
            return entries.count
        }
    }

    public func catalogueEntry(label: String) throws -> CatalogueEntry? {
        try database.read { db in
            try db.queryOne("SELECT label, name, local_name, attributes FROM catalogue WHERE label = ?", [label]).map(Self.entry)
        }
    }

    /// Entries whose any field contains the query (folded), sorted by folded local name; all for an empty query.
    public func searchCatalogue(_ query: String, limit: Int = 100) throws -> [CatalogueEntry] {
        let needle = folded(query.trimmingCharacters(in: .whitespaces))
        let rows = try database.read { db in
            try db.query("SELECT label, name, local_name, attributes, search FROM catalogue")
        }
        return rows.filter { needle.isEmpty || ($0.string(4) ?? "").contains(needle) }
            .map(Self.entry)
            .sorted { (folded($0.localName), $0.label) < (folded($1.localName), $1.label) }
            .prefix(max(0, limit)).map { $0 }
    }

    private static func entry(_ row: Row) -> CatalogueEntry {
        CatalogueEntry(label: row.string(0) ?? "", name: row.string(1) ?? "", localName: row.string(2) ?? "",
                       attributes: (try? JSONDecoder().decode([String: String].self, from: Data((row.string(3) ?? "{}").utf8))) ?? [:])
    }

    // MARK: Feedback

    /// The dataset feedback photos of a kind go to.
    public static func feedbackDataset(_ kind: ModelHeader.Kind) -> String { "feedback-\(kind.rawValue)" }

    /// The classifier feedback dataset, or nil while no photo has been kept.
    public func feedbackDataset() throws -> Dataset? {
        do { return try dataset(named: Self.feedbackDataset(.classifier)) } catch let error as ClassificationError where error.category == .notFound {
            return nil
        }
    }

    /// Checks what a feedback says before anything is kept: a label no classifier knows would be a photo every later
    /// `--include-feedback` training refuses, so it is refused here. With `model` named (it must be a classifier),
    /// `label` and `predictedLabel` (when given) must be among its labels; without, `label` must be among some
    /// classifier's. Unknown model NOT_FOUND, the rest INVALID_ARGUMENT naming the labels known.
    public func checkFeedback(label: String, model: String, predictedLabel: String) throws {
        func listed(_ labels: [String]) -> String {
            labels.count <= 20 ? labels.joined(separator: ", ") : labels.prefix(20).joined(separator: ", ") + " and \(labels.count - 20) more"
        }
        if !model.isEmpty {
            let header = try self.model(named: model).header
            guard header.kind == .classifier else {
                throw ClassificationError.invalid("model: \(model) is a \(header.kind.rawValue); feedback is for classifiers")
            }
            guard header.labels.contains(label) else {
                throw ClassificationError.invalid("label: model \(model) does not know \"\(label)\" (its labels: \(listed(header.labels)))")
            }
            guard predictedLabel.isEmpty || header.labels.contains(predictedLabel) else {
                throw ClassificationError.invalid("predicted_label: model \(model) has no label \"\(predictedLabel)\" (its labels: \(listed(header.labels)))")
            }
            return
        }
        guard predictedLabel.isEmpty else {
            throw ClassificationError.invalid("predicted_label: name the model that predicted it")
        }
        let known = Set(try models().filter { $0.header.kind == .classifier }.flatMap(\.header.labels)).sorted()
        guard known.contains(label) else {
            throw ClassificationError.invalid(known.isEmpty
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
            try db.query("SELECT dataset, hash, label, model, predicted_label, created_at FROM feedback ORDER BY id").map { r in
                FeedbackRecord(dataset: r.string(0) ?? "", hash: r.string(1) ?? "", label: r.string(2) ?? "", model: r.string(3) ?? "",
                               predictedLabel: r.string(4) ?? "", createdAt: Date(timeIntervalSince1970: r.double(5) ?? 0))
            }
        }
    }

    /// Keeps a confirmed or corrected photo under `label` in the classifier feedback dataset, with a record of the
    /// model and prediction it answers — only with the user's consent; without it nothing is stored and nil is
    /// returned. The image must decode. The labels are the caller's to check (`checkFeedback`).
    @discardableResult
    public func recordFeedback(image bytes: [UInt8], label: String, consent: Bool, model: String = "", predictedLabel: String = "",
                               pixelLimit: Int = RGBImage.defaultPixelLimit) throws -> String? {
        guard consent else { return nil }
        guard !label.isEmpty, !label.contains("/") else { throw ClassificationError.invalid("feedback label \"\(label)\" is empty or has a slash") }
        let image = try RGBImage.decode(bytes, name: "feedback image", pixelLimit: pixelLimit)
        let hash = SHA256.hex(bytes)
        let name = Self.feedbackDataset(.classifier)
        try storeImages([bytes])
        try database.write { db in
            if try db.queryOne("SELECT 1 FROM datasets WHERE name = ?", [name]) == nil {
                try db.execute("INSERT INTO datasets (name, kind, labels, created_at) VALUES (?, 'classification', '[]', ?)",
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
                    try db.execute("UPDATE dataset_samples SET label = ? WHERE dataset = ? AND label = ?",
                                   [-1 - labels.firstIndex(of: oldLabel)!, name, oldIndex])
                }
                try db.execute("UPDATE dataset_samples SET label = -1 - label WHERE dataset = ? AND label < 0", [name])
                try db.execute("UPDATE datasets SET labels = ? WHERE name = ?",
                               [String(decoding: try JSONEncoder().encode(labels), as: UTF8.self), name])
            }
            let position = (try db.queryOne("SELECT COALESCE(MAX(position), -1) + 1 FROM dataset_samples WHERE dataset = ?", [name])?.int(0)) ?? 0
            try db.execute("""
                INSERT INTO dataset_samples (dataset, position, name, hash, width, height, label, objects)
                VALUES (?, ?, ?, ?, ?, ?, ?, '[]')
                """, [name, position, "\(label)/\(hash.prefix(16)).img", hash, image.width, image.height, labels.firstIndex(of: label)!])
            try db.execute("INSERT INTO feedback (dataset, hash, label, model, predicted_label, created_at) VALUES (?, ?, ?, ?, ?, ?)",
                           [name, hash, label, model, predictedLabel, Date().timeIntervalSince1970])
        }
        return name
    }
}
