import Testing
import Torch

@testable import ClassificationCore

/// The head of `features` and `transfer` weighs every label alike (issue 41's four-leaf clovers, fewer than the
/// three-leaf ones, were recalled 0.71): where the features cannot tell the labels apart, it no longer leans to the
/// larger one.
@Suite struct ClassBalanceTests {
    @Test func repeatsBalanceTheLabelsAndLeaveNearlyBalancedSetsAlone() {
        #expect(LinearHead.balancingRepeats([0, 0, 0, 0, 0, 0, 0, 0, 0, 1], classes: 2) == [1, 9])
        #expect(LinearHead.balancingRepeats([0, 0, 0, 1, 1], classes: 2) == [1, 1])  // 1.5× apart and less: as before
        #expect(LinearHead.balancingRepeats([0, 0, 0, 0, 1, 1, 2], classes: 4) == [1, 2, 4, 1])
    }

    /// Rows that say nothing (all alike), 9 of one label to 1 of the other: unbalanced, the head's answer is the
    /// counts' 0.9 / 0.1; balanced, even.
    @Test func indistinguishableRowsAreAnsweredEvenly() throws {
        let rows = [[Float]](repeating: [0.5, 0.25, 1], count: 10), targets = [0, 0, 0, 0, 0, 0, 0, 0, 0, 1]
        var options = ClassifierTrainingOptions()
        options.epochs = 300
        func answer(balanced: Bool) throws -> [Float] {
            let head = try LinearHead.fit(
                rows: rows, targets: targets, held: nil, classes: 2, options: options, balanced: balanced
            ) { _ in }.head
            return try head.probabilities([rows[0]])[0]
        }
        let unbalanced = try answer(balanced: false), balanced = try answer(balanced: true)
        #expect(abs(unbalanced[0] - 0.9) < 0.05, "\(unbalanced)")
        #expect(abs(balanced[0] - 0.5) < 0.05, "\(balanced)")
    }
}
