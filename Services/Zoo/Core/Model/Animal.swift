/// A WGS84 position.
public struct GeoPoint: Sendable, Hashable, Codable {
    public var lat: Double
    public var lon: Double

    public init(lat: Double, lon: Double) {
        self.lat = lat
        self.lon = lon
    }
}

/// A taxonomic rank value with its Czech and Latin names, e.g. "Savci (Mammalia)".
public struct Taxon: Sendable, Hashable, Codable {
    public var czech: String
    public var latin: String?

    public init(czech: String, latin: String?) {
        self.czech = czech
        self.latin = latin
    }

    /// Splits "Czech (Latin)" into its parts; a value without a parenthesised Latin name is all Czech.
    /// Returns `nil` for an empty value.
    public init?(combined raw: String?) {
        guard let value = TextKey.cleanValue(raw) else { return nil }
        if value.hasSuffix(")"), let open = value.lastIndex(of: "(") {
            let czech = TextKey.collapseWhitespace(String(value[..<open]))
            let latin = TextKey.collapseWhitespace(
                String(value[value.index(after: open)..<value.index(before: value.endIndex)]))
            if !czech.isEmpty && !latin.isEmpty {
                self.init(czech: czech, latin: latin)
                return
            }
        }
        self.init(czech: value, latin: nil)
    }
}

/// The zoo's adoption offer for an animal (from the adoption list).
public struct Adoption: Sendable, Hashable, Codable {
    public var czechName: String
    public var englishName: String?
    public var className: String?
    /// Adoption price in CZK.
    public var priceCZK: Int?
    /// Whether the animal can be visited.
    public var visitable: Bool

    public init(czechName: String, englishName: String?, className: String?, priceCZK: Int?, visitable: Bool) {
        self.czechName = czechName
        self.englishName = englishName
        self.className = className
        self.priceCZK = priceCZK
        self.visitable = visitable
    }
}

/// A feature of the zoo map (an enclosure point or a building/pen polygon) from OpenStreetMap.
public struct MapFeature: Sendable, Hashable, Codable {
    /// OpenStreetMap id.
    public var id: Int64
    public var name: String
    public var isAnimalPen: Bool
    public var isBuilding: Bool
    /// Singular animal names shown at the feature ("lvi" → ["lev"]); nil when the source gave none (animals.json leaves
    /// the key out for 255 of its locations, which the zoo app's server answers as `null`), apart from an empty list.
    public var singularNames: [String]?
    /// The outline for polygons, a single point for points.
    public var outline: [GeoPoint]
    /// Czech names of the animals the source explicitly placed at this feature.
    public var animalNames: [String]

    public init(
        id: Int64, name: String, isAnimalPen: Bool, isBuilding: Bool, singularNames: [String]?,
        outline: [GeoPoint], animalNames: [String]
    ) {
        self.id = id
        self.name = name
        self.isAnimalPen = isAnimalPen
        self.isBuilding = isBuilding
        self.singularNames = singularNames
        self.outline = outline
        self.animalNames = animalNames
    }

    /// The point used for routing: the point itself, or the vertex average of a polygon.
    public var anchor: GeoPoint {
        var ring = outline
        if ring.count > 1, ring.first == ring.last { ring.removeLast() }
        guard !ring.isEmpty else { return GeoPoint(lat: .nan, lon: .nan) }
        let lat = ring.reduce(0) { $0 + $1.lat } / Double(ring.count)
        let lon = ring.reduce(0) { $0 + $1.lon } / Double(ring.count)
        return GeoPoint(lat: lat, lon: lon)
    }
}

/// One animal of the lexicon with every attribute the sources provide.
public struct Animal: Sendable, Hashable, Codable, Identifiable {
    public var id: Int
    /// Czech name.
    public var name: String
    /// Other Czech names it is known by: the lexicon CSV's, where it names the species otherwise ("Levhart
    /// obláčkový" for the website's "Pardál obláčkový"). Searched like the name.
    public var otherNames: [String]
    public var latinName: String?
    /// English name (from the adoption list).
    public var englishName: String?
    public var taxonClass: Taxon?
    public var order: Taxon?
    public var continents: [String]
    /// Where the animal lives in the wild.
    public var range: String?
    public var biotopes: [String]
    public var biotopeDetail: String?
    public var foods: [String]
    public var foodDetail: String?
    public var description: String?
    public var proportions: String?
    public var reproduction: String?
    public var interestingFacts: String?
    /// Conservation projects the zoo runs for the species.
    public var projects: String?
    /// The history of breeding in the Prague Zoo.
    public var breeding: String?
    /// The pavilion or part of the zoo where the animal lives.
    public var location: String?
    public var locationURL: String?
    public var imageURL: String?
    public var imageAlt: String?
    public var isCurrentlyAvailable: Bool
    /// Adoption offer, joined from the adoption list by normalised Czech name.
    public var adoption: Adoption?
    /// OpenStreetMap ids of the map features where the animal can be seen.
    public var mapFeatureIDs: [Int64]
    /// The files its record came from: the lexicon CSV, animals.json, or both (the same id in each).
    public var sources: [ZooFileKind]

    public init(
        id: Int, name: String, otherNames: [String] = [], latinName: String? = nil, englishName: String? = nil,
        taxonClass: Taxon? = nil,
        order: Taxon? = nil, continents: [String] = [], range: String? = nil, biotopes: [String] = [],
        biotopeDetail: String? = nil, foods: [String] = [], foodDetail: String? = nil,
        description: String? = nil, proportions: String? = nil, reproduction: String? = nil,
        interestingFacts: String? = nil, projects: String? = nil, breeding: String? = nil,
        location: String? = nil, locationURL: String? = nil, imageURL: String? = nil, imageAlt: String? = nil,
        isCurrentlyAvailable: Bool = true, adoption: Adoption? = nil, mapFeatureIDs: [Int64] = [],
        sources: [ZooFileKind] = []
    ) {
        self.id = id
        self.name = name
        self.otherNames = otherNames
        self.latinName = latinName
        self.englishName = englishName
        self.taxonClass = taxonClass
        self.order = order
        self.continents = continents
        self.range = range
        self.biotopes = biotopes
        self.biotopeDetail = biotopeDetail
        self.foods = foods
        self.foodDetail = foodDetail
        self.description = description
        self.proportions = proportions
        self.reproduction = reproduction
        self.interestingFacts = interestingFacts
        self.projects = projects
        self.breeding = breeding
        self.location = location
        self.locationURL = locationURL
        self.imageURL = imageURL
        self.imageAlt = imageAlt
        self.isCurrentlyAvailable = isCurrentlyAvailable
        self.adoption = adoption
        self.mapFeatureIDs = mapFeatureIDs
        self.sources = sources
    }
}
