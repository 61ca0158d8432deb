import Foundation

/// What a value looks like and what stands beside it, learned from the template's first photo: how a record
/// recognises the same value on a photo where the display sits elsewhere in the frame.
public enum ValueShape {
    /// The value's text with every run of digits as `#`, white space dropped, a decimal comma as a point and
    /// letters upper-cased: `14.38 V` and `9,5V` are both `#.#V`, `45 %` is `#%`. The integer digits' count
    /// varies between photos (9.5 V, 14.38 V), so it is not part of the shape.
    public static func skeleton(_ text: String) -> String {
        var out = ""
        var inDigits = false
        for character in text where !character.isWhitespace {
            if character.isASCII, character.isNumber {
                if !inDigits { out.append("#") }
                inDigits = true
            } else {
                inDigits = false
                out += character == "," ? "." : character.uppercased()
            }
        }
        return out
    }

    /// How well a candidate's shape fits a learned one (0–1): the same shape 1; a number whose unit differs
    /// (`#.#A` for `#.#V`: another value's unit) 0.4; the same unit around another number (`#V` for `#.#V`: a
    /// decimal point lost) 0.5; any other number 0.1; no digits where digits were learned 0. A learned text
    /// without digits (a status word) fits any text without digits.
    public static func similarity(learned: String, candidate: String) -> Double {
        if learned == candidate { return 1 }
        let learnedIsNumber = learned.contains("#"), candidateIsNumber = candidate.contains("#")
        guard learnedIsNumber else { return candidateIsNumber ? 0.2 : 0.8 }
        guard candidateIsNumber else { return 0 }
        let (learnedNumber, learnedUnit) = split(learned), (candidateNumber, candidateUnit) = split(candidate)
        if learnedNumber == candidateNumber { return 0.4 }
        if learnedUnit == candidateUnit { return 0.5 }
        return 0.1
    }

    /// A skeleton's number (up to its last digit run) and unit (what follows).
    static func split(_ skeleton: String) -> (number: Substring, unit: Substring) {
        guard let last = skeleton.lastIndex(of: "#") else { return ("", skeleton[...]) }
        let end = skeleton.index(after: last)
        return (skeleton[..<end], skeleton[end...])
    }

    /// Similarity of two labels (0–1): one minus their edit distance over the longer one's length, compared
    /// without case and diacritics (Tesseract reads `Napětí` as `Napeti` on a small display).
    public static func labelSimilarity(_ a: String, _ b: String) -> Double {
        let x = Array(fold(a)), y = Array(fold(b))
        guard !x.isEmpty || !y.isEmpty else { return 1 }
        guard !x.isEmpty, !y.isEmpty else { return 0 }
        var previous = Array(0...y.count), current = [Int](repeating: 0, count: y.count + 1)
        for i in 1...x.count {
            current[0] = i
            for j in 1...y.count {
                current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (x[i - 1] == y[j - 1] ? 0 : 1))
            }
            swap(&previous, &current)
        }
        return 1 - Double(previous[y.count]) / Double(max(x.count, y.count))
    }

    static func fold(_ text: String) -> String {
        text.folding(options: [.caseInsensitive, .diacriticInsensitive], locale: nil)
            .filter { $0.isLetter || $0.isNumber }
    }

    /// Labels and units are at most this long (a label is one word beside the value).
    public static let maxLabelLength = 200
}

/// An observation's surroundings among the observations of its level: the label to its left on the same row
/// (the nearest text with a letter) and the unit to its right (a short text without digits, at most 1.5 times
/// the value's height away).
public struct ValueNeighbourhood: Sendable, Hashable {
    public var label: String
    public var unit: String

    /// The shape of `observation` with its unit: what `ValueShape.similarity` compares.
    public var shape: String

    public init(of observation: Observation, among observations: [Observation]) {
        let box = observation.box
        let top = Double(box.y), bottom = Double(box.y + box.height), height = Double(max(1, box.height))
        func onSameRow(_ other: Observation) -> Bool {
            let centre = Double(other.box.y) + Double(other.box.height) / 2
            let ownCentre = (top + bottom) / 2
            return (top...bottom).contains(centre)
                || (Double(other.box.y)...Double(other.box.y + other.box.height)).contains(ownCentre)
        }
        let row = observations.filter {
            $0.level == observation.level && $0.page == observation.page && $0 != observation && !$0.text.isEmpty
                && onSameRow($0)
        }
        // By centres: Tesseract's box of a number sometimes takes in the unit after it (`11.60` reaching over `V`).
        func centre(_ o: Observation) -> Double { Double(o.box.x) + Double(o.box.width) / 2 }
        let ownCentre = centre(observation), quarter = Double(box.width) / 4
        let left = row.filter { centre($0) < ownCentre - quarter && $0.text.contains(where: \.isLetter) }
            .max { centre($0) < centre($1) }
        let right = row.filter {
            centre($0) > ownCentre + quarter && Double($0.box.x - (box.x + box.width)) <= 1.5 * height
                && $0.text.count <= 3 && !$0.text.contains(where: \.isNumber)
        }.min { centre($0) < centre($1) }
        label = left?.text ?? ""
        unit = right?.text ?? ""
        shape = ValueShape.skeleton(observation.text + unit)
    }
}
