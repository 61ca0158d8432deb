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

    /// The sample data shipped with the zoo (`Core/SampleData`, a SwiftPM resource): in the resource bundle
    /// SwiftPM puts beside the executable (`Menagerie_ZooCore.resources`), so a binary run from `.build` or
    /// copied together with its bundle finds it wherever the sources are.
    public static var bundledSampleDirectory: URL {
        // `.copy` keeps the directory; the bundle holds nothing else that could be found instead.
        Bundle.module.bundleURL.appendingPathComponent("SampleData")
    }

    /// Indexes the data for answering requests.
    public func snapshot(walkingSpeed: Double = 1.2) -> ZooSnapshot {
        let catalogue = Catalogue(animals: lexicon.animals, mapFeatures: lexicon.mapFeatures, adoptions: adoptions, joins: joins)
        return ZooSnapshot(catalogue: catalogue,
                           router: Router(graph: FootpathGraph(network: network), bounds: bounds, walkingSpeed: walkingSpeed))
    }
}
