import Foundation
import Testing
import Torch

@testable import ClassificationCore

/// The cnn's defaults that depend on the data: the input side from the images' size and detail, the default
/// augmentation, and merging the feedback dataset into a training set.
@Suite struct TrainingDefaultsTests {
    /// A seeded noise image (every pixel its own: detail at full resolution), or the same scaled up `factor` times
    /// by repeating pixels (no more detail than the small one).
    static func noise(side: Int, factor: Int = 1, seed: UInt64) -> RGBImage {
        var random = SeededRandom(seed: seed)
        let small = side / factor
        let source = (0..<small * small * 3).map { _ in UInt8(random.next() % 256) }
        var pixels = [UInt8](repeating: 0, count: side * side * 3)
        for y in 0..<side {
            for x in 0..<side {
                for c in 0..<3 { pixels[(y * side + x) * 3 + c] = source[((y / factor) * small + x / factor) * 3 + c] }
            }
        }
        return RGBImage(width: side, height: side, pixels: pixels)
    }

    static func dataset(_ images: [RGBImage], labels: [String] = ["a", "b"]) throws -> Dataset {
        try DatasetBuilder.classification(
            files: images.enumerated().map { index, image in
                ("\(labels[index % labels.count])/\(index).png", TestPNG.encode(image))
            })
    }

    /// `--epochs 2` with a share held out runs two passes of 2 epochs (validation, then every image), each epoch
    /// reported as of its pass — it read "epoch 1/4 … 4/4", as if `--epochs` had been doubled.
    @Test func epochsMeanWhatTheySayInEachPass() throws {
        var options = ClassifierTrainingOptions()
        options.epochs = 2
        options.widths = [4, 8]
        var seen: [TrainingProgress] = []
        _ = try ClassifierTrainer.train(
            try Self.dataset((0..<6).map { Self.noise(side: 16, seed: UInt64($0)) }), options: options
        ) { seen.append($0) }
        #expect(
            seen.map { "\($0.pass)/\($0.passes) \($0.epoch)/\($0.epochs)" } == [
                "1/2 1/2", "1/2 2/2", "2/2 1/2", "2/2 2/2",
            ])
        #expect(seen.map(\.fraction) == [0.25, 0.5, 0.75, 1])
    }

    /// `patience` stops the first pass once the validation loss has not improved for that many epochs, keeps the
    /// best epoch's weights and runs the pass on every image for as many epochs as the best one. Noise with
    /// alternating labels has nothing to learn, so the validation loss soon stops improving.
    @Test func patienceStopsEarlyAndKeepsTheBestEpoch() throws {
        var options = ClassifierTrainingOptions()
        options.epochs = 30
        options.widths = [4, 8]
        options.patience = 2
        options.validationFraction = 0.25
        var seen: [TrainingProgress] = []
        let file = try ClassifierTrainer.train(
            try Self.dataset((0..<16).map { Self.noise(side: 16, seed: UInt64($0)) }), options: options
        ) { seen.append($0) }
        let first = seen.filter { $0.pass == 1 }, second = seen.filter { $0.pass == 2 }
        let best = try #require(file.header.metrics["best_epoch"])
        #expect(
            first.count < 30 && first.count == Int(best) + 2,
            "stopped 2 epochs after the best (\(first.count), best \(best))")
        #expect(second.count == Int(best) && second.allSatisfy { $0.epochs == Int(best) })
    }

    @Test func theInputSideFollowsTheImagesSizeAndDetail() throws {
        // Detailed 32×32 images keep 32; the same size blown up from 8×8 (as the digits are) halves to 16, the floor.
        #expect(
            ClassifierTrainer.defaultInputSize(try Self.dataset((0..<6).map { Self.noise(side: 32, seed: UInt64($0)) }))
                == 32)
        #expect(
            ClassifierTrainer.defaultInputSize(
                try Self.dataset((0..<6).map { Self.noise(side: 32, factor: 4, seed: UInt64($0)) })) == 16)
        // 64×64 made of 2×2 blocks: one halving, to 32, then detail.
        #expect(
            ClassifierTrainer.defaultInputSize(
                try Self.dataset((0..<6).map { Self.noise(side: 64, factor: 2, seed: UInt64($0)) })) == 32)
        // Photos: the median side, at most 96.
        #expect(
            ClassifierTrainer.defaultInputSize(
                try Self.dataset((0..<4).map { Self.noise(side: 200, seed: UInt64($0)) })) == 96)
        // Tiny images: at least 16.
        #expect(
            ClassifierTrainer.defaultInputSize(try Self.dataset((0..<4).map { Self.noise(side: 8, seed: UInt64($0)) }))
                == 16)
    }

    @Test func detailLostByHalving() throws {
        let blocks = try Preprocessing.input(
            Self.noise(side: 16, factor: 2, seed: 1), width: 16, height: 16, scaling: .fill
        ).pixels
        #expect(ClassifierTrainer.detailLost(byHalving: blocks, side: 16) == 0)
        let detailed = try Preprocessing.input(Self.noise(side: 16, seed: 1), width: 16, height: 16, scaling: .fill)
            .pixels
        #expect(ClassifierTrainer.detailLost(byHalving: detailed, side: 16) > 0.3)
        #expect(ClassifierTrainer.detailLost(byHalving: [Float](repeating: 0.5, count: 3 * 16 * 16), side: 16) == 0)
    }

    @Test func cnnShiftsAndRotatesByDefault() {
        var options = ClassifierTrainingOptions()
        #expect(options.resolvedAugmentation == Augmentation(crop: 0.1, rotation: 10))
        options.algorithm = .features
        #expect(options.resolvedAugmentation == .none)
        options.augmentation = Augmentation(flip: true)
        #expect(options.resolvedAugmentation == Augmentation(flip: true))
        options.algorithm = .cnn
        options.augmentation = Augmentation.none
        #expect(options.resolvedAugmentation == .none)
    }

    @Test func feedbackMergesIntoATrainingSet() throws {
        let training = try Self.dataset((0..<4).map { Self.noise(side: 8, seed: UInt64($0)) }, labels: ["cat", "dog"])
        // Feedback: one new photo under "dog" and one of the training photos (a "cat") corrected to "dog"; its "emu"
        // photos are left out first.
        var feedback = try DatasetBuilder.classification(files: [
            ("dog/new.png", TestPNG.encode(Self.noise(side: 8, seed: 10))),
            ("dog/corrected.png", TestPNG.encode(Self.noise(side: 8, seed: 0))),
            ("emu/1.png", TestPNG.encode(Self.noise(side: 8, seed: 11))),
            ("emu/2.png", TestPNG.encode(Self.noise(side: 8, seed: 12))),
        ])
        let emus = feedback.samples
        feedback.samples.removeAll { feedback.labels[$0.label] == "emu" }
        let merged = try training.merging(feedback)
        #expect(merged.labels == ["cat", "dog"])
        #expect(merged.samples.count == 5)
        #expect(merged.countsPerLabel == ["cat": 1, "dog": 4])
        #expect(merged.samples.allSatisfy { merged.images[$0.hash] != nil })
        // A label the training set lacks is named.
        feedback.samples = emus
        do {
            _ = try training.merging(feedback)
            Issue.record("an unknown feedback label was merged")
        } catch let error as ClassificationError {
            #expect(error.category == .invalidArgument)
            #expect(
                error.message.contains("feedback label emu is not among the dataset's labels (cat, dog)"),
                "\(error.message)")
        }
    }

    /// yolo's box loss is 1 − GIoU: hand-computed cases (centres and sizes).
    @Test func generalisedIoU() throws {
        func giou(_ a: [Float], _ b: [Float]) throws -> Float {
            try DetectorTrainer.giou(
                centre: Tensor([a[0], a[1]], shape: [1, 2]), size: Tensor([a[2], a[3]], shape: [1, 2]),
                targetCentre: Tensor([b[0], b[1]], shape: [1, 2]), targetSize: Tensor([b[2], b[3]], shape: [1, 2])
            ).item()
        }
        #expect(abs(try giou([0, 0, 2, 2], [0, 0, 2, 2]) - 1) < 1e-6)
        // Half overlapping: intersection 2, union 6, hull 6.
        #expect(abs(try giou([0, 0, 2, 2], [1, 0, 2, 2]) - 1.0 / 3) < 1e-6)
        // Apart: no intersection, union 8, hull 12 → −1/3.
        #expect(abs(try giou([0, 0, 2, 2], [4, 0, 2, 2]) + 1.0 / 3) < 1e-6)
    }

    /// A predicted box far smaller than its object, on its centre, is pulled towards the object's size by the default
    /// box loss; 1 − GIoU alone pulls it by the area ratio only, next to nothing, and in short trainings such boxes
    /// stayed dots (16 scenes: mAP50 0.003, see DetectionTrainingTests).
    @Test func aBoxFarSmallerThanItsObjectIsPulledBack() throws {
        /// The gradient of the loss with respect to the log-scale of a box 1/100 of its object's side (one SGD step
        /// of rate 1 moves the parameter by minus the gradient).
        func pull(scaleWeight: Double) throws -> Float {
            let start = Float(-4.6)  // e^-4.6 ≈ 0.01 of the anchor, which is the object's size
            let raw = try Tensor([0, 0, start, start], shape: [1, 4]).requiringGradients()
            let optimizer = try Optimizer(.sgd, parameters: [raw], learningRate: 1)
            let loss = try DetectorTrainer.boxLoss(
                .giou, raw: raw, anchorCells: Tensor([1, 1], shape: [1, 2]),
                centre: Tensor([0.5, 0.5], shape: [1, 2]), size: Tensor([1, 1], shape: [1, 2]),
                logScale: Tensor([0, 0], shape: [1, 2]), mask: Tensor([1], shape: [1, 1]),
                scaleWeight: scaleWeight)
            try optimizer.zeroGradients()
            try loss.backward()
            try optimizer.step()
            return try raw.narrowed(dim: 1, start: 2, length: 1).item() - start
        }
        #expect(try pull(scaleWeight: 0) < 0.001)
        #expect(try pull(scaleWeight: DetectorTrainingOptions.giouScaleWeight) > 0.2)
    }
}
