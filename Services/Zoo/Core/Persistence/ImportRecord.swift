import Foundation

/// Who started an import.
public enum ImportTrigger: String, Sendable, Codable {
    /// A client sent the files (`gateway zoo import`).
    case client
    /// The service loaded its bundled sample data into an empty database.
    case sampleData = "sample_data"
    /// The refresh schedule fetched the configured sources.
    case schedule
}

/// One import, as recorded in the database's import metadata.
public struct ImportRecord: Sendable, Equatable {
    public var id: Int64
    /// What was imported: file names, URLs or a directory.
    public var source: String
    public var trigger: ImportTrigger
    public var startedAt: Date
    public var finishedAt: Date
    public var succeeded: Bool
    /// Per file: rows imported and skipped (empty when the import failed before parsing completed).
    public var files: [ImportedFile]
    /// Why the import failed; nil when it succeeded.
    public var error: String?
    /// How the lexicon CSV was merged into animals.json's list; nil unless the import carried both.
    public var lexiconMerge: LexiconMergeReport? = nil

    public var rowsImported: Int { files.reduce(0) { $0 + $1.rowsImported } }
    public var rowsSkipped: Int { files.reduce(0) { $0 + $1.skipped.count } }
}

/// How many of each stored thing the database holds.
public struct DataCounts: Sendable, Equatable {
    public var animals = 0
    public var availableAnimals = 0
    public var classes = 0
    public var orders = 0
    public var continents = 0
    public var biotopes = 0
    public var foods = 0
    public var zooHouses = 0
    public var mapLocations = 0
    public var adoptions = 0
    public var footpathNodes = 0
    public var footpathEdges = 0
    /// Animals by the lexicon files they came from (animals.json's entries, the lexicon CSV's rows matched to
    /// them, and the CSV's rows matching none).
    public var lexiconCSVOnly = 0
    public var animalsJSONOnly = 0
    public var bothSources = 0
}

/// The import metadata: what the data is, where it came from, and how the last imports went.
public struct ZooMetadata: Sendable, Equatable {
    public var lastImport: ImportRecord?
    public var lastSuccessfulImport: ImportRecord?
    public var lastFailedImport: ImportRecord?
    public var counts: DataCounts
    /// The kind of file the lexicon came from (`nil` before the first import).
    public var lexiconKind: ZooFileKind?
}
