import Foundation

/// The catalogue's search structures, built once per snapshot.
///
/// Folded text lives in two corpora (names; other fields) indexed by their 1- to 3-byte sequences, so a search
/// checks only the entries that can contain the needle, and ranks short needles from the index alone. Filters use, per kind, the entries
/// that have each folded value. Results are ranked by a single integer key (rank, then Czech-name order).
struct SearchIndex: Sendable {
    private let nameCorpus: Corpus
    private let otherCorpus: Corpus
    private let available: [Bool]
    /// Position of each entry in Czech-name order (ties by id), and the entry at each position.
    private let nameOrder: [Int]
    private let entryAtOrder: [Int]
    /// Per filter kind (classes, foods, biotopes, zoo houses, continents): folded value → entries having it.
    private let postings: [[String: [Int]]]

    /// `animals` sorted by id; entry `i` is `animals[i]`.
    init(animals: [Animal]) {
        let names = animals.map { animal in
            ([animal.name, animal.latinName, animal.englishName].compactMap { $0 } + animal.otherNames).map {
                Array(TextKey.fold($0).utf8)
            }
        }
        nameCorpus = Corpus(names, ranksNames: true)
        otherCorpus = Corpus(
            animals.map { animal in
                let taxa = [
                    animal.taxonClass?.czech, animal.taxonClass?.latin, animal.order?.czech, animal.order?.latin,
                    animal.location,
                ]
                return (taxa.compactMap { $0 } + animal.continents + animal.biotopes + animal.foods).map {
                    Array(TextKey.fold($0).utf8)
                }
            }, ranksNames: false)
        available = animals.map(\.isCurrentlyAvailable)
        let order = animals.indices.sorted { a, b in
            let (left, right) = (names[a][0], names[b][0])
            return left == right ? animals[a].id < animals[b].id : left.lexicographicallyPrecedes(right)
        }
        entryAtOrder = order
        var positions = [Int](repeating: 0, count: animals.count)
        for (position, entry) in order.enumerated() { positions[entry] = position }
        nameOrder = positions
        var postings = [[String: [Int]]](repeating: [:], count: 5)
        for (entry, animal) in animals.enumerated() {
            let keys: [[String]] = [
                [animal.taxonClass?.czech, animal.taxonClass?.latin].compactMap { $0 }.map(TextKey.fold),
                animal.foods.map(TextKey.fold), animal.biotopes.map(TextKey.fold),
                [animal.location].compactMap { $0 }.map(MapLinker.pavilionKey), animal.continents.map(TextKey.fold),
            ]
            for (kind, values) in keys.enumerated() {
                for value in Set(values) { postings[kind][value, default: []].append(entry) }
            }
        }
        self.postings = postings
    }

    /// Entries matching `query`, best first: exact name, name prefix, word prefix inside a name, name substring,
    /// then other fields; ties in Czech-name order.
    func search(_ query: SearchQuery) -> [Int] {
        let needle = Array(TextKey.fold(query.text).utf8)
        let allowed = allowedEntries(query)
        var keys: [Int] = []
        if needle.isEmpty {
            for entry in allowed.indices where allowed[entry] { keys.append(nameOrder[entry]) }
        } else if !needle.contains(0) {
            var named = [Bool](repeating: false, count: allowed.count)
            nameCorpus.forEachRankedEntry(containing: needle) { entry, rank in
                guard allowed[entry] else { return }
                named[entry] = true
                keys.append(rank << 32 | nameOrder[entry])
            }
            otherCorpus.forEachEntry(containing: needle) { entry in
                if allowed[entry] && !named[entry] { keys.append(4 << 32 | nameOrder[entry]) }
            }
        }
        keys.sort()
        return keys.map { entryAtOrder[$0 & 0xFFFF_FFFF] }
    }

    /// Which entries pass the availability and filter conditions.
    private func allowedEntries(_ query: SearchQuery) -> [Bool] {
        var allowed = query.includeUnavailable ? [Bool](repeating: true, count: available.count) : available
        let filter = query.filter
        let selected: [[String]] = [
            filter.classes.map(TextKey.fold), filter.foods.map(TextKey.fold), filter.biotopes.map(TextKey.fold),
            filter.zooHouses.map(MapLinker.pavilionKey), filter.continents.map(TextKey.fold),
        ]
        for (kind, values) in selected.enumerated() where !values.isEmpty {
            var inKind = [Bool](repeating: false, count: allowed.count)
            for value in values { for entry in postings[kind][value] ?? [] { inKind[entry] = true } }
            for entry in allowed.indices { allowed[entry] = allowed[entry] && inKind[entry] }
        }
        return allowed
    }
}

/// Every entry's fields in one byte array, NUL-separated, with each entry's start offset, and for every
/// 1-, 2- and 3-byte sequence (within a field) the set of entries containing it, as a bitset. For names it also
/// keeps the entries where the sequence starts a field or a word inside one, and the entries by whole field.
private struct Corpus: Sendable {
    let bytes: [UInt8]
    /// Entry `e` occupies `starts[e]..<starts[e + 1]`.
    let starts: [Int]
    /// 64-bit words per bitset.
    private let words: Int
    /// Gram key (see `gramKey`) → index of its bitsets (at `slot * words`).
    private let gramSlots: [UInt32: Int]
    private let anywhere: [UInt64]
    /// With `ranksNames`: where the gram starts a field, and where it starts a word inside a field.
    private let atFieldStart: [UInt64]
    private let atWordStart: [UInt64]
    /// With `ranksNames`: entries by whole field.
    private let exactFields: [[UInt8]: [Int]]

    init(_ entries: [[[UInt8]]], ranksNames: Bool) {
        var bytes: [UInt8] = []
        var starts: [Int] = []
        for fields in entries {
            starts.append(bytes.count)
            for field in fields { bytes += field + [0] }
        }
        starts.append(bytes.count)
        let words = (entries.count + 63) / 64
        var slots: [UInt32: Int] = [:]
        var anywhere: [UInt64] = [], atFieldStart: [UInt64] = [], atWordStart: [UInt64] = []
        var exactFields: [[UInt8]: [Int]] = [:]
        for (entry, fields) in entries.enumerated() {
            let bit = UInt64(1) << UInt64(entry % 64)
            for field in fields {
                if ranksNames { exactFields[field, default: []].append(entry) }
                for start in field.indices {
                    let wordStart = start > 0 && Self.isWordSeparator(field[start - 1])
                    for length in 1...3 where start + length <= field.count {
                        let key = Self.gramKey(field[start..<(start + length)])
                        let slot =
                            slots[key]
                            ?? {
                                let new = anywhere.count / words
                                slots[key] = new
                                anywhere += [UInt64](repeating: 0, count: words)
                                if ranksNames {
                                    atFieldStart += [UInt64](repeating: 0, count: words)
                                    atWordStart += [UInt64](repeating: 0, count: words)
                                }
                                return new
                            }()
                        let word = slot * words + entry / 64
                        anywhere[word] |= bit
                        if ranksNames && start == 0 { atFieldStart[word] |= bit }
                        if ranksNames && wordStart { atWordStart[word] |= bit }
                    }
                }
            }
        }
        self.bytes = bytes
        self.starts = starts
        self.words = words
        gramSlots = slots
        self.anywhere = anywhere
        self.atFieldStart = atFieldStart
        self.atWordStart = atWordStart
        self.exactFields = exactFields
    }

    /// A word inside a name starts after a space, a dash or an opening parenthesis.
    static func isWordSeparator(_ byte: UInt8) -> Bool {
        byte == UInt8(ascii: " ") || byte == UInt8(ascii: "-") || byte == UInt8(ascii: "(")
    }

    /// One to three bytes as a key: the length in the top byte, the bytes below.
    private static func gramKey(_ gram: ArraySlice<UInt8>) -> UInt32 {
        UInt32(gram.count) << 24 | gram.reduce(0) { $0 << 8 | UInt32($1) }
    }

    /// For a names corpus: calls `body` with each entry one of whose fields contains `needle` (non-empty,
    /// without NUL) and its rank there: 0 a whole field, 1 a field's prefix, 2 a word's prefix inside a field,
    /// 3 elsewhere. Needles of up to 3 bytes are ranked from the index; longer ones are checked in the text.
    func forEachRankedEntry(containing needle: [UInt8], _ body: (Int, Int) -> Void) {
        guard needle.count <= 3 else {
            forEachEntry(containing: needle) { entry in
                if let rank = bestNameRank(of: entry, for: needle) { body(entry, rank) }
            }
            return
        }
        guard let slot = gramSlots[Self.gramKey(needle[...])] else { return }
        let exact = Set(exactFields[needle] ?? [])
        for word in 0..<words {
            var remaining = anywhere[slot * words + word]
            let prefix = atFieldStart[slot * words + word], wordStart = atWordStart[slot * words + word]
            while remaining != 0 {
                let bit = remaining & (~remaining &+ 1)
                remaining &= remaining - 1
                let entry = word * 64 + bit.trailingZeroBitCount
                body(entry, exact.contains(entry) ? 0 : prefix & bit != 0 ? 1 : wordStart & bit != 0 ? 2 : 3)
            }
        }
    }

    /// Calls `body` once for each entry some field of which contains `needle` (non-empty, without NUL), in entry
    /// order: the entries having all of the needle's 3-byte sequences (or the needle itself when shorter), checked.
    func forEachEntry(containing needle: [UInt8], _ body: (Int) -> Void) {
        let grams = needle.count <= 3 ? [needle[...]] : (0...(needle.count - 3)).map { needle[$0..<($0 + 3)] }
        var candidates = [UInt64](repeating: ~0, count: words)
        for gram in grams {
            guard let slot = gramSlots[Self.gramKey(gram)] else { return }
            for word in 0..<words { candidates[word] &= anywhere[slot * words + word] }
        }
        for word in 0..<words {
            var remaining = candidates[word]
            while remaining != 0 {
                let entry = word * 64 + remaining.trailingZeroBitCount
                remaining &= remaining - 1
                guard entry + 1 < starts.count else { return }
                if needle.count <= 3 || contains(needle, in: entry) { body(entry) }
            }
        }
    }

    /// Whether one of the entry's fields contains `needle`.
    private func contains(_ needle: [UInt8], in entry: Int) -> Bool {
        bytes.withUnsafeBufferPointer { hay in
            needle.withUnsafeBufferPointer { pattern in
                let end = starts[entry + 1] - pattern.count
                var position = starts[entry]
                while position <= end {
                    if hay[position] == pattern[0],
                        memcmp(hay.baseAddress! + position, pattern.baseAddress!, pattern.count) == 0
                    {
                        return true
                    }
                    position += 1
                }
                return false
            }
        }
    }

    /// How well `needle` matches the best of the entry's fields (names), ranked as in `forEachRankedEntry`;
    /// nil when no field contains it.
    private func bestNameRank(of entry: Int, for needle: [UInt8]) -> Int? {
        bytes.withUnsafeBufferPointer { hay in
            needle.withUnsafeBufferPointer { pattern in
                func matches(at position: Int) -> Bool {
                    guard hay[position] == pattern[0] else { return false }
                    for offset in 1..<pattern.count where hay[position + offset] != pattern[offset] { return false }
                    return true
                }
                var best = 4
                var fieldStart = starts[entry]
                let end = starts[entry + 1]
                while fieldStart < end {
                    var fieldEnd = fieldStart
                    while hay[fieldEnd] != 0 { fieldEnd += 1 }
                    if fieldEnd - fieldStart >= pattern.count {
                        if matches(at: fieldStart) {
                            if fieldEnd - fieldStart == pattern.count { return 0 }
                            best = 1
                        } else if best > 2 {
                            // Inside the field only a word prefix (2) or a substring (3) can match.
                            var position = fieldStart + 1
                            while position + pattern.count <= fieldEnd {
                                if matches(at: position) {
                                    if Self.isWordSeparator(hay[position - 1]) {
                                        best = 2
                                        break
                                    }
                                    best = 3
                                }
                                position += 1
                            }
                        }
                    }
                    fieldStart = fieldEnd + 1
                }
                return best < 4 ? best : nil
            }
        }
    }
}
