/// A source row that was not imported, with the reason.
public struct SkippedRow: Sendable, Hashable, Codable {
    /// 1-based data row number (the header is row 0).
    public var row: Int
    /// 1-based line of the file where the row starts.
    public var line: Int
    public var reason: String

    public init(row: Int, line: Int, reason: String) {
        self.row = row
        self.line = line
        self.reason = reason
    }
}

/// The animals read from one lexicon source, and the rows that were skipped.
public struct LexiconImport: Sendable {
    public var animals: [Animal]
    public var skipped: [SkippedRow]
    /// Map features (with the names of the animals placed at them); empty for the CSV lexicon.
    public var mapFeatures: [MapFeature]

    public init(animals: [Animal], skipped: [SkippedRow], mapFeatures: [MapFeature] = []) {
        self.animals = animals
        self.skipped = skipped
        self.mapFeatures = mapFeatures
    }
}

/// Reads the open-data lexicon CSV (`lexikon-zvirat.csv`).
public enum LexiconCSV {
    /// The columns the file must have, in order (a trailing empty header column is allowed).
    public static let columns = [
        "id", "title", "latin_title", "classes", "order", "description", "image_src", "image_alt", "continents",
        "spread_note", "biotop", "biotopes_note", "food", "food_note", "proportions", "reproduction", "attractions",
        "projects_note", "breeding", "localities_title", "localities_url",
    ]

    /// Parses the file; bad rows are skipped and reported, the rest import.
    /// Throws `ZooError.importFailed` (naming `source`) when the header is not the lexicon's.
    public static func parse(_ text: String, source: String = "lexicon CSV") throws(ZooError) -> LexiconImport {
        var records = CSVParser.parse(text)
        guard !records.isEmpty else { throw .importFailed(source: source, reason: "the file is empty") }
        let header = records.removeFirst().fields.map { TextKey.collapseWhitespace($0) }
        guard trimmedTrailingEmpty(header) == columns else {
            throw .importFailed(source: source, reason: "unexpected header \(header.joined(separator: ";"))")
        }
        var animals: [Animal] = []
        var skipped: [SkippedRow] = []
        var seenIDs = Set<Int>()
        for (offset, record) in records.enumerated() {
            let row = offset + 1
            switch animal(from: record.fields) {
            case .success(let animal):
                if seenIDs.insert(animal.id).inserted {
                    animals.append(animal)
                } else {
                    skipped.append(SkippedRow(row: row, line: record.line, reason: "duplicate id \(animal.id)"))
                }
            case .failure(let reason):
                skipped.append(SkippedRow(row: row, line: record.line, reason: reason.message))
            }
        }
        return LexiconImport(animals: animals, skipped: skipped)
    }

    private struct RowProblem: Error { var message: String }

    private static func trimmedTrailingEmpty(_ fields: [String]) -> [String] {
        var fields = fields
        while fields.last?.isEmpty == true { fields.removeLast() }
        return fields
    }

    private static func animal(from raw: [String]) -> Result<Animal, RowProblem> {
        var fields = raw
        if fields.count > columns.count { fields = trimmedTrailingEmpty(fields) }
        guard fields.count == columns.count else {
            return .failure(
                RowProblem(message: "expected \(columns.count) fields, found \(raw.count) (shifted columns)"))
        }
        func value(_ column: Int) -> String? { TextKey.cleanValue(fields[column]) }
        guard let idText = value(0), let id = Int(idText), id > 0 else {
            return .failure(RowProblem(message: "id \"\(fields[0].prefix(40))\" is not a number"))
        }
        guard let name = value(1) else { return .failure(RowProblem(message: "missing title")) }
        guard let taxonClass = Taxon(combined: fields[3]), isClassName(taxonClass) else {
            return .failure(RowProblem(message: "class \"\(fields[3].prefix(60))\" is not a class"))
        }
        return .success(
            Animal(
                id: id, name: name, latinName: value(2), taxonClass: taxonClass, order: Taxon(combined: fields[4]),
                continents: TextKey.splitList(fields[8]), range: value(9), biotopes: TextKey.splitList(fields[10]),
                biotopeDetail: value(11), foods: TextKey.splitList(fields[12]), foodDetail: value(13),
                description: value(5), proportions: value(14), reproduction: value(15), interestingFacts: value(16),
                projects: value(17), breeding: value(18), location: value(19), locationURL: value(20),
                imageURL: value(6), imageAlt: value(7), sources: [.lexiconCSV]))
    }

    /// A class is written "Czech (Latin)" with a single capitalised Latin word, e.g. "Ptáci (Aves)".
    private static func isClassName(_ taxon: Taxon) -> Bool {
        guard let latin = taxon.latin, let first = latin.unicodeScalars.first,
            first.properties.isUppercase
        else { return false }
        return latin.unicodeScalars.allSatisfy { $0.isASCII && $0.properties.isAlphabetic }
            && !taxon.czech.contains(",") && taxon.czech.count <= 40
    }
}
