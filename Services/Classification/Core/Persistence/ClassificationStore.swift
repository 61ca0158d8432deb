import Base
import BlobStore
import Foundation
import Storage
import Synchronization

/// The service's persistence in its SQLite database (shared by replicas): datasets with their images stored once
/// per content hash, models as their container files (so export is the stored bytes, and import is a decode), the
/// catalogue and feedback (Catalogue.swift).
///
/// With a blob store (`blobs`: a dqlite cluster's replicas, whose database goes through Raft) the images and model
/// files are not in the database: their rows keep the content hash (`images.hash`, `models.file_hash`) and an empty
/// `bytes`/`file`, and the bytes are put to the blob store before the row is written and fetched from it by hash
/// when read. Rows with their bytes inline (a single machine's file imported into a cluster) are read as they are.
public final class ClassificationStore: Sendable {
    public let database: Database
    /// Where images and model files go instead of the database (nil: into the database, as on one machine).
    public let blobs: (any BlobStoring)?
    /// Headers of model files kept in the blob store, by hash: a hash's file never changes, so listing the models
    /// reads each file once per process.
    private let headers = Mutex<[String: ModelHeader]>([:])

    public static let migrations = [
        Migration(1, "datasets, images and models") { db in
            try db.executeScript(
                """
                CREATE TABLE images (hash TEXT PRIMARY KEY, bytes BLOB NOT NULL);
                CREATE TABLE datasets (
                    name TEXT PRIMARY KEY, kind TEXT NOT NULL, labels TEXT NOT NULL, created_at REAL NOT NULL);
                CREATE TABLE dataset_samples (
                    dataset TEXT NOT NULL REFERENCES datasets(name) ON DELETE CASCADE,
                    position INTEGER NOT NULL, name TEXT NOT NULL, hash TEXT NOT NULL REFERENCES images(hash),
                    width INTEGER NOT NULL, height INTEGER NOT NULL, label INTEGER NOT NULL, objects TEXT NOT NULL,
                    PRIMARY KEY (dataset, position));
                CREATE INDEX dataset_samples_hash ON dataset_samples(hash);
                CREATE TABLE models (
                    name TEXT PRIMARY KEY, kind TEXT NOT NULL, algorithm TEXT NOT NULL, created_at REAL NOT NULL,
                    size INTEGER NOT NULL, file BLOB NOT NULL);
                CREATE TABLE active_models (
                    kind TEXT PRIMARY KEY, model TEXT NOT NULL REFERENCES models(name) ON DELETE CASCADE);
                """)
        },
        Migration(2, "catalogue") { db in
            try db.executeScript(
                """
                CREATE TABLE catalogue (
                    label TEXT PRIMARY KEY, name TEXT NOT NULL, local_name TEXT NOT NULL, attributes TEXT NOT NULL,
                    search TEXT NOT NULL);
                """)
        },
        // Datasets belong to the user who uploaded them; those from before belong to the admin.
        Migration(3, "dataset owners") { db in
            try db.executeScript("ALTER TABLE datasets ADD COLUMN owner TEXT NOT NULL DEFAULT 'admin';")
        },
        // What a feedback photo was said about: the model that answered and its answer beside the right label, so
        // a model's mistakes can be counted later; the photo itself stays in the feedback dataset.
        Migration(4, "feedback records") { db in
            try db.executeScript(
                """
                CREATE TABLE feedback (
                    id INTEGER PRIMARY KEY AUTOINCREMENT, dataset TEXT NOT NULL, hash TEXT NOT NULL, label TEXT NOT NULL,
                    model TEXT NOT NULL, predicted_label TEXT NOT NULL, created_at REAL NOT NULL);
                CREATE INDEX feedback_model ON feedback(model);
                """)
        },
        // On a cluster a model file lives in the blob store under this hash (its `file` then empty); NULL: in `file`.
        Migration(5, "model files by hash") { db in
            try db.executeScript("ALTER TABLE models ADD COLUMN file_hash TEXT;")
        },
        // Models per app (Deployments.swift): an admin points an app's classifier or detector at a model. Each kind's
        // active model becomes the classifier or detector of the app `default`, so a stack with one model per kind
        // answers as before (a call naming no app takes the only app there is). Deleting the model leaves the app
        // pointing at none (SET NULL), never at whatever is stored later.
        Migration(6, "deployments") { db in
            try db.executeScript(
                """
                CREATE TABLE deployments (
                    app TEXT NOT NULL, kind TEXT NOT NULL, model TEXT REFERENCES models(name) ON DELETE SET NULL,
                    updated_at REAL NOT NULL, PRIMARY KEY (app, kind));
                CREATE INDEX deployments_model ON deployments(model);
                INSERT INTO deployments (app, kind, model, updated_at)
                    SELECT 'default', kind, model, CAST(strftime('%s', 'now') AS REAL) FROM active_models;
                DROP TABLE active_models;
                """)
        },
        // A catalogue per app (the dog app's breeds are not the clover app's), keyed by app and label; the entries
        // from before belong to the app `default`, as the active models did. Attributes keep the order they were
        // imported in (a JSON array of [key, value]; rows from before hold an object, read in key order).
        Migration(7, "catalogue per app") { db in
            try db.executeScript(
                """
                CREATE TABLE app_catalogue (
                    app TEXT NOT NULL, label TEXT NOT NULL, name TEXT NOT NULL, local_name TEXT NOT NULL,
                    attributes TEXT NOT NULL, search TEXT NOT NULL, PRIMARY KEY (app, label));
                INSERT INTO app_catalogue (app, label, name, local_name, attributes, search)
                    SELECT 'default', label, name, local_name, attributes, search FROM catalogue;
                DROP TABLE catalogue;
                ALTER TABLE app_catalogue RENAME TO catalogue;
                """)
        },
    ]

    /// The owner of datasets from before owners existed (the stack's admin).
    public static let formerOwner = "admin"

    public init(database: Database, blobs: (any BlobStoring)? = nil) {
        self.database = database
        self.blobs = blobs
    }

    public convenience init(path: String) throws {
        self.init(database: try Database(path: path, migrations: Self.migrations))
    }

    /// A private store: in memory, or on the database `databases` opens (tests pass the backend they run on); its
    /// payloads in `blobs` when given. On a replicated database it is laid out as on a cluster: the payloads in a blob
    /// store of their own (a fresh temporary directory), so the suites that run on dqlite test that layout too.
    public static func inMemory(
        blobs: (any BlobStoring)? = nil, using databases: DatabaseFactory = .inMemory
    ) throws -> ClassificationStore {
        let database = try databases.open(migrations: migrations)
        var blobs = blobs
        if blobs == nil, database.isReplicated {
            blobs = try BlobStore(
                directory: FileManager.default.temporaryDirectory.appendingPathComponent(
                    "menagerie-blobs-\(UUID().uuidString)"
                ).path)
        }
        return ClassificationStore(database: database, blobs: blobs)
    }

    /// Puts each image into the blob store (when there is one) before the rows naming them are written: a row never
    /// names a blob that was not stored. A failed write leaves unreferenced blobs, which are harmless.
    func storeImages(_ images: some Sequence<[UInt8]>) throws {
        guard let blobs else { return }
        for bytes in images { try blobs.put(bytes) }
    }

    /// The statement that keeps an image's row: its bytes inline, or only its hash when the bytes are in the blob
    /// store (an empty BLOB literal: binding an empty array would bind NULL).
    var imageInsert: String {
        blobs == nil
            ? "INSERT OR IGNORE INTO images (hash, bytes) VALUES (?, ?)"
            : "INSERT OR IGNORE INTO images (hash, bytes) VALUES (?, X'')"
    }

    func imageArguments(_ hash: String, _ bytes: [UInt8]) -> [(any SQLConvertible)?] {
        blobs == nil ? [hash, bytes] : [hash]
    }

    /// The hashes of every payload the rows keep in the blob store (images without inline bytes, model files by
    /// hash): what the blob repair keeps on enough nodes.
    public func blobHashes() throws -> [String] {
        try database.read { db in
            try db.query(
                """
                SELECT hash FROM images WHERE length(bytes) = 0 UNION SELECT file_hash FROM models WHERE file_hash IS NOT NULL
                """
            ).compactMap { $0.string(0) }
        }
    }

    /// An image's bytes: those of its row, or, when the row keeps none, the blob store's.
    func imageBytes(_ hash: String, inline: [UInt8]) throws -> [UInt8] {
        guard inline.isEmpty else { return inline }
        guard let blobs else {
            throw ClassificationError(
                .internal, "image \(hash) is kept in a blob store and this replica has none (run it with --cluster)")
        }
        return try blobs.get(hash)
    }

    // MARK: Datasets

    public struct DatasetSummary: Sendable, Equatable {
        public var name: String
        public var kind: Dataset.Kind
        public var labels: [String]
        public var images: Int
        public var createdAt: Date
    }

    static func validName(_ name: String, _ what: String) throws {
        guard !name.isEmpty, name.count <= 100, !name.contains("/"), name.trimmingCharacters(in: .whitespaces) == name
        else {
            throw ClassificationError.invalid(
                "\(what) name \"\(name)\" must be 1–100 characters without slashes or outer spaces")
        }
    }

    /// Stores a validated dataset of `owner`'s in one transaction: all of it or nothing. Names are unique across
    /// users (a taken one is ALREADY_EXISTS whoever has it); every read below takes `owner` (nil: anyone's), and
    /// another user's dataset is NOT_FOUND, as an unknown one.
    public func saveDataset(_ dataset: Dataset, name: String, owner: String = ClassificationStore.formerOwner) throws {
        try Self.validName(name, "dataset")
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        if blobs != nil {
            // A taken name is refused before its images are sent to other nodes for nothing (and again below).
            guard try database.read({ try $0.queryOne("SELECT 1 FROM datasets WHERE name = ?", [name]) }) == nil else {
                throw ClassificationError(.alreadyExists, "dataset \(name) already exists")
            }
            try storeImages(dataset.images.values)
        }
        try database.write { db in
            guard try db.queryOne("SELECT 1 FROM datasets WHERE name = ?", [name]) == nil else {
                throw ClassificationError(.alreadyExists, "dataset \(name) already exists")
            }
            try db.execute(
                "INSERT INTO datasets (name, kind, labels, created_at, owner) VALUES (?, ?, ?, ?, ?)",
                [
                    name, dataset.kind.rawValue, String(decoding: try encoder.encode(dataset.labels), as: UTF8.self),
                    Date().timeIntervalSince1970, owner,
                ])
            let image = try db.prepare(imageInsert)
            for (hash, bytes) in dataset.images { try image.execute(imageArguments(hash, bytes)) }
            let sample = try db.prepare(
                """
                INSERT INTO dataset_samples (dataset, position, name, hash, width, height, label, objects)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                """)
            for (position, s) in dataset.samples.enumerated() {
                try sample.execute([
                    name, position, s.name, s.hash, s.width, s.height, s.label,
                    String(decoding: try encoder.encode(s.objects), as: UTF8.self),
                ])
            }
        }
    }

    public func dataset(named name: String, owner: String? = nil) throws -> Dataset {
        var dataset = try database.read { db in
            guard
                let row = try db.queryOne(
                    "SELECT kind, labels FROM datasets WHERE name = ?1 AND (?2 IS NULL OR owner = ?2)", [name, owner])
            else {
                throw ClassificationError(.notFound, "no dataset named \(name)")
            }
            let kind = Dataset.Kind(rawValue: row.string(0) ?? "") ?? .classification
            let labels = try JSONDecoder().decode([String].self, from: Data((row.string(1) ?? "[]").utf8))
            var images: [String: [UInt8]] = [:]
            var samples: [Dataset.Sample] = []
            for r in try db.query(
                """
                SELECT s.name, s.hash, s.width, s.height, s.label, s.objects, i.bytes FROM dataset_samples s
                JOIN images i ON i.hash = s.hash WHERE s.dataset = ? ORDER BY s.position
                """, [name])
            {
                let hash = r.string(1) ?? ""
                images[hash] = r.blob(6) ?? []
                samples.append(
                    Dataset.Sample(
                        name: r.string(0) ?? "", hash: hash, width: r.int(2) ?? 0, height: r.int(3) ?? 0,
                        label: r.int(4) ?? 0,
                        objects: try JSONDecoder().decode([Dataset.Object].self, from: Data((r.string(5) ?? "[]").utf8))
                    ))
            }
            return Dataset(kind: kind, labels: labels, samples: samples, images: images)
        }
        // Outside the read: fetching from a peer may take a while.
        for (hash, bytes) in dataset.images where bytes.isEmpty {
            dataset.images[hash] = try imageBytes(hash, inline: bytes)
        }
        return dataset
    }

    public func datasets(owner: String? = nil) throws -> [DatasetSummary] {
        try database.read { db in
            try db.query(
                """
                SELECT d.name, d.kind, d.labels, d.created_at, COUNT(s.position) FROM datasets d
                LEFT JOIN dataset_samples s ON s.dataset = d.name WHERE ?1 IS NULL OR d.owner = ?1 GROUP BY d.name ORDER BY d.name
                """, [owner]
            ).map { r in
                DatasetSummary(
                    name: r.string(0) ?? "", kind: Dataset.Kind(rawValue: r.string(1) ?? "") ?? .classification,
                    labels: (try? JSONDecoder().decode([String].self, from: Data((r.string(2) ?? "[]").utf8))) ?? [],
                    images: r.int(4) ?? 0, createdAt: Date(timeIntervalSince1970: r.double(3) ?? 0))
            }
        }
    }

    /// One dataset's summary, without reading its images.
    public func datasetSummary(named name: String, owner: String? = nil) throws -> DatasetSummary {
        guard let summary = try datasets(owner: owner).first(where: { $0.name == name }) else {
            throw ClassificationError(.notFound, "no dataset named \(name)")
        }
        return summary
    }

    /// Per label: the images showing it and its objects (boxes; 0 for classification), read without the images.
    public func labelCounts(dataset name: String) throws -> [(label: String, images: Int, objects: Int)] {
        let summary = try datasetSummary(named: name)
        let rows = try database.read { db in
            try db.query("SELECT label, objects FROM dataset_samples WHERE dataset = ?", [name]).map {
                ($0.int(0) ?? 0, $0.string(1) ?? "[]")
            }
        }
        var images = [Int](repeating: 0, count: summary.labels.count), objects = images
        for (label, json) in rows {
            if summary.kind == .classification {
                if summary.labels.indices.contains(label) { images[label] += 1 }
                continue
            }
            let boxes = (try? JSONDecoder().decode([Dataset.Object].self, from: Data(json.utf8))) ?? []
            for object in boxes where summary.labels.indices.contains(object.label) { objects[object.label] += 1 }
            for label in Set(boxes.map(\.label)) where summary.labels.indices.contains(label) { images[label] += 1 }
        }
        return summary.labels.indices.map { (summary.labels[$0], images[$0], objects[$0]) }
    }

    /// Deletes a dataset and the images no other dataset uses.
    public func deleteDataset(named name: String, owner: String? = nil) throws {
        try database.write { db in
            try db.execute("DELETE FROM datasets WHERE name = ?1 AND (?2 IS NULL OR owner = ?2)", [name, owner])
            guard db.changes > 0 else { throw ClassificationError(.notFound, "no dataset named \(name)") }
            try db.execute("DELETE FROM images WHERE hash NOT IN (SELECT hash FROM dataset_samples)")
        }
    }

    // MARK: Models

    public struct ModelSummary: Sendable, Equatable {
        public var name: String
        public var header: ModelHeader
        public var size: Int
        public var createdAt: Date
        /// The apps whose classifier or detector it is (Deployments.swift), by name.
        public var apps: [String]
        /// Whether an app serves it.
        public var active: Bool { !apps.isEmpty }
    }

    /// Stores a model file under `name` (replacing none: names are unique). It serves no app until an admin points
    /// one at it (`setDeployment`): a user's training never becomes what an app's callers get.
    public func saveModel(_ file: ModelFile, name: String) throws {
        try Self.validName(name, "model")
        let bytes = try file.encoded()
        let hash: String? = try blobs.map { blobs in
            guard try database.read({ try $0.queryOne("SELECT 1 FROM models WHERE name = ?", [name]) }) == nil else {
                throw ClassificationError(.alreadyExists, "model \(name) already exists")
            }
            return try blobs.put(bytes)
        }
        try database.write { db in
            guard try db.queryOne("SELECT 1 FROM models WHERE name = ?", [name]) == nil else {
                throw ClassificationError(.alreadyExists, "model \(name) already exists")
            }
            if let hash {
                try db.execute(
                    """
                    INSERT INTO models (name, kind, algorithm, created_at, size, file, file_hash) VALUES (?, ?, ?, ?, ?, X'', ?)
                    """,
                    [
                        name, file.header.kind.rawValue, file.header.algorithm, Date().timeIntervalSince1970,
                        bytes.count, hash,
                    ])
            } else {
                try db.execute(
                    "INSERT INTO models (name, kind, algorithm, created_at, size, file) VALUES (?, ?, ?, ?, ?, ?)",
                    [
                        name, file.header.kind.rawValue, file.header.algorithm, Date().timeIntervalSince1970,
                        bytes.count, bytes,
                    ])
            }
        }
    }

    /// The stored container bytes (export).
    public func modelBytes(named name: String) throws -> [UInt8] {
        let (inline, hash) = try database.read { db in
            guard let row = try db.queryOne("SELECT file, file_hash FROM models WHERE name = ?", [name]) else {
                throw ClassificationError(.notFound, "no model named \(name)")
            }
            return (row.blob(0) ?? [], row.string(1))
        }
        return try modelFile(inline: inline, hash: hash, name: name)
    }

    /// A model's container: its row's bytes, or the blob store's of `hash`.
    private func modelFile(inline: [UInt8], hash: String?, name: String) throws -> [UInt8] {
        guard let hash else { return inline }
        guard let blobs else {
            throw ClassificationError(
                .internal, "model \(name) is kept in a blob store and this replica has none (run it with --cluster)")
        }
        return try blobs.get(hash)
    }

    /// The stored container's size in bytes, read without the container (to budget for it first).
    public func modelSize(named name: String) throws -> Int {
        try database.read { db in
            guard let row = try db.queryOne("SELECT size FROM models WHERE name = ?", [name]), let size = row.int(0)
            else {
                throw ClassificationError(.notFound, "no model named \(name)")
            }
            return size
        }
    }

    public func model(named name: String) throws -> ModelFile { try ModelFile.decode(modelBytes(named: name)) }

    /// When the model of that name was stored: a replica's cached copy of a name is stale when this differs (the
    /// model was deleted and another stored under its name, perhaps by another replica).
    public func modelStamp(named name: String) throws -> Double {
        try database.read { db in
            guard let row = try db.queryOne("SELECT created_at FROM models WHERE name = ?", [name]),
                let stamp = row.double(0)
            else {
                throw ClassificationError(.notFound, "no model named \(name)")
            }
            return stamp
        }
    }

    public func models() throws -> [ModelSummary] {
        let rows = try database.read { db in
            try db.query(
                """
                SELECT m.name, m.file, m.size, m.created_at,
                    (SELECT json_group_array(app) FROM (SELECT app FROM deployments WHERE model = m.name ORDER BY app)), m.file_hash
                FROM models m ORDER BY m.name
                """)
        }
        return try rows.map { r in
            let name = r.string(0) ?? ""
            let header: ModelHeader
            if let hash = r.string(5) {
                if let known = headers.withLock({ $0[hash] }) {
                    header = known
                } else {
                    header = try ModelFile.decode(modelFile(inline: [], hash: hash, name: name)).header
                    headers.withLock { $0[hash] = header }
                }
            } else {
                header = try ModelFile.decode(r.blob(1) ?? []).header
            }
            return ModelSummary(
                name: name, header: header, size: r.int(2) ?? 0,
                createdAt: Date(timeIntervalSince1970: r.double(3) ?? 0),
                apps: (try? JSONDecoder().decode([String].self, from: Data((r.string(4) ?? "[]").utf8))) ?? [])
        }
    }

    public func deleteModel(named name: String) throws {
        try database.write { db in
            try db.execute("DELETE FROM models WHERE name = ?", [name])
            guard db.changes > 0 else { throw ClassificationError(.notFound, "no model named \(name)") }
        }
    }

    /// A warning when `dataset` shares images with the datasets `model` was trained on (as they are now; a
    /// deleted one is not looked for): figures on images a model has seen flatter it. Nil when nothing is shared
    /// or the model does not say what it was trained on (imported, or trained before that was kept).
    public func trainingOverlapWarning(model header: ModelHeader, name: String, dataset: Dataset, datasetName: String)
        throws -> String?
    {
        guard let trained = header.trainingDatasets, !trained.isEmpty else { return nil }
        let seen: Set<String> = try database.read { db in
            var hashes = Set<String>()
            for source in trained {
                for row in try db.query("SELECT hash FROM dataset_samples WHERE dataset = ?", [source]) {
                    if let hash = row.string(0) { hashes.insert(hash) }
                }
            }
            return hashes
        }
        let shared = dataset.samples.filter { seen.contains($0.hash) }.count
        guard shared > 0 else { return nil }
        let sources = trained.joined(separator: ", ")
        let what =
            shared == dataset.samples.count
            ? "all \(shared) images" : "\(shared) of the \(dataset.samples.count) images"
        return
            "\(what) of dataset \(datasetName) are in the dataset\(trained.count == 1 ? "" : "s") model \(name) was trained on (\(sources)), "
            + "its held-out share included: figures on images it has seen flatter it; evaluate on images it never saw"
    }
}
