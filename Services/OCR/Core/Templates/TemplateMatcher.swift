/// Fills a template's values from a new photo's observations.
///
/// Each value takes the observation (of the value's level) whose box best fits the value's region: the largest
/// overlap measured as intersection over union, ties broken by the distance between centres. Never "the n-th
/// string": an extra label anywhere on the photo shifts the order of observations, not their places. Values are
/// assigned best fit first and an observation fills at most one value, so two neighbouring regions cannot both take
/// the same reading. A value whose region overlaps no observation is empty with confidence 0.
public enum TemplateMatcher {
    public static func match(_ values: [ValueDefinition], in observations: [Observation]) -> [RecordValue] {
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
            rank($0.overlap) != rank($1.overlap) ? rank($0.overlap) > rank($1.overlap)
                : $0.distance != $1.distance ? $0.distance < $1.distance
                : ($0.value, $0.observation) < ($1.value, $1.observation)
        }
        var result = values.map { RecordValue(name: $0.name, text: "", confidence: 0) }
        var filled = Set<Int>(), used = Set<Int>()
        for candidate in candidates where !filled.contains(candidate.value) && !used.contains(candidate.observation) {
            let observation = observations[candidate.observation]
            result[candidate.value].text = observation.text
            result[candidate.value].confidence = observation.confidence
            filled.insert(candidate.value)
            used.insert(candidate.observation)
        }
        return result
    }
}
