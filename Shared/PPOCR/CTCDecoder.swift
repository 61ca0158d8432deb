/// One character a recognition network read, with the output step (column) it was read at.
public struct DecodedCharacter: Sendable, Hashable {
    public var character: String
    public var probability: Double
    public var step: Int
}

/// CTC greedy decoding of a recognition network's output: at each step (a column of the line) the most probable
/// class; repeats of a class collapse into one character, the blank (class 0) separates them and is dropped.
/// Classes 1…n are the model's characters, class n + 1 a space.
public struct CTCDecoder: Sendable {
    public let characters: [String]

    /// `characters`: the model's character list (its `character` metadata), without the blank and the space.
    public init(characters: [String]) {
        self.characters = characters
    }

    public var classCount: Int { characters.count + 2 }

    /// The characters of `probabilities` (`steps` × `classCount`, step-major), each with its probability.
    public func decode(_ probabilities: [Float], steps: Int) -> [DecodedCharacter] {
        let classes = classCount
        precondition(
            probabilities.count == steps * classes, "the output does not hold \(steps) steps of \(classes) classes")
        var decoded: [DecodedCharacter] = []
        var previous = 0
        probabilities.withUnsafeBufferPointer { values in
            for step in 0..<steps {
                let row = step * classes
                var best = 0
                var bestValue = values[row]
                for index in 1..<classes where values[row + index] > bestValue {
                    best = index
                    bestValue = values[row + index]
                }
                defer { previous = best }
                guard best != 0, best != previous else { continue }
                let character = best <= characters.count ? characters[best - 1] : " "
                decoded.append(DecodedCharacter(character: character, probability: Double(bestValue), step: step))
            }
        }
        return decoded
    }
}
