/// Combines the two lexicons: the website's list (animals.json, the zoo app's ids, newer) and the open-data CSV
/// (richer text: projects, breeding, locality pages, but stale locations and images). Their ids are not one key
/// (a CSV id may be another species on the website), so rows are matched by species instead: every website
/// entry keeps its `_id` and its values; a CSV row matched to it by normalised Latin name, or else by Czech
/// name, only fills what the entry lacks; a CSV row matching none is added under `addedIDBase + id`, above
/// every website id. A matched row's Czech name, where it differs, stays searchable (`Animal.otherNames`).
public enum LexiconUnion {
    /// Every website entry and every unmatched lexicon row, by ascending id, with what was matched.
    public static func merge(lexicon: [Animal], website: [Animal]) -> (animals: [Animal], report: LexiconMergeReport) {
        var merged = website.map { animal -> Animal in
            var animal = animal
            animal.sources = [.animalsJSON]
            return animal
        }
        let base = addedIDBase(above: website.map(\.id).max() ?? 0)
        var report = LexiconMergeReport(websiteEntries: website.count, lexiconRows: lexicon.count, addedIDBase: base)
        let index = SpeciesIndex(website)
        let websiteByID = Dictionary(website.enumerated().map { ($1.id, $0) }, uniquingKeysWith: { first, _ in first })
        var matchedBy: [Int: Int] = [:]  // website position → the lexicon id matched to it
        for row in lexicon {
            let match = index.match(row)
            let sameID = websiteByID[row.id]
            if let (position, how) = match {
                if let earlier = matchedBy[position] {
                    report.conflicts.append(
                        "lexicon id \(row.id) \(describe(row)) matches website id \(website[position].id) \(describe(website[position])), already matched by lexicon id \(earlier)"
                    )
                } else {
                    matchedBy[position] = row.id
                }
                switch how {
                case .latinName: report.matchedByLatinName += 1
                case .czechName: report.matchedByCzechName += 1
                }
                fill(&merged[position], from: row)
                if let sameID, sameID != position {
                    report.conflicts.append(
                        "lexicon id \(row.id) \(describe(row)) is website id \(website[sameID].id) \(describe(website[sameID])) there; matched website id \(website[position].id) by \(how.rawValue)"
                    )
                }
            } else {
                var added = row
                added.id = base + row.id
                added.sources = [.lexiconCSV]
                merged.append(added)
                report.added += 1
                if let sameID {
                    report.conflicts.append(
                        "lexicon id \(row.id) \(describe(row)) is website id \(website[sameID].id) \(describe(website[sameID])) there; added as id \(added.id)"
                    )
                }
            }
        }
        return (merged.sorted { $0.id < $1.id }, report)
    }

    /// The base of the ids of lexicon-only animals: 100,000, or the next power of ten above every website id,
    /// so an added id never collides and stays the same from one import to the next.
    static func addedIDBase(above maximum: Int) -> Int {
        var base = 100_000
        while base <= maximum { base *= 10 }
        return base
    }

    private static func describe(_ animal: Animal) -> String {
        "\u{201C}\(animal.name)\(animal.latinName.map { " (\($0))" } ?? "")\u{201D}"
    }

    /// Fills the website entry's missing values from the lexicon row matched to it. The website is the newer
    /// source: its location, image and "currently kept" stand; the locality page and image text are taken only
    /// with the location and image they belong to.
    static func fill(_ animal: inout Animal, from row: Animal) {
        func keep<T>(_ path: WritableKeyPath<Animal, T?>) {
            if animal[keyPath: path] == nil { animal[keyPath: path] = row[keyPath: path] }
        }
        func keepList(_ path: WritableKeyPath<Animal, [String]>) {
            if animal[keyPath: path].isEmpty { animal[keyPath: path] = row[keyPath: path] }
        }
        if animal.location == nil || animal.location.map(TextKey.nameKey) == row.location.map(TextKey.nameKey) {
            keep(\.locationURL)
        }
        if animal.imageURL == nil || animal.imageURL == row.imageURL { keep(\.imageAlt) }
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
        if !([animal.name] + animal.otherNames).map(TextKey.nameKey).contains(TextKey.nameKey(row.name)) {
            animal.otherNames.append(row.name)
        }
        if animal.taxonClass == nil { animal.taxonClass = row.taxonClass }
        if animal.taxonClass?.latin == nil, animal.taxonClass?.czech == row.taxonClass?.czech {
            animal.taxonClass?.latin = row.taxonClass?.latin
        }
        animal.sources = [.lexiconCSV, .animalsJSON]
    }
}

/// What `LexiconUnion.merge` matched, added and found conflicting; part of the import's record.
public struct LexiconMergeReport: Sendable, Equatable, Codable {
    public var websiteEntries = 0
    public var lexiconRows = 0
    public var matchedByLatinName = 0
    public var matchedByCzechName = 0
    /// Lexicon rows matching no website entry, added under `addedIDBase + id`.
    public var added = 0
    public var addedIDBase = 0
    /// In words: rows whose id is another species on the website, rows matching an entry matched already.
    public var conflicts: [String] = []

    public init(
        websiteEntries: Int = 0, lexiconRows: Int = 0, matchedByLatinName: Int = 0, matchedByCzechName: Int = 0,
        added: Int = 0, addedIDBase: Int = 0, conflicts: [String] = []
    ) {
        self.websiteEntries = websiteEntries
        self.lexiconRows = lexiconRows
        self.matchedByLatinName = matchedByLatinName
        self.matchedByCzechName = matchedByCzechName
        self.added = added
        self.addedIDBase = addedIDBase
        self.conflicts = conflicts
    }
}

/// The website entries by normalised Latin name (whole, and species without the subspecies) and Czech name.
struct SpeciesIndex {
    enum Match: String { case latinName = "Latin name", czechName = "Czech name" }

    private let animals: [Animal]
    private var byLatin: [String: [Int]] = [:]
    private var bySpecies: [String: [Int]] = [:]
    private var byName: [String: [Int]] = [:]

    init(_ animals: [Animal]) {
        self.animals = animals
        for (position, animal) in animals.enumerated() {
            if let latin = Self.latinKey(animal.latinName) {
                byLatin[latin.joined(separator: " "), default: []].append(position)
                if latin.count > 2 { bySpecies[latin.prefix(2).joined(separator: " "), default: []].append(position) }
            }
            byName[TextKey.nameKey(animal.name), default: []].append(position)
        }
    }

    /// The website entry of `row`'s species: the same Latin name (two entries sharing it told apart by Czech
    /// name); a subspecies and its species where one side names no subspecies and the match is unique; else
    /// the same Czech name.
    func match(_ row: Animal) -> (position: Int, by: Match)? {
        let name = TextKey.nameKey(row.name)
        func pick(_ candidates: [Int]) -> Int? {
            if candidates.count == 1 { return candidates[0] }
            let named = candidates.filter { TextKey.nameKey(animals[$0].name) == name }
            return named.count == 1 ? named[0] : nil
        }
        if let latin = Self.latinKey(row.latinName) {
            let key = latin.joined(separator: " ")
            if let found = pick(byLatin[key] ?? []) { return (found, .latinName) }
            let wider =
                latin.count > 2
                ? byLatin[latin.prefix(2).joined(separator: " ")] : latin.count == 2 ? bySpecies[key] : nil
            if let found = pick(wider ?? []) { return (found, .latinName) }
        }
        if let candidates = byName[name],
            let found = pick(candidates)
                ?? candidates.first(where: {
                    Self.latinKey(animals[$0].latinName) == nil
                })
        {
            return (found, .czechName)
        }
        return nil
    }

    /// The words of a Latin name, folded: "Panthera leo  persica (Meyer, 1826)" → ["panthera", "leo", "persica"].
    /// Dropped: scraped text before the name ("žlutokrký) (Threskiornis spinicollis"), parenthesised remarks and
    /// authorities, capitalised words after genus and species (authorities), digits and punctuation, invisible
    /// characters; at most genus, species and subspecies. `nil` for no name.
    static func latinKey(_ raw: String?) -> [String]? {
        guard var text = raw else { return nil }
        if let close = text.firstIndex(of: ")"), let open = text[close...].firstIndex(of: "(") {
            text = String(text[text.index(after: open)...])
        }
        var kept = ""
        var depth = 0
        for character in text {
            if character == "(" {
                depth += 1
            } else if character == ")" {
                depth = max(0, depth - 1)
            } else if depth == 0 {
                kept.append(character.isLetter ? character : " ")
            }
        }
        var words: [String] = []
        for word in kept.split(separator: " ") {
            if words.count >= 2, word.first?.isUppercase == true { break }
            if ["cf", "sp", "ssp", "spp", "subsp", "var"].contains(word.lowercased()) { continue }
            words.append(TextKey.fold(String(word)))
            if words.count == 3 { break }
        }
        return words.isEmpty ? nil : words
    }
}
