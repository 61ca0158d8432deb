/// Combines the two lexicons by id (the lexicon CSV's `id` is animals.json's `_id`): the open-data CSV has the
/// richer text (projects, breeding, locality pages), the website's list has more animals (605 against 327) and
/// their map locations, so serving either alone loses animals or pens.
public enum LexiconUnion {
    /// Every animal of either list, by ascending id. Where both have an id the lexicon's values win and
    /// animals.json fills what the lexicon lacks; the map locations and "currently kept" are animals.json's
    /// (the CSV has neither). `sources` says which lists each animal came from.
    public static func merge(lexicon: [Animal], website: [Animal]) -> [Animal] {
        var byID = Dictionary(website.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
        var merged: [Animal] = []
        for var animal in lexicon {
            animal.sources = [.lexiconCSV]
            if let other = byID.removeValue(forKey: animal.id) {
                fill(&animal, from: other)
            }
            merged.append(animal)
        }
        for var animal in byID.values {
            animal.sources = [.animalsJSON]
            merged.append(animal)
        }
        return merged.sorted { $0.id < $1.id }
    }

    /// Fills the lexicon animal's missing values from animals.json's record of the same id.
    static func fill(_ animal: inout Animal, from other: Animal) {
        func keep<T>(_ path: WritableKeyPath<Animal, T?>) { if animal[keyPath: path] == nil { animal[keyPath: path] = other[keyPath: path] } }
        func keepList(_ path: WritableKeyPath<Animal, [String]>) {
            if animal[keyPath: path].isEmpty { animal[keyPath: path] = other[keyPath: path] }
        }
        keep(\.latinName)
        keep(\.englishName)
        keep(\.order)
        keep(\.range)
        keep(\.biotopeDetail)
        keep(\.foodDetail)
        keep(\.description)
        keep(\.proportions)
        keep(\.reproduction)
        keep(\.interestingFacts)
        keep(\.projects)
        keep(\.breeding)
        keep(\.location)
        keep(\.imageURL)
        keepList(\.continents)
        keepList(\.biotopes)
        keepList(\.foods)
        if animal.taxonClass == nil { animal.taxonClass = other.taxonClass }
        if animal.taxonClass?.latin == nil, animal.taxonClass?.czech == other.taxonClass?.czech {
            animal.taxonClass?.latin = other.taxonClass?.latin
        }
        animal.mapFeatureIDs = other.mapFeatureIDs
        animal.isCurrentlyAvailable = other.isCurrentlyAvailable
        animal.sources = [.lexiconCSV, .animalsJSON]
    }
}
