import Foundation

/// What a value looks like and what stands beside it, learned from the template's first photo: how a record
/// recognises the same value on a photo where the display sits elsewhere in the frame.
public enum ValueShape {
    /// The value's text with every digit as `#`, white space dropped, a decimal comma as a point, a minus sign as
    /// `-` and letters upper-cased: `14.38 V` is `##.##V`, `9,5v` is `#.#V`, `−4.5` is `-#.#`, `45 %` is `##%`. The
    /// digits' count, sign and decimals are part of the shape, so a reading that lost a leading digit (`9.8v` for
    /// `239.8 V`) does not pass for the value; `similarity` still lets it fill its slot, and `TemplateMatcher`
    /// flags it (`digitsDiffer`).
    public static func skeleton(_ text: String) -> String {
        var out = ""
        for character in text where !character.isWhitespace {
            if character.isASCII, character.isNumber {
                out.append("#")
            } else {
                out += character == "," ? "." : character == "\u{2212}" ? "-" : character.uppercased()
            }
        }
        return out
    }

    /// Marks a shape learned before digits were counted (`OCRSchema` migration 5 rewrote those `#.#V` as `~#.#V`):
    /// such a shape is compared without the digits' count, as it was learned.
    public static let legacyMarker: Character = "~"

    /// A skeleton with each run of digits as one `#` (`##.##V` → `#.#V`): what two readings of the same value share
    /// whatever the value.
    public static func coarse(_ skeleton: String) -> String {
        var out = ""
        for character in skeleton where !(character == "#" && out.last == "#") {
            if character != legacyMarker { out.append(character) }
        }
        return out
    }

    /// Whether `candidate` has the learned shape but for the digits' count (`#.#V` for `###.#V`): a digit lost or
    /// stray, or a value outside the learned one's range; either way a person's look. False for a legacy shape.
    public static func digitsDiffer(learned: String, candidate: String) -> Bool {
        learned.first != legacyMarker && learned != candidate && coarse(learned) == coarse(candidate)
    }

    /// The unit `candidate` shows where the learned shape had another (`V` read beside Proud's `#.##A`), or nil:
    /// another value's reading, or this one's unit misread. A candidate without a unit (its unit was not read)
    /// shows none.
    public static func differentUnit(learned: String, candidate: String) -> (learned: String, candidate: String)? {
        let learnedCoarse = coarse(learned), candidateCoarse = coarse(candidate)
        guard learnedCoarse.contains("#"), candidateCoarse.contains("#") else { return nil }
        let learnedUnit = split(learnedCoarse).unit, candidateUnit = split(candidateCoarse).unit
        guard !candidateUnit.isEmpty, candidateUnit != learnedUnit else { return nil }
        return (String(learnedUnit), String(candidateUnit))
    }

    /// How well a candidate's shape fits a learned one (0–1): the same shape 1; the same but for the digits' count
    /// (`#.#V` for `###.#V`) 0.7; a number whose unit differs (`#.#A` for `#.#V`: another value's unit) 0.4; the
    /// same unit around another number (`#V` for `#.#V`: a decimal point lost) 0.5; any other number 0.1; no digits
    /// where digits were learned 0. A learned text without digits (a status word) fits any text without digits. A
    /// legacy shape (`legacyMarker`) is compared as it was learned, without the digits' count.
    public static func similarity(learned: String, candidate: String) -> Double {
        if learned == candidate { return 1 }
        if learned.first == legacyMarker { return similarity(learned: coarse(learned), candidate: coarse(candidate)) }
        let learnedIsNumber = learned.contains("#"), candidateIsNumber = candidate.contains("#")
        guard learnedIsNumber else { return candidateIsNumber ? 0.2 : 0.8 }
        guard candidateIsNumber else { return 0 }
        let (learnedCoarse, candidateCoarse) = (coarse(learned), coarse(candidate))
        if learnedCoarse == candidateCoarse { return 0.7 }
        let (learnedNumber, learnedUnit) = split(learnedCoarse),
            (candidateNumber, candidateUnit) = split(candidateCoarse)
        if learnedNumber == candidateNumber { return 0.4 }
        if learnedUnit == candidateUnit { return 0.5 }
        return 0.1
    }

    /// The shape a person's correction of the template's first reading teaches, or nil to keep `learned`: only where
    /// that reading (`raw`, else `text`) is what taught it (its number is the learned one's) and the correction's
    /// number differs; the learned unit stays when the correction types none (`27.6` for `2~6` beside `°C`).
    public static func relearned(_ learned: String, readAs raw: String, or text: String, correctedTo corrected: String)
        -> String?
    {
        guard !learned.isEmpty, learned.first != legacyMarker else { return nil }
        let read = skeleton(raw.isEmpty ? text : raw), typed = skeleton(corrected)
        guard typed.contains("#"), split(read).number == split(learned).number,
            split(typed).number != split(learned).number
        else { return nil }
        return split(typed).unit.isEmpty ? String(split(typed).number) + split(learned).unit : typed
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
