import Foundation

/// Everything stored, before indexing: what a snapshot is built from.
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

    /// The sample data shipped with the sources (`Services/Zoo/SampleData`), for development and tests.
    public static let bundledSampleDirectory = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("SampleData")

    /// Indexes the data for answering requests.
    public func snapshot(walkingSpeed: Double = 1.2) -> ZooSnapshot {
        let catalogue = Catalogue(animals: lexicon.animals, mapFeatures: lexicon.mapFeatures, adoptions: adoptions, joins: joins)
        return ZooSnapshot(catalogue: catalogue,
                           router: Router(graph: FootpathGraph(network: network), bounds: bounds, walkingSpeed: walkingSpeed))
    }
}
