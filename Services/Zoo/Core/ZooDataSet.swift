import Foundation

/// Everything stored, before indexing: what a snapshot is built from.
public struct ZooDataSet: Sendable {
    public var lexicon: LexiconImport
    public var adoptions: [Adoption]
    public var network: FootpathNetwork
    public var bounds: MapBounds?
    public var joins: MapJoinTables

    public init(
        lexicon: LexiconImport, adoptions: [Adoption] = [], network: FootpathNetwork, bounds: MapBounds? = nil,
        joins: MapJoinTables = MapJoinTables()
    ) {
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

    /// `zoo-parts-fixes.csv` names some footpaths, not buildings ("Papouščí stezka" is a path lined with aviaries):
    /// each becomes a map feature at the path's middle node, so the zoo part it names has a place.
    func namedPaths() -> [MapFeature] {
        let known = Set(lexicon.mapFeatures.map(\.id))
        let positions = Dictionary(network.nodes.map { ($0.id, $0.position) }, uniquingKeysWith: { first, _ in first })
        return network.roads.compactMap { road in
            guard !known.contains(road.id), let name = joins.pavilionNames[road.id],
                let middle = positions[road.nodeIDs[road.nodeIDs.count / 2]]
            else { return nil }
            return MapFeature(
                id: road.id, name: name, isAnimalPen: false, isBuilding: false, singularNames: nil,
                outline: [middle], animalNames: [])
        }
    }

    /// Indexes the data for answering requests.
    public func snapshot(walkingSpeed: Double = 1.2) -> ZooSnapshot {
        let catalogue = Catalogue(
            animals: lexicon.animals, mapFeatures: lexicon.mapFeatures + namedPaths(), adoptions: adoptions,
            joins: joins)
        return ZooSnapshot(
            catalogue: catalogue,
            router: Router(graph: FootpathGraph(network: network), bounds: bounds, walkingSpeed: walkingSpeed))
    }
}
