/// Makes custom words win over the recogniser's look-alikes.
///
/// Tesseract gets the words as user words (its dictionary), but its LSTM recogniser gives the dictionary little
/// weight, so a domain term still comes out one letter off (`Menagerle`). A recognised word (without the
/// punctuation around it) that differs from a custom word only in letter case, or — for words of 4 letters or
/// more — by one inserted, deleted or replaced character, becomes the custom word. The nearest custom word wins;
/// between equally near ones the word is left as read.
public struct CustomWordCorrector: Sendable {
    private let words: [(word: String, lowercased: [Character])]

    public init(_ words: [String]) {
        self.words = words.filter { !$0.isEmpty }.map { ($0, Array($0.lowercased())) }
    }

    public var isEmpty: Bool { words.isEmpty }

    /// `token` with its core replaced by the custom word it is closest to, or nil when it stays as it is.
    public func correct(_ token: String) -> String? {
        let characters = Array(token)
        guard let start = characters.firstIndex(where: { $0.isLetter || $0.isNumber }),
            let end = characters.lastIndex(where: { $0.isLetter || $0.isNumber })
        else { return nil }
        let core = String(characters[start...end])
        let lowered = Array(core.lowercased())
        var best: (word: String, distance: Int)?
        var tie = false
        for candidate in words {
            if candidate.word == core { return nil }
            let limit = lowered.count >= 4 && candidate.lowercased.count >= 4 ? 1 : 0
            guard abs(candidate.lowercased.count - lowered.count) <= limit,
                let distance = Self.distance(lowered, candidate.lowercased, limit: limit)
            else { continue }
            if let current = best, current.distance == distance {
                tie = tie || current.word != candidate.word
            } else if best == nil || distance < best!.distance {
                best = (candidate.word, distance)
                tie = false
            }
        }
        guard let best, !tie else { return nil }
        return String(characters[..<start]) + best.word + String(characters[(end + 1)...])
    }

    /// Edit distance of `a` and `b` when at most `limit`, else nil.
    static func distance(_ a: [Character], _ b: [Character], limit: Int) -> Int? {
        if a == b { return 0 }
        guard limit > 0 else { return nil }
        var previous = Array(0...b.count)
        for i in 1...a.count {
            var current = [i] + [Int](repeating: 0, count: b.count)
            for j in 1...max(1, b.count) where j <= b.count {
                current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
            }
            previous = current
        }
        return previous[b.count] <= limit ? previous[b.count] : nil
    }
}
