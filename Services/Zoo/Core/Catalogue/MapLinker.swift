/// Joins OpenStreetMap features to lexicon animals.
///
/// An animal keeps the features its own source listed (`Animal.mapFeatureIDs`); failing that, the
/// features the scraped lexicon placed an animal of the same Czech name at; failing that, name joins:
/// the building whose (fixed) name is the animal's pavilion, and enclosures whose singular names
/// ("lvi" → "lev", derived through the singular/plural table when the feature has none) start its name.
struct MapLinker {
    private let joins: MapJoinTables
    private let knownIDs: Set<Int64>
    private var byAnimalName: [String: [Int64]] = [:]
    private var byPavilion: [String: [Int64]] = [:]
    private var enclosurePhrases: [(phrase: String, featureID: Int64)] = []

    init(features: [MapFeature], joins: MapJoinTables) {
        self.joins = joins
        knownIDs = Set(features.map(\.id))
        for feature in features {
            for name in Set(feature.animalNames.map(TextKey.nameKey)) {
                byAnimalName[name, default: []].append(feature.id)
            }
            if feature.isBuilding {
                let name = joins.pavilionNames[feature.id] ?? feature.name
                byPavilion[Self.pavilionKey(name), default: []].append(feature.id)
            } else {
                for phrase in singularPhrases(of: feature) { enclosurePhrases.append((phrase, feature.id)) }
            }
        }
    }

    /// The folded pavilion name without a leading "Pavilon" ("Pavilon Indonéská džungle" ≡ "Indonéská džungle").
    static func pavilionKey(_ name: String) -> String {
        let folded = TextKey.fold(name)
        return folded.hasPrefix("pavilon ") ? String(folded.dropFirst("pavilon ".count)) : folded
    }

    /// Map feature ids for `animal`, in source order without duplicates.
    func featureIDs(for animal: Animal) -> [Int64] {
        let own = animal.mapFeatureIDs.filter(knownIDs.contains)
        if !own.isEmpty { return unique(own) }
        let nameKey = TextKey.nameKey(animal.name)
        if let listed = byAnimalName[nameKey] { return unique(listed) }
        var joined: [Int64] = []
        if let location = animal.location { joined += byPavilion[Self.pavilionKey(location)] ?? [] }
        for (phrase, featureID) in enclosurePhrases where nameKey == phrase || nameKey.hasPrefix(phrase + " ") {
            joined.append(featureID)
        }
        return unique(joined)
    }

    private func singularPhrases(of feature: MapFeature) -> [String] {
        if let singulars = feature.singularNames, !singulars.isEmpty { return singulars.map(TextKey.fold) }
        var phrases: [String] = []
        for part in TextKey.splitList(feature.name) {
            var alternatives = [""]
            for word in TextKey.fold(part).split(separator: " ").map(String.init) {
                let forms = joins.singulars[word].map { $0.map(TextKey.fold) } ?? [word]
                alternatives = alternatives.flatMap { prefix in forms.map { prefix.isEmpty ? $0 : prefix + " " + $0 } }
            }
            phrases += alternatives.filter { !$0.isEmpty }
        }
        return phrases
    }

    private func unique(_ ids: [Int64]) -> [Int64] {
        var seen = Set<Int64>()
        return ids.filter { seen.insert($0).inserted }
    }
}
