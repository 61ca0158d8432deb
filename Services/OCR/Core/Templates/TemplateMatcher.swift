import OCRPolicy
import TextRecognition

/// Fills a template's values from a new photo's observations, and says which readings want a person's look.
///
/// A value learned with its shape and label (templates made since shapes are learned) takes the observation of its
/// level that best fits all three: what it looks like (`ValueShape.similarity`, unit included), the label beside
/// it (`ValueShape.labelSimilarity`) and where it sits (its centre's distance from the region's). Shape and label
/// outweigh position, so a display that sits elsewhere in the frame (moved a row up, Proud where Napětí was) still
/// maps each value to its own slot. A template without learned shapes is matched by position alone: the largest
/// overlap (intersection over union), ties by centre distance. Values are assigned best fit first and an
/// observation fills at most one value.
///
/// A value is uncertain when nothing was read for it, when its best fit is under `minimumFit` (then it is left
/// empty, the misfit named in the reason), when the
/// observation it took fits another value nearly as well (`ambiguityMargin`), or when it was read with a
/// confidence under `minimumConfidence`.
public enum TemplateMatcher {
    /// A fit under this is no fit a person would trust.
    public static let minimumFit = 0.6
    /// Another value's fit on the same observation within this of the value's own makes it ambiguous.
    public static let ambiguityMargin = 0.1
    /// The confidence under which a reading wants a look (`RecordPolicy.minimumConfidence`).
    public static let minimumConfidence = RecordPolicy.minimumConfidence

    static let shapeWeight = 0.45, labelWeight = 0.35, positionWeight = 0.2

    /// How well `observation` (with its neighbourhood) fits `value` (0–1).
    static func fit(_ value: ValueDefinition, _ observation: Observation, _ neighbourhood: ValueNeighbourhood) -> Double
    {
        let dx = value.region.centerX - observation.normalizedBox.centerX
        let dy = value.region.centerY - observation.normalizedBox.centerY
        let position = max(0, 1 - (dx * dx + dy * dy).squareRoot() / 0.5)
        let shape = ValueShape.similarity(learned: value.shape, candidate: neighbourhood.shape)
        guard !value.label.isEmpty else {
            let total = shapeWeight + positionWeight
            return (shapeWeight * shape + positionWeight * position) / total
        }
        let label = ValueShape.labelSimilarity(value.label, neighbourhood.label)
        return shapeWeight * shape + labelWeight * label + positionWeight * position
    }

    /// `assign`, each value flagged when the photo's readings were cut short by its time budget: a reading not
    /// tried might have read it otherwise.
    public static func assign(_ values: [ValueDefinition], in result: RecognitionResult)
        -> [(value: RecordValue, observation: Observation?)]
    {
        var assigned = assign(values, in: result.observations)
        guard result.cutShort else { return assigned }
        for index in assigned.indices {
            let reason = "the photo's readings were cut short by its time budget"
            let current = assigned[index].value.uncertainty
            assigned[index].value.uncertainty = current.isEmpty ? reason : current + "; " + reason
        }
        return assigned
    }

    public static func match(_ values: [ValueDefinition], in observations: [Observation]) -> [RecordValue] {
        assign(values, in: observations).map(\.value)
    }

    /// Each value with the observation it was read from (nil when nothing was).
    public static func assign(_ values: [ValueDefinition], in observations: [Observation])
        -> [(value: RecordValue, observation: Observation?)]
    {
        if values.allSatisfy({ $0.shape.isEmpty && $0.label.isEmpty }) {
            return assignByPosition(values, in: observations)
        }
        let original = observations
        var neighbourhoods = Dictionary(
            uniqueKeysWithValues: original.indices.filter { !original[$0].text.isEmpty }
                .map { ($0, ValueNeighbourhood(of: original[$0], among: original)) })
        // Lines with a label run into them ("13.52V Proud" when the next column's label sits on the value's row)
        // are candidates without it too; `group` ties each such part to its line, which fills at most one value.
        var observations = original
        var group = Array(original.indices)
        for part in LinePart.parts(of: original) {
            neighbourhoods[observations.count] = ValueNeighbourhood(of: part.observation, among: part.neighbours)
            group.append(part.line)
            observations.append(part.observation)
        }
        let candidates = observations.indices.filter { !observations[$0].text.isEmpty }
        // fits[value][observation]
        var fits: [[Int: Double]] = values.map { _ in [:] }
        for (valueIndex, value) in values.enumerated() {
            for index in candidates where observations[index].level == value.level {
                fits[valueIndex][index] = fit(value, observations[index], neighbourhoods[index]!)
            }
        }
        var pairs: [(value: Int, observation: Int, fit: Double)] = []
        for (valueIndex, row) in fits.enumerated() {
            for (observation, fit) in row { pairs.append((valueIndex, observation, fit)) }
        }
        pairs.sort { ($0.fit, $1.value, $1.observation) > ($1.fit, $0.value, $0.observation) }
        var result: [(value: RecordValue, observation: Observation?)] = values.map {
            (RecordValue(name: $0.name, text: "", confidence: 0, uncertainty: "nothing was read there"), nil)
        }
        var filled = Set<Int>(), used = Set<Int>()
        for pair in pairs where !filled.contains(pair.value) && !used.contains(group[pair.observation]) {
            filled.insert(pair.value)
            used.insert(group[pair.observation])
            let observation = observations[pair.observation]
            var reasons: [String] = []
            if pair.fit < minimumFit {
                // Stored empty: a misfit's text (a unit, a label) is no reading of the value.
                result[pair.value] = (
                    RecordValue(
                        name: values[pair.value].name, text: "", confidence: 0,
                        uncertainty: "nothing fits it well (best fit \(format(pair.fit)): \"\(observation.text)\")"),
                    observation
                )
                continue
            } else if let other = fits.indices.first(where: {
                $0 != pair.value && (fits[$0][pair.observation] ?? 0) >= minimumFit
                    && pair.fit - (fits[$0][pair.observation] ?? 0) < ambiguityMargin
            }) {
                reasons.append("it fits \(values[other].name) as well")
            }
            reasons += doubts(
                learnedShape: values[pair.value].shape, shape: neighbourhoods[pair.observation]!.shape,
                text: observation.text, confidence: observation.confidence, doubt: observation.doubt)
            result[pair.value] = (
                RecordValue.reading(
                    name: values[pair.value].name, raw: observation.text, confidence: observation.confidence,
                    uncertainty: reasons.joined(separator: "; "), unitBeside: neighbourhoods[pair.observation]!.unit),
                observation
            )
        }
        return result
    }

    /// Why a reading that fills its value wants a look, whatever else it fits: its digits' count differs from the
    /// learned shape's (`#.#V` for `###.#V`: `9.8v` read for 239.8 V), it shows another unit, a gap splits its
    /// digits, or it was read with a confidence under `minimumConfidence` — the engine's `doubt` in its place when
    /// it gave one (the seven-segment reader's regions or PP-OCR disagreeing: why the confidence is held low).
    static func doubts(learnedShape: String, shape: String, text: String, confidence: Double, doubt: String? = nil)
        -> [String]
    {
        var reasons: [String] = []
        if ValueShape.digitsDiffer(learned: learnedShape, candidate: shape) {
            reasons.append("its shape \(shape) is not the learned \(learnedShape): a digit may be lost or stray")
        }
        if let units = ValueShape.differentUnit(learned: learnedShape, candidate: shape) {
            reasons.append(
                "its unit \(units.candidate) is not the learned \(units.learned.isEmpty ? "(none)" : units.learned)")
        }
        if let gap = digitGap(in: text) { reasons.append(gap) }
        if let doubt, !doubt.isEmpty {
            reasons.append(doubt)
        } else if confidence < minimumConfidence {
            reasons.append(lowConfidence(confidence))
        }
        return reasons
    }

    /// The confidence cut to two decimals, not rounded: 0.849 is "0.84 (under 0.85)", never "0.85 (under 0.85)".
    static func lowConfidence(_ confidence: Double) -> String {
        "read with confidence \(format((confidence * 100 + 1e-9).rounded(.down) / 100)) (under \(format(minimumConfidence)))"
    }

    /// A value about to be stored, checked as a reading is (`doubts`, an empty one "nothing was read there") unless
    /// it already says why it is uncertain or a person typed it (confidence 1): the template's first record, whose
    /// values no match checked, and a record from a client that dropped a flag are never stored unflagged.
    public static func checked(_ value: RecordValue) -> RecordValue {
        guard value.uncertainty.isEmpty, value.confidence < 1 else { return value }
        var value = value
        if value.text.isEmpty {
            value.uncertainty = "nothing was read there"
        } else {
            value.uncertainty = doubts(
                learnedShape: "", shape: "", text: value.raw.isEmpty ? value.text : value.raw,
                confidence: value.confidence
            ).joined(separator: "; ")
        }
        return value
    }

    static func format(_ value: Double) -> String { String(format: "%.2f", value) }

    /// Why a reading with a gap between digits wants a look ("1 8.4W": Tesseract split 18.4 and a digit may be
    /// lost or stray; the shape, which ignores spaces, cannot tell), or nil. Groups of three after the first
    /// ("1 234,5 kWh", how Czech writes thousands) are a number's own spacing.
    static func digitGap(in text: String) -> String? {
        guard text.contains(/\d\s+\d/) else { return nil }
        if text.wholeMatch(of: /\D*\d{1,3}(\s\d{3})+([.,]\d+)?\D*/) != nil { return nil }
        return "a gap between digits (\"\(text)\"): a digit may be split off, lost or stray"
    }

    /// A line without the words of letters only at its start or end — labels Tesseract joined to a value on the
    /// same row, "13.52V Proud" — as an observation of its own, with its neighbours: the other observations, less
    /// the line, plus the words cut off (so "Napětí 13.52V" gives "13.52V" with "Napětí" as the label to its left).
    /// Only words without a digit are cut: "1 8.4W" stays whole, as "8.4W" alone would be a wrong reading of 18.4W.
    struct LinePart {
        let line: Int
        let observation: Observation
        let neighbours: [Observation]

        static func parts(of observations: [Observation]) -> [LinePart] {
            var parts: [LinePart] = []
            for (index, line) in observations.enumerated() where line.level == .line && !line.text.isEmpty {
                let words = observations.filter { word in
                    word.level == .word && word.page == line.page && !word.text.isEmpty
                        && (line.box.x...(line.box.x + line.box.width)).contains(word.box.x + word.box.width / 2)
                        && (line.box.y...(line.box.y + line.box.height)).contains(word.box.y + word.box.height / 2)
                }.sorted { $0.box.x < $1.box.x }
                guard words.count >= 2 else { continue }
                let lettersOnly = words.map { !$0.text.contains(where: \.isNumber) }
                let leading = lettersOnly.prefix { $0 }.count, trailing = lettersOnly.reversed().prefix { $0 }.count
                guard leading < words.count else { continue }  // no digit at all: a label, not a value
                let others = observations.enumerated().filter { $0.offset != index }.map(\.element)
                var cuts: [(start: Int, end: Int)] = []
                for cut in [(leading, 0), (0, trailing), (leading, trailing)]
                where cut.0 + cut.1 > 0 && !cuts.contains(where: { $0 == cut }) {
                    cuts.append(cut)
                }
                for (cutStart, cutEnd) in cuts {
                    let kept = Array(words[cutStart..<(words.count - cutEnd)])
                    let cut = [Array(words[..<cutStart]), Array(words[(words.count - cutEnd)...])].filter {
                        !$0.isEmpty
                    }.map {
                        joined($0, level: .line)
                    }
                    parts.append(
                        LinePart(line: index, observation: joined(kept, level: .line), neighbours: others + cut))
                }
            }
            return parts
        }

        /// Words as one observation: their texts with spaces, the box round them all, the lowest confidence.
        static func joined(_ words: [Observation], level: ObservationLevel) -> Observation {
            let left = words.map(\.box.x).min()!, top = words.map(\.box.y).min()!
            let right = words.map { $0.box.x + $0.box.width }.max()!,
                bottom = words.map { $0.box.y + $0.box.height }.max()!
            let nLeft = words.map(\.normalizedBox.x).min()!, nTop = words.map(\.normalizedBox.y).min()!
            let nRight = words.map { $0.normalizedBox.x + $0.normalizedBox.width }.max()!
            let nBottom = words.map { $0.normalizedBox.y + $0.normalizedBox.height }.max()!
            return Observation(
                level: level, text: words.map(\.text).joined(separator: " "),
                confidence: words.map(\.confidence).min()!,
                box: PixelRect(x: left, y: top, width: right - left, height: bottom - top),
                normalizedBox: NormalizedRect(x: nLeft, y: nTop, width: nRight - nLeft, height: nBottom - nTop),
                page: words[0].page,
                doubt: Observation.doubt(of: words))
        }
    }

    /// Templates made before shapes were learned: each value takes the observation (of its level) whose box best
    /// fits its region, the largest intersection over union first, ties by the distance between centres. Never "the
    /// n-th string": an extra label anywhere on the photo shifts the order of observations, not their places. A
    /// value whose region overlaps no observation is empty and uncertain; a low confidence is uncertain too.
    static func matchByPosition(_ values: [ValueDefinition], in observations: [Observation]) -> [RecordValue] {
        assignByPosition(values, in: observations).map(\.value)
    }

    static func assignByPosition(_ values: [ValueDefinition], in observations: [Observation])
        -> [(value: RecordValue, observation: Observation?)]
    {
        struct Candidate {
            var value: Int
            var observation: Int
            var overlap: Double
            var distance: Double
        }
        var candidates: [Candidate] = []
        for (valueIndex, value) in values.enumerated() {
            for (observationIndex, observation) in observations.enumerated()
            where observation.level == value.level && !observation.text.isEmpty {
                let box = observation.normalizedBox
                let intersection = value.region.intersectionArea(box)
                guard intersection > 0 else { continue }
                let union = value.region.area + box.area - intersection
                let dx = value.region.centerX - box.centerX, dy = value.region.centerY - box.centerY
                candidates.append(
                    Candidate(
                        value: valueIndex, observation: observationIndex, overlap: intersection / union,
                        distance: (dx * dx + dy * dy).squareRoot()))
            }
        }
        // Overlaps that differ only by rounding (boxes computed from different corners) count as equal.
        func rank(_ overlap: Double) -> Int64 { Int64((overlap * 1e6).rounded()) }
        candidates.sort {
            rank($0.overlap) != rank($1.overlap)
                ? rank($0.overlap) > rank($1.overlap)
                : $0.distance != $1.distance
                    ? $0.distance < $1.distance
                    : ($0.value, $0.observation) < ($1.value, $1.observation)
        }
        var result: [(value: RecordValue, observation: Observation?)] = values.map {
            (RecordValue(name: $0.name, text: "", confidence: 0, uncertainty: "nothing was read there"), nil)
        }
        var filled = Set<Int>(), used = Set<Int>()
        for candidate in candidates where !filled.contains(candidate.value) && !used.contains(candidate.observation) {
            let observation = observations[candidate.observation]
            result[candidate.value] = (
                RecordValue.reading(
                    name: values[candidate.value].name, raw: observation.text, confidence: observation.confidence,
                    uncertainty: observation.doubt
                        ?? (observation.confidence < minimumConfidence ? lowConfidence(observation.confidence) : "")),
                observation
            )
            filled.insert(candidate.value)
            used.insert(candidate.observation)
        }
        return result
    }
}
