import Testing

@testable import ClassificationCore

/// Issue 26: right-angle turns for photos taken from above — exact quarter turns, each as likely, no resampling.
@Suite struct AugmentationTurnsTests {
    /// A 3×3 image of two channels, every value distinct.
    static let image: [Float] = (0..<18).map(Float.init)

    @Test func quarterTurnsAreExactPermutations() {
        let once = Augmentation.turned(Self.image, channels: 2, height: 3, width: 3, quarters: 1)
        // Clockwise: the left column, bottom to top, becomes the top row.
        #expect(Array(once[0..<3]) == [6, 3, 0] && Array(once[9..<12]) == [15, 12, 9])
        #expect(Augmentation.turned(once, channels: 2, height: 3, width: 3, quarters: 3) == Self.image)
        let twice = Augmentation.turned(Self.image, channels: 2, height: 3, width: 3, quarters: 2)
        #expect(twice == Augmentation.turned(once, channels: 2, height: 3, width: 3, quarters: 1))
        #expect(Array(twice[0..<9]) == (0..<9).reversed().map(Float.init))
        #expect(Augmentation.turned(Self.image, channels: 2, height: 3, width: 3, quarters: 4) == Self.image)
    }

    @Test func turnsDrawEveryRightAngleAndOnlyThose() {
        let turns = Augmentation(turns: true)
        let expected = (0..<4).map { Augmentation.turned(Self.image, channels: 2, height: 3, width: 3, quarters: $0) }
        var random = SeededRandom(seed: 7)
        var seen = [Int](repeating: 0, count: 4)
        for _ in 0..<400 {
            let out = turns.apply(Self.image, channels: 2, height: 3, width: 3, using: &random)
            guard let k = expected.firstIndex(of: out) else {
                Issue.record("not a right-angle turn: \(out)")
                return
            }
            seen[k] += 1
        }
        #expect(seen.allSatisfy { $0 > 60 }, "\(seen)")
        // A wide image keeps its shape: upright or upside down.
        let wide: [Float] = (0..<6).map(Float.init)
        for _ in 0..<50 {
            let out = turns.apply(wide, channels: 1, height: 2, width: 3, using: &random)
            #expect(out == wide || out == wide.reversed())
        }
        #expect(!turns.isNone && Augmentation(turns: false).isNone)
    }
}
