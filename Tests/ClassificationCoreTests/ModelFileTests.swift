import Base
import Foundation
import TLS
import Testing
import Torch

@testable import ClassificationCore

@Suite(.serialized) struct ModelFileTests {
    func sample() -> ModelFile {
        var header = ModelHeader(
            kind: .classifier, algorithm: "cnn", labels: ["a", "b"], inputWidth: 16, inputHeight: 16)
        header.trainingAccuracy = 0.9
        header.metrics = ["accuracy": 0.8]
        header.history = [
            TrainingProgress(epoch: 1, epochs: 2, loss: 0.7, trainingAccuracy: 0.5, validationAccuracy: nil),
            TrainingProgress(
                epoch: 2, epochs: 2, loss: 0.3, trainingAccuracy: 0.9, validationAccuracy: 0.8, pass: 2, passes: 2),
        ]
        return ModelFile(header: header, tensors: [NamedArray(name: "w", shape: [2, 2], values: [1, -2, 3.5, 0])])
    }

    @Test func roundTripsAndRefusesCorruptOrForeignFiles() throws {
        let bytes = try sample().encoded()
        #expect(try ModelFile.decode(bytes) == sample())
        func refusal(_ bytes: [UInt8]) -> String? {
            do {
                _ = try ModelFile.decode(bytes)
                return nil
            } catch let error as ClassificationError {
                #expect(error.category == .invalidArgument)
                return error.message
            } catch { return "\(error)" }
        }
        var flipped = bytes
        flipped[flipped.count - 40] ^= 1
        #expect(refusal(flipped)?.contains("checksum") == true)
        #expect(refusal(Array(bytes.dropLast(5)))?.contains("checksum") == true)
        #expect(
            refusal(Array("PK\u{3}\u{4} a zip file, not ours, long enough to pass the size check easily".utf8))?
                .contains("magic") == true)
        var future = bytes
        future[16] = 9
        #expect(refusal(future)?.contains("version 9") == true)
    }

    /// A model fine-tuned from an imported module is written as version 2, which a version-1 reader refuses instead
    /// of taking it for the plain module; every other model stays version 1.
    /// The container's checksum is no signature: anyone can write a file whose tensor table declares shapes whose
    /// product overflows. Reading it must refuse it (INVALID_ARGUMENT), not trap on the multiplication and take the
    /// replica down with it, nor allocate what the shape declares.
    @Test func aTensorTableWhoseShapesOverflowIsRefused() throws {
        for shape in [
            "[4294967296,4294967296]", "[3037000500,3037000500]", "[9223372036854775807,2]", "[2305843009213693952]",
        ] {
            let bytes = try sample().encoded()
            let length = Int(bytes[20]) | Int(bytes[21]) << 8 | Int(bytes[22]) << 16 | Int(bytes[23]) << 24
            let json = String(decoding: bytes[24..<(24 + length)], as: UTF8.self).replacingOccurrences(
                of: "\"shape\":[2,2]", with: "\"shape\":\(shape)")
            #expect(json.contains(shape))
            var forged = Array(bytes[..<20])
            let jsonBytes = Array(json.utf8)
            forged += (0..<4).map { UInt8(truncatingIfNeeded: jsonBytes.count >> (8 * $0)) }
            forged += jsonBytes + bytes[(24 + length)..<(bytes.count - 32)]
            forged += SHA256.digest(forged)
            #expect(throws: ClassificationError.self, "shape \(shape)") { _ = try ModelFile.decode(forged) }
        }
    }

    @Test func onlyAFineTunedModuleNeedsVersionTwo() throws {
        #expect(try sample().encoded()[16] == 1)
        var tuned = sample()
        tuned.header.algorithm = "torchscript"
        tuned.header.featureMethod = "features"
        tuned.script = [1, 2, 3]
        let bytes = try tuned.encoded()
        #expect(bytes[16] == 2)
        #expect(try ModelFile.decode(bytes) == tuned)
    }

    @Test func aTrainedNetworkReloadsWithTheSamePredictions() throws {
        try Torch.seed(7)
        let network = try ResidualNetwork(ResidualNetworkConfiguration(widths: [4, 8], classes: 3))
        var header = ModelHeader(
            kind: .classifier, algorithm: "cnn", labels: ["x", "y", "z"], inputWidth: 8, inputHeight: 8)
        header.network = network.configuration
        let file = ModelFile(header: header, tensors: try network.parameters.export())
        let classifier = try Classifier(try ModelFile.decode(try file.encoded()))
        let input: [Float] = (0..<(3 * 64)).map { (i: Int) -> Float in Float(i % 7) / 7 }
        let direct = try ClassifierTrainer.predictNetwork(network, [input], side: 8)[0]
        let reloaded = try classifier.probabilities([input])[0]
        #expect(direct == reloaded)
        #expect(abs(reloaded.reduce(0, +) - 1) < 1e-5)
        // A file whose tensors do not fit its network is refused.
        var wrong = file
        wrong.header.network = ResidualNetworkConfiguration(widths: [4, 16], classes: 3)
        #expect(throws: ClassificationError.self) { try Classifier(wrong) }
    }
}

@Suite(.serialized) struct AugmentationTests {
    @Test func theSameSeedGivesTheSameImages() {
        let image: [Float] = (0..<(3 * 16 * 16)).map { (i: Int) -> Float in Float((i * 37) % 101) / 101 }
        let augmentation = Augmentation(flip: true, crop: 0.1, rotation: 15, blur: true, exposure: 0.2, noise: 0.05)
        var a = SeededRandom(seed: 42), b = SeededRandom(seed: 42), c = SeededRandom(seed: 43)
        let first = (0..<5).map { _ in augmentation.apply(image, channels: 3, height: 16, width: 16, using: &a) }
        let second = (0..<5).map { _ in augmentation.apply(image, channels: 3, height: 16, width: 16, using: &b) }
        let other = (0..<5).map { _ in augmentation.apply(image, channels: 3, height: 16, width: 16, using: &c) }
        #expect(first == second)
        #expect(first != other)
        #expect(first[0] != image)
        #expect(first.allSatisfy { $0.allSatisfy { (0...1).contains($0) } })
        var d = SeededRandom(seed: 1)
        #expect(Augmentation.none.apply(image, channels: 3, height: 16, width: 16, using: &d) == image)
    }

    static func tinyDataset() throws -> Dataset {
        var files: [(path: String, bytes: [UInt8])] = []
        for i in 0..<4 {
            files.append(
                (
                    "left/\(i).png",
                    TestPNG.encode(TestPNG.solid(width: 16, height: 16, colour: (40, 40, 40), mark: (3, 4 + i)))
                ))
            files.append(
                (
                    "right/\(i).png",
                    TestPNG.encode(TestPNG.solid(width: 16, height: 16, colour: (40, 40, 40), mark: (12, 4 + i)))
                ))
        }
        return try DatasetBuilder.classification(files: files)
    }

    @Test func theSameSeedGivesTheSameNetwork() throws {
        try Torch.setThreads(1)
        var options = ClassifierTrainingOptions()
        options.algorithm = .cnn
        options.widths = [4, 8]
        options.epochs = 2
        options.batchSize = 4
        options.inputSize = 16
        options.augmentation = Augmentation(crop: 0.1, rotation: 5)
        options.seed = 11
        var first = try ClassifierTrainer.train(Self.tinyDataset(), options: options)
        var second = try ClassifierTrainer.train(Self.tinyDataset(), options: options)
        first.header.trainingSeconds = nil
        second.header.trainingSeconds = nil
        #expect(first.tensors == second.tensors)
        #expect(try first.encoded() == second.encoded())
        options.seed = 12
        let third = try ClassifierTrainer.train(Self.tinyDataset(), options: options)
        #expect(third.tensors != first.tensors)
    }

    @Test func theSameSeedAndDataGiveTheSameModel() throws {
        // Two features models trained from the same seed on the same small set are byte-identical.
        var files: [(path: String, bytes: [UInt8])] = []
        for i in 0..<4 {
            files.append(
                (
                    "left/\(i).png",
                    TestPNG.encode(TestPNG.solid(width: 16, height: 16, colour: (40, 40, 40), mark: (3, 4 + i)))
                ))
            files.append(
                (
                    "right/\(i).png",
                    TestPNG.encode(TestPNG.solid(width: 16, height: 16, colour: (40, 40, 40), mark: (12, 4 + i)))
                ))
        }
        let dataset = try DatasetBuilder.classification(files: files)
        var options = ClassifierTrainingOptions()
        options.algorithm = .features
        options.epochs = 30
        options.augmentation = Augmentation(crop: 0.05, noise: 0.02)
        options.seed = 5
        var first = try ClassifierTrainer.train(dataset, options: options)
        var second = try ClassifierTrainer.train(dataset, options: options)
        first.header.trainingSeconds = nil
        second.header.trainingSeconds = nil
        #expect(try first.encoded() == second.encoded())
        options.seed = 6
        var third = try ClassifierTrainer.train(dataset, options: options)
        third.header.trainingSeconds = nil
        #expect(try third.encoded() != first.encoded())
    }
}
