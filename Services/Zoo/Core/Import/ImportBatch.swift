import Foundation

/// The kinds of source file an import accepts. Each kind replaces one part of the stored data.
public enum ZooFileKind: String, Sendable, CaseIterable, Codable {
    /// The open-data lexicon `lexikon-zvirat.csv`: replaces the lexicon (animals, classes, orders, …).
    case lexiconCSV = "lexicon_csv"
    /// The scraped `animals.json`: replaces the map locations and the availability list, and the lexicon
    /// too; with a lexicon CSV in the same import its entries are matched by species (`LexiconUnion`).
    case animalsJSON = "animals_json"
    /// The footpath graph `map-metadata.json`.
    case map
    /// The map's bounding box `map-bounds.json`.
    case bounds
    /// The adoption list `adopce-zvirat.csv`.
    case adoptions
    /// `zoo-parts-fixes.csv`: pavilion names of map buildings.
    case pavilionFixes = "pavilion_fixes"
    /// `singular-plural.csv`: singular forms of the plural names on map enclosures.
    case singularPlural = "singular_plural"

    /// The file name this kind has in the zoo's open data.
    public var fileName: String {
        switch self {
        case .lexiconCSV: "lexikon-zvirat.csv"
        case .animalsJSON: "animals.json"
        case .map: "map-metadata.json"
        case .bounds: "map-bounds.json"
        case .adoptions: "adopce-zvirat.csv"
        case .pavilionFixes: "zoo-parts-fixes.csv"
        case .singularPlural: "singular-plural.csv"
        }
    }

    /// The kind of a file with one of the open data's names.
    public init?(fileName: String) {
        guard let kind = Self.allCases.first(where: { $0.fileName == fileName }) else { return nil }
        self = kind
    }
}

/// One source file handed to an import: its kind, a name for reports, and its bytes.
public struct ZooSourceFile: Sendable {
    public var kind: ZooFileKind
    public var name: String
    public var content: Data

    public init(kind: ZooFileKind, name: String, content: Data) {
        self.kind = kind
        self.name = name
        self.content = content
    }

    /// The files of the open data's names found in `directory` (a lexicon CSV and an animals JSON may both be there).
    public static func directory(_ directory: URL) throws(ZooError) -> [ZooSourceFile] {
        var files: [ZooSourceFile] = []
        for kind in ZooFileKind.allCases {
            let url = directory.appendingPathComponent(kind.fileName)
            guard FileManager.default.fileExists(atPath: url.path) else { continue }
            do {
                files.append(ZooSourceFile(kind: kind, name: url.path, content: try Data(contentsOf: url)))
            } catch {
                throw .importFailed(source: url.path, reason: error.localizedDescription)
            }
        }
        guard !files.isEmpty else { throw .importFailed(source: directory.path, reason: "no zoo data files in it") }
        return files
    }
}

/// What one imported file contributed.
public struct ImportedFile: Sendable, Equatable {
    public var kind: ZooFileKind
    public var name: String
    public var sizeBytes: Int
    /// Records imported (animals, adoptions, footpaths, …).
    public var rowsImported: Int
    /// Rows that were skipped, with row number and reason.
    public var skipped: [SkippedRow]

    public init(kind: ZooFileKind, name: String, sizeBytes: Int, rowsImported: Int, skipped: [SkippedRow]) {
        self.kind = kind
        self.name = name
        self.sizeBytes = sizeBytes
        self.rowsImported = rowsImported
        self.skipped = skipped
    }
}

/// The parsed content of one import: the parts of the data it replaces, each `nil` when not given.
struct ImportBatch: Sendable {
    /// The lexicon and the kind of file it came from.
    var lexicon: (animals: [Animal], kind: ZooFileKind)?
    /// How a lexicon CSV was merged into animals.json's list, when the import carried both.
    var lexiconMerge: LexiconMergeReport?
    var mapFeatures: [MapFeature]?
    /// Normalised Czech name → currently kept, from the animals JSON (decides for a CSV lexicon).
    var availability: [String: Bool]?
    var network: FootpathNetwork?
    var bounds: MapBounds?
    var adoptions: [Adoption]?
    var pavilionNames: [Int64: String]?
    var singulars: [String: [String]]?
    var files: [ImportedFile] = []
    /// animals.json's animals, which a lexicon CSV of the same import is merged into (`LexiconUnion`).
    private var websiteAnimals: [Animal]?

    /// Parses `files` (at most one of each kind). Throws `.importFailed` naming the file that cannot be read
    /// at all; bad rows inside a file are skipped and reported in `files`.
    static func parse(_ files: [ZooSourceFile], progress: (Int) -> Void = { _ in }) throws(ZooError) -> ImportBatch {
        guard !files.isEmpty else { throw .invalidArgument("an import needs at least one file") }
        var kinds = Set<ZooFileKind>()
        for file in files where !kinds.insert(file.kind).inserted {
            throw .invalidArgument("an import takes one file of each kind; \(file.kind.rawValue) was given twice")
        }
        var batch = ImportBatch()
        for (index, file) in files.enumerated() {
            progress(index)
            try batch.add(file, lexiconCSVGiven: kinds.contains(.lexiconCSV))
        }
        if batch.bounds == nil, let network = batch.network { batch.bounds = MapBounds(enclosing: network) }
        if let lexicon = batch.lexicon, lexicon.kind == .lexiconCSV, let website = batch.websiteAnimals {
            let (animals, report) = LexiconUnion.merge(lexicon: lexicon.animals, website: website)
            batch.lexicon = (animals, .lexiconCSV)
            batch.lexiconMerge = report
        }
        return batch
    }

    private mutating func add(_ file: ZooSourceFile, lexiconCSVGiven: Bool) throws(ZooError) {
        guard !file.content.isEmpty else { throw .importFailed(source: file.name, reason: "the file is empty") }
        var text: String { String(decoding: file.content, as: UTF8.self) }
        var imported = 0
        var skipped: [SkippedRow] = []
        switch file.kind {
        case .lexiconCSV:
            let result = try LexiconCSV.parse(text, source: file.name)
            lexicon = (result.animals, .lexiconCSV)
            (imported, skipped) = (result.animals.count, result.skipped)
        case .animalsJSON:
            let result = try AnimalsJSON.parse(file.content, source: file.name)
            if !lexiconCSVGiven { lexicon = (result.animals, .animalsJSON) }
            websiteAnimals = result.animals
            mapFeatures = result.mapFeatures
            var available: [String: Bool] = [:]
            for animal in result.animals {
                let key = TextKey.nameKey(animal.name)
                available[key] = (available[key] ?? false) || animal.isCurrentlyAvailable
            }
            availability = available
            (imported, skipped) = (result.animals.count, result.skipped)
        case .map:
            let parsed = try FootpathNetwork.parse(file.content, source: file.name)
            network = parsed
            imported = parsed.roads.count
        case .bounds:
            bounds = try MapBounds.parse(file.content, source: file.name)
            imported = 1
        case .adoptions:
            let result = try AdoptionCSV.parse(text, source: file.name)
            adoptions = result.adoptions
            (imported, skipped) = (result.adoptions.count, result.skipped)
        case .pavilionFixes:
            let fixes = MapJoinTables.parsePavilionFixes(text)
            pavilionNames = fixes
            imported = fixes.count
        case .singularPlural:
            let table = MapJoinTables.parseSingulars(text)
            singulars = table
            imported = table.count
        }
        // A file that yields nothing (a lexicon of only its header, every row skipped) would replace its part
        // of the data with nothing: the import fails instead and the old data stays.
        guard imported > 0 else {
            let reason =
                skipped.isEmpty
                ? "it holds no records"
                : "none of its \(skipped.count) records could be read (first: row \(skipped[0].row), \(skipped[0].reason))"
            throw .importFailed(source: file.name, reason: reason)
        }
        files.append(
            ImportedFile(
                kind: file.kind, name: file.name, sizeBytes: file.content.count,
                rowsImported: imported, skipped: skipped))
    }
}
