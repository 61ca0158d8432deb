/// Selected filter values; OR within one kind, AND across kinds. Values match case- and
/// diacritics-insensitively; a class matches by its Czech or Latin name.
public struct AnimalFilter: Sendable, Hashable {
    public var classes: [String]
    public var foods: [String]
    public var biotopes: [String]
    public var zooHouses: [String]
    public var continents: [String]

    public init(
        classes: [String] = [], foods: [String] = [], biotopes: [String] = [], zooHouses: [String] = [],
        continents: [String] = []
    ) {
        self.classes = classes
        self.foods = foods
        self.biotopes = biotopes
        self.zooHouses = zooHouses
        self.continents = continents
    }
}

/// A search request: free text (may be empty), filters, availability and paging.
public struct SearchQuery: Sendable, Hashable {
    public var text: String
    public var filter: AnimalFilter
    /// Include animals the zoo does not currently keep.
    public var includeUnavailable: Bool
    public var offset: Int
    public var limit: Int

    public init(
        text: String = "", filter: AnimalFilter = AnimalFilter(), includeUnavailable: Bool = false,
        offset: Int = 0, limit: Int = 20
    ) {
        self.text = text
        self.filter = filter
        self.includeUnavailable = includeUnavailable
        self.offset = offset
        self.limit = limit
    }
}

/// One page of search results.
public struct SearchPage: Sendable, Equatable {
    /// How many animals matched in all.
    public var total: Int
    public var animals: [Animal]
}

/// A filter value and how many animals have it.
public struct FilterValue: Sendable, Hashable, Codable {
    public var value: String
    public var count: Int

    public init(value: String, count: Int) {
        self.value = value
        self.count = count
    }
}

/// Each filter kind's values with counts, sorted by value.
public struct FilterValues: Sendable, Equatable {
    public var classes: [FilterValue]
    public var foods: [FilterValue]
    public var biotopes: [FilterValue]
    public var zooHouses: [FilterValue]
    public var continents: [FilterValue]
}

/// The immutable in-memory lexicon: animals with adoptions and map features joined, indexed for search.
public struct Catalogue: Sendable {
    /// All animals by ascending id.
    public let animals: [Animal]
    /// Map features by OpenStreetMap id.
    public let features: [Int64: MapFeature]
    private let index: SearchIndex
    private let indexByID: [Int: Int]
    private let linker: MapLinker
    private let places: ZooPlaces
    /// Folded value → display value of each filter kind over every animal (kept now or not), for validation.
    private let knownFilterValues: [FilterKind: [String: String]]

    /// Upper bound for `SearchQuery.limit`.
    public static let maxPageSize = 500

    /// Builds the catalogue: joins adoptions by normalised Czech name (adding the English name) and map
    /// features to animals (see `MapLinker`).
    public init(
        animals: [Animal], mapFeatures: [MapFeature] = [], adoptions: [Adoption] = [],
        joins: MapJoinTables = MapJoinTables()
    ) {
        var adoptionByName: [String: Adoption] = [:]
        for adoption in adoptions where adoptionByName[TextKey.nameKey(adoption.czechName)] == nil {
            adoptionByName[TextKey.nameKey(adoption.czechName)] = adoption
        }
        let linker = MapLinker(features: mapFeatures, joins: joins)
        var resolved = animals.sorted { $0.id < $1.id }
        for index in resolved.indices {
            if let adoption = adoptionByName[TextKey.nameKey(resolved[index].name)] {
                resolved[index].adoption = adoption
                resolved[index].englishName = resolved[index].englishName ?? adoption.englishName
            }
            resolved[index].mapFeatureIDs = linker.featureIDs(for: resolved[index])
        }
        self.animals = resolved
        self.features = Dictionary(mapFeatures.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
        self.index = SearchIndex(animals: resolved)
        self.indexByID = Dictionary(resolved.enumerated().map { ($1.id, $0) }, uniquingKeysWith: { first, _ in first })
        self.linker = linker
        self.places = ZooPlaces(animals: resolved, features: mapFeatures, joins: joins)
        var known: [FilterKind: [String: String]] = [:]
        for animal in resolved {
            for kind in FilterKind.allCases {
                for value in kind.values(of: animal) where known[kind, default: [:]][kind.key(value)] == nil {
                    known[kind, default: [:]][kind.key(value)] = value
                }
            }
        }
        self.knownFilterValues = known
    }

    /// Where a walk to `animal` ends: its own pens, or failing that its house or zoo part; `nil` when the data
    /// places it nowhere.
    public func placement(of animal: Animal) -> Placement? { places.placement(of: animal) }

    /// The house or zoo part called `name` (diacritics, case, a "Pavilon" prefix and plural forms do not matter),
    /// with the map features that place it (possibly none).
    public func house(named name: String) -> Placement? {
        places.house(named: name).map { Placement(kind: $0.kind, name: $0.name, featureIDs: $0.featureIDs) }
    }

    /// Every house and zoo part the animals or the map name, with where they are.
    public var houses: [Placement] {
        places.all.map { Placement(kind: $0.kind, name: $0.name, featureIDs: $0.featureIDs) }
    }

    /// Throws `invalidArgument` for a filter value no animal has, listing the known values of that filter.
    func validate(_ filter: AnimalFilter) throws(ZooError) {
        for kind in FilterKind.allCases {
            let known = knownFilterValues[kind] ?? [:]
            for value in kind.selected(in: filter) where known[kind.key(value)] == nil {
                let list = known.values.sorted().joined(separator: ", ")
                throw .invalidArgument(
                    "unknown \(kind.rawValue) \"\(value)\"; known values: \(list.isEmpty ? "none" : list)")
            }
        }
    }

    /// The animal with `id`. Throws `.unknownAnimal` when there is none, or it is not currently kept
    /// and `includeUnavailable` is false.
    public func animal(id: Int, includeUnavailable: Bool = false) throws(ZooError) -> Animal {
        guard let index = indexByID[id], includeUnavailable || animals[index].isCurrentlyAvailable else {
            throw .unknownAnimal(id: id)
        }
        return animals[index]
    }

    /// The map features of an animal, in link order.
    public func mapLocations(of animal: Animal) -> [MapFeature] {
        animal.mapFeatureIDs.compactMap { features[$0] }
    }

    /// Searches names (Czech, Latin, English) and other fields, ranked: exact name, name prefix,
    /// word prefix inside a name, name substring, then other fields; ties by Czech name, then id.
    public func search(_ query: SearchQuery) throws(ZooError) -> SearchPage {
        guard query.offset >= 0, query.limit >= 0, query.limit <= Self.maxPageSize else {
            throw .invalidArgument("offset must be ≥ 0 and limit within 0…\(Self.maxPageSize)")
        }
        try validate(query.filter)
        let hits = index.search(query)
        let page = hits.dropFirst(query.offset).prefix(query.limit).map { animals[$0] }
        return SearchPage(total: hits.count, animals: Array(page))
    }

    /// Every value of each filter kind with the number of animals that have it.
    public func filterValues(includeUnavailable: Bool = false) -> FilterValues {
        var counters = Array(repeating: ValueCounter(), count: 5)
        for animal in animals where includeUnavailable || animal.isCurrentlyAvailable {
            if let taxonClass = animal.taxonClass { counters[0].add([taxonClass.czech], key: TextKey.fold) }
            counters[1].add(animal.foods, key: TextKey.fold)
            counters[2].add(animal.biotopes, key: TextKey.fold)
            if let location = animal.location { counters[3].add([location], key: MapLinker.pavilionKey) }
            counters[4].add(animal.continents, key: TextKey.fold)
        }
        return FilterValues(
            classes: counters[0].values, foods: counters[1].values, biotopes: counters[2].values,
            zooHouses: counters[3].values, continents: counters[4].values)
    }
}

/// The kinds of filter `AnimalFilter` has: their values on an animal and the key they match by.
enum FilterKind: String, CaseIterable, Sendable {
    case `class`, food, biotope, house, continent

    func values(of animal: Animal) -> [String] {
        switch self {
        case .class: [animal.taxonClass?.czech, animal.taxonClass?.latin].compactMap { $0 }
        case .food: animal.foods
        case .biotope: animal.biotopes
        case .house: animal.location.map { [$0] } ?? []
        case .continent: animal.continents
        }
    }

    func selected(in filter: AnimalFilter) -> [String] {
        switch self {
        case .class: filter.classes
        case .food: filter.foods
        case .biotope: filter.biotopes
        case .house: filter.zooHouses
        case .continent: filter.continents
        }
    }

    func key(_ value: String) -> String { self == .house ? MapLinker.pavilionKey(value) : TextKey.fold(value) }
}

/// Counts values grouped by a key, keeping the first spelling seen for display.
private struct ValueCounter {
    private var display: [String: String] = [:]
    private var counts: [String: Int] = [:]

    mutating func add(_ values: [String], key: (String) -> String) {
        for valueKey in Set(values.map(key)) { counts[valueKey, default: 0] += 1 }
        for value in values where display[key(value)] == nil { display[key(value)] = value }
    }

    var values: [FilterValue] {
        counts.keys.sorted().map { FilterValue(value: display[$0]!, count: counts[$0]!) }
    }
}
