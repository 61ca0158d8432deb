/// What a walk to an animal ends at.
public enum PlaceKind: String, Sendable, Hashable, Codable {
    /// The animal's own map location.
    case pen
    /// A pavilion: it has a building on the map or is called one.
    case house
    /// An outdoor part of the zoo ("Dolní část zoo", "Ptačí mokřady").
    case zooPart = "zoo part"
}

/// Where an animal (or a house) is on the map: the features a walk may end at, the nearest on foot winning.
public struct Placement: Sendable, Hashable {
    public var kind: PlaceKind
    /// The house's or zoo part's name as the data writes it; for a pen, the animal's name.
    public var name: String
    public var featureIDs: [Int64]

    public init(kind: PlaceKind, name: String, featureIDs: [Int64]) {
        self.kind = kind
        self.name = name
        self.featureIDs = featureIDs
    }
}

/// The zoo's houses and parts, placed on the map.
///
/// The seed app sent a visitor to an animal's pen or, failing that, to its pavilion or part of the zoo. About a
/// third of the animals have no pen of their own, but their house is where other animals' pens are: a house is
/// placed at its buildings (named as the lexicon names it through `zoo-parts-fixes.csv`, which also names some
/// paths), at map features of its name, and at the pens of its animals. Names match diacritics- and
/// case-insensitively, without a leading "Pavilon" ("Pavilon Indonéská džungle" ≡ "Indonéská džungle"), and in
/// singular or plural ("Lachtani" ≡ "lachtan", through `singular-plural.csv`).
struct ZooPlaces: Sendable {
    struct House: Sendable {
        var name: String
        var kind: PlaceKind
        var featureIDs: [Int64]
    }

    /// By `key(_:)`, in first-seen order.
    private(set) var houses: [String: House] = [:]
    private(set) var order: [String] = []
    private let singulars: [String: [String]]
    /// Buildings by OpenStreetMap id with the name the lexicon uses: an animal "placed" at one lives in a house.
    private var buildings: [Int64: String] = [:]
    private var pens = Set<Int64>()

    /// `animals` with their own map features resolved.
    init(animals: [Animal], features: [MapFeature], joins: MapJoinTables) {
        singulars = joins.singulars
        for feature in features {
            let fixed = joins.pavilionNames[feature.id]
            if feature.isAnimalPen { pens.insert(feature.id) }
            if feature.isBuilding { buildings[feature.id] = fixed ?? feature.name }
            if feature.isBuilding || fixed != nil {
                add(fixed ?? feature.name, featureIDs: [feature.id], building: feature.isBuilding)
            } else if !feature.name.isEmpty, houses[key(feature.name)] != nil || !feature.isAnimalPen {
                add(feature.name, featureIDs: [feature.id], building: false)
            }
        }
        for animal in animals {
            guard let location = animal.location else { continue }
            add(location, featureIDs: animal.mapFeatureIDs, building: false)
        }
        // A pen named like a house ("lachtani" for the zoo part "Lachtani") places it too.
        for feature in features where feature.isAnimalPen {
            if houses[key(feature.name)] != nil { add(feature.name, featureIDs: [feature.id], building: false) }
        }
    }

    private mutating func add(_ name: String, featureIDs: [Int64], building: Bool) {
        let key = key(name)
        guard !key.isEmpty else { return }
        if houses[key] == nil {
            order.append(key)
            houses[key] = House(name: name, kind: Self.looksLikeHouse(name) ? .house : .zooPart, featureIDs: [])
        }
        if building { houses[key]!.kind = .house }
        for id in featureIDs where !houses[key]!.featureIDs.contains(id) { houses[key]!.featureIDs.append(id) }
    }

    private static func looksLikeHouse(_ name: String) -> Bool {
        let folded = TextKey.fold(name)
        return folded.hasPrefix("pavilon") || folded.contains(" pavilon") || folded.hasSuffix(" dum")
            || folded == "terarium"
    }

    /// The matching form of a house name: folded, without a leading "Pavilon", each word in its singular.
    func key(_ name: String) -> String {
        MapLinker.pavilionKey(name).split(separator: " ").map { word in
            singulars[String(word)]?.first.map(TextKey.fold) ?? String(word)
        }.joined(separator: " ")
    }

    /// The house or zoo part called `name` (any spelling `key` matches).
    func house(named name: String) -> House? { houses[key(name)] }

    /// Every house in first-seen order.
    var all: [House] { order.map { houses[$0]! } }

    /// Where a walk to `animal` ends: its pens, or its house's place; `nil` when neither exists.
    func placement(of animal: Animal) -> Placement? {
        if !animal.mapFeatureIDs.isEmpty {
            // animals.json places animals of a pavilion at its building: they live in that house, not in a pen.
            if !animal.mapFeatureIDs.contains(where: pens.contains), let building = buildings[animal.mapFeatureIDs[0]] {
                return Placement(kind: .house, name: building, featureIDs: animal.mapFeatureIDs)
            }
            // An animal with a pen is walked to its pen, not to the pavilion also listed (the lion's "lvi", not
            // "Pavilon šelem a plazů").
            let own = animal.mapFeatureIDs.filter(pens.contains)
            return Placement(kind: .pen, name: animal.name, featureIDs: own.isEmpty ? animal.mapFeatureIDs : own)
        }
        guard let location = animal.location, let house = house(named: location), !house.featureIDs.isEmpty else {
            return nil
        }
        return Placement(kind: house.kind, name: house.name, featureIDs: house.featureIDs)
    }
}
