import Foundation
import Testing
import Torch

@testable import ClassificationCore

/// Issue 26: cancelling a training threw its work away; now the cnn hands back the best model it had, marked as such
/// (Create ML keeps snapshots).
@Suite struct CancelledTrainingTests {
    static func data() throws -> Dataset {
        try TrainingDefaultsTests.dataset((0..<12).map { TrainingDefaultsTests.noise(side: 16, seed: UInt64($0)) })
    }

    static func options(patience: Int? = nil) -> ClassifierTrainingOptions {
        var options = ClassifierTrainingOptions()
        options.epochs = 6
        options.widths = [4, 8]
        options.validationFraction = 0.34
        options.patience = patience
        return options
    }

    /// Stops the training when `stop` says so, returning what it kept.
    static func cancelled(_ options: ClassifierTrainingOptions, when stop: @escaping (TrainingProgress) -> Bool) throws
        -> TrainingInterrupted
    {
        do {
            _ = try ClassifierTrainer.train(try data(), options: options) { p in
                if stop(p) { throw CancellationError() }
            }
        } catch let interrupted as TrainingInterrupted {
            #expect(interrupted.cause is CancellationError)
            return interrupted
        }
        throw ClassificationError.invalid("the training was not interrupted")
    }

    @Test func cancelledInTheFirstPassKeepsItsWeightsAndSaysSo() throws {
        let kept = try Self.cancelled(Self.options()) { $0.pass == 1 && $0.epoch == 3 }.partial
        #expect(
            kept.header.interrupted == "in pass 1/2 after epoch 3/6; kept its weights",
            "\(kept.header.interrupted ?? "nil")")
        #expect(kept.header.algorithm == "cnn" && kept.header.validationAccuracy != nil && kept.header.seed == 0)
        #expect(kept.header.metrics["training_images"] == 8)
        // The kept file is a model: it decodes and classifies.
        let classifier = try Classifier(ModelFile.decode(kept.encoded()))
        #expect(try classifier.classify(TrainingDefaultsTests.noise(side: 16, seed: 99), top: 2).count == 2)
    }

    @Test func withPatienceTheBestEpochSoFarIsKept() throws {
        let interrupted = try Self.cancelled(Self.options(patience: 10)) { $0.pass == 1 && $0.epoch == 4 }
        let header = interrupted.partial.header
        let best = try #require(header.metrics["best_epoch"])
        #expect((1...4).contains(Int(best)))
        #expect(
            header.interrupted
                == "in pass 1/2 after epoch 4/6; kept epoch \(Int(best)), the best on the held-out images",
            "\(header.interrupted ?? "nil")")
    }

    @Test func cancelledInThePassOnEveryImageKeepsTheWholeFirstPass() throws {
        let finished = try ClassifierTrainer.train(try Self.data(), options: Self.options()) { _ in }
        let kept = try Self.cancelled(Self.options()) { $0.pass == 2 && $0.epoch == 2 }.partial
        #expect(
            kept.header.interrupted
                == "in pass 2/2 (every image) after epoch 2/6; kept pass 1's model (trained without the held-out images)",
            "\(kept.header.interrupted ?? "nil")")
        #expect(kept.header.metrics["training_images"] == 8 && finished.header.metrics["training_images"] == 12)
        #expect(kept.header.validationAccuracy == finished.header.validationAccuracy)
        #expect(finished.header.interrupted == nil)
    }

    /// A yolo training keeps its last epoch's weights (nothing validates each epoch to pick a best one).
    @Test func aCancelledDetectorKeepsItsLastEpoch() throws {
        var options = DetectorTrainingOptions()
        options.epochs = 5
        options.validationFraction = 0
        options.batchSize = 2
        try Torch.setThreads(1)
        do {
            _ = try DetectorTrainer.train(DetectorEvaluationTests.scenes(), options: options) { p in
                if p.epoch == 2 { throw CancellationError() }
            }
            Issue.record("the training was not interrupted")
        } catch let interrupted as TrainingInterrupted {
            #expect(interrupted.cause is CancellationError)
            #expect(interrupted.partial.header.interrupted == "after epoch 2/5; kept its weights")
            let detector = try Detector(ModelFile.decode(interrupted.partial.encoded()))
            #expect(detector.header.labels == ["cat", "dog"])
        }
    }
}
