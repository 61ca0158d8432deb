import Foundation

/// Everything imported from one set of source files, before indexing.
public struct ZooDataSet: Sendable {
    public var lexicon: LexiconImport
    public var adoptions: [Adoption]
    public var network: FootpathNetwork
    public var bounds: MapBounds?
    public var joins: MapJoinTables

    public init(lexicon: LexiconImport, adoptions: [Adoption] = [], network: FootpathNetwork, bounds: MapBounds? = nil,
                joins: MapJoinTables = MapJoinTables()) {
        self.lexicon = lexicon
        self.adoptions = adoptions
        self.network = network
        self.bounds = bounds
        self.joins = joins
    }

    /// The file names the loaders look for (those of the zoo's open data).
    public enum FileName {
        public static let animalsJSON = "animals.json"
        public static let lexiconCSV = "lexikon-zvirat.csv"
        public static let map = "map-metadata.json"
        public static let bounds = "map-bounds.json"
        public static let adoptions = "adopce-zvirat.csv"
        public static let pavilionFixes = "zoo-parts-fixes.csv"
        public static let singularPlural = "singular-plural.csv"
    }

    /// The sample data shipped with the sources (`Services/Zoo/SampleData`), for development and tests.
    public static let bundledSampleDirectory = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("SampleData")

    /// Loads a directory laid out like the open data: the lexicon from `animals.json` (or, when absent,
    /// `lexikon-zvirat.csv` with the map features of nothing), the footpath graph, and the optional
    /// bounds, adoption list and join tables.
    public static func load(directory: URL) throws(ZooError) -> ZooDataSet {
        func read(_ name: String) throws(ZooError) -> Data? {
            let url = directory.appendingPathComponent(name)
            guard FileManager.default.fileExists(atPath: url.path) else { return nil }
            do { return try Data(contentsOf: url) } catch { throw .importFailed(source: name, reason: error.localizedDescription) }
        }
        func text(_ name: String) throws(ZooError) -> String? { try read(name).map { String(decoding: $0, as: UTF8.self) } }

        let lexicon: LexiconImport
        if let json = try read(FileName.animalsJSON) {
            lexicon = try AnimalsJSON.parse(json)
        } else if let csv = try text(FileName.lexiconCSV) {
            lexicon = try LexiconCSV.parse(csv)
        } else {
            throw .importFailed(source: directory.path, reason: "neither \(FileName.animalsJSON) nor \(FileName.lexiconCSV) found")
        }
        guard let map = try read(FileName.map) else {
            throw .importFailed(source: directory.path, reason: "\(FileName.map) not found")
        }
        return ZooDataSet(
            lexicon: lexicon,
            adoptions: try text(FileName.adoptions).map { text throws(ZooError) in try AdoptionCSV.parse(text).adoptions } ?? [],
            network: try FootpathNetwork.parse(map),
            bounds: try read(FileName.bounds).map { data throws(ZooError) in try MapBounds.parse(data) },
            joins: MapJoinTables(pavilionNames: try text(FileName.pavilionFixes).map(MapJoinTables.parsePavilionFixes) ?? [:],
                                 singulars: try text(FileName.singularPlural).map(MapJoinTables.parseSingulars) ?? [:]))
    }

    /// Indexes the data for answering requests.
    public func snapshot(walkingSpeed: Double = 1.2) -> ZooSnapshot {
        let catalogue = Catalogue(animals: lexicon.animals, mapFeatures: lexicon.mapFeatures, adoptions: adoptions, joins: joins)
        return ZooSnapshot(catalogue: catalogue,
                           router: Router(graph: FootpathGraph(network: network), bounds: bounds, walkingSpeed: walkingSpeed))
    }
}
