import Foundation
import Testing
import Torch

@testable import ClassificationCore

/// An imported TorchScript classifier as the base of fine-tuning: a frozen feature extractor under a linear head
/// trained for the new labels. The modules are compiled from TorchScript source here; nothing is downloaded.
@Suite struct ScriptBaseTests {
    /// A "model trained elsewhere" for the labels red, green, blue: its embedding (`features`) is the mean and the
    /// spread of each channel; its output the three channel means as scores.
    static let colourModule = """
        def features(self, x):
            return torch.cat([x.mean([2, 3]), x.std([2, 3])], 1)
        def forward(self, x):
            return x.mean([2, 3]) * 10.0
        """

    static func base(_ source: String, labels: [String] = ["red", "green", "blue"], side: Int = 8) throws -> ModelFile {
        var header = ModelHeader(
            kind: .classifier, algorithm: "torchscript", labels: labels, inputWidth: side, inputHeight: side)
        header.mean = [0.5, 0.5, 0.5]
        header.std = [0.25, 0.25, 0.25]
        return ModelFile(header: header, tensors: [], script: try ScriptModule.compile(source: source + "\n"))
    }

    static func photo(_ colour: (UInt8, UInt8, UInt8), mark: Int) -> [UInt8] {
        TestPNG.encode(TestPNG.solid(width: 12, height: 12, colour: colour, mark: (mark, 6)))
    }

    /// Warm and cool colours, four photos each: labels the base never had.
    static func temperatures() throws -> Dataset {
        let warm: [(UInt8, UInt8, UInt8)] = [(220, 30, 20), (240, 140, 10), (230, 200, 20), (200, 60, 60)]
        let cool: [(UInt8, UInt8, UInt8)] = [(20, 40, 220), (20, 200, 210), (30, 180, 60), (60, 60, 200)]
        return try DatasetBuilder.classification(
            files: warm.enumerated().map { ("warm/\($0.offset).png", photo($0.element, mark: 2 + $0.offset)) }
                + cool.enumerated().map { ("cool/\($0.offset).png", photo($0.element, mark: 2 + $0.offset)) })
    }

    static var noHoldOut: ClassifierTrainingOptions {
        var options = ClassifierTrainingOptions()
        options.validationFraction = 0
        return options
    }

    @Test func fineTuningTrainsAHeadOnTheModulesEmbedding() throws {
        let base = try Self.base(Self.colourModule)
        let file = try ClassifierTrainer.train(try Self.temperatures(), options: Self.noHoldOut, base: base)
        #expect(file.header.algorithm == "torchscript" && file.header.featureMethod == "features")
        #expect(file.header.labels == ["cool", "warm"])
        #expect(file.script == base.script, "the module is kept as it came")
        #expect(
            file.header.inputWidth == 8 && file.header.mean == base.header.mean && file.header.std == base.header.std)
        #expect(file.tensors.first { $0.name == "weight" }?.shape == [2, 6], "a head over the 6 embedding features")
        #expect(file.header.trainingAccuracy == 1)

        // Stored and loaded again, it tells colours it never saw apart.
        let classifier = try Classifier(ModelFile.decode(try file.encoded()))
        let orange = try RGBImage.decode(Self.photo((250, 120, 40), mark: 9), name: "orange.png")
        let teal = try RGBImage.decode(Self.photo((10, 150, 160), mark: 9), name: "teal.png")
        #expect(try classifier.classify(orange, top: 1).map(\.label) == ["warm"])
        #expect(try classifier.classify(teal, top: 1).map(\.label) == ["cool"])
        let all = try classifier.classify(teal, top: 5)
        #expect(all.count == 2 && abs(all.map(\.confidence).reduce(0, +) - 1) < 1e-5)
    }

    @Test func withoutAnExportedEmbeddingTheModulesOutputIsTheFeature() throws {
        let base = try Self.base("def forward(self, x):\n    return x.mean([2, 3]) * 10.0\n")
        let file = try ClassifierTrainer.train(try Self.temperatures(), options: Self.noHoldOut, base: base)
        #expect(file.header.featureMethod == "forward")
        #expect(file.tensors.first { $0.name == "weight" }?.shape == [2, 3])
        #expect(file.header.trainingAccuracy == 1)
    }

    /// A model fine-tuned from a module is a base too: its module and method carry on, under a new head.
    @Test func aFineTunedModelIsABaseAgain() throws {
        let first = try ClassifierTrainer.train(
            try Self.temperatures(), options: Self.noHoldOut, base: try Self.base(Self.colourModule))
        let primaries = try DatasetBuilder.classification(files: [
            ("red/a.png", Self.photo((230, 20, 20), mark: 2)), ("red/b.png", Self.photo((200, 40, 30), mark: 3)),
            ("green/a.png", Self.photo((20, 220, 30), mark: 2)), ("green/b.png", Self.photo((40, 180, 40), mark: 3)),
            ("blue/a.png", Self.photo((20, 30, 230), mark: 2)), ("blue/b.png", Self.photo((40, 40, 190), mark: 3)),
        ])
        let second = try ClassifierTrainer.train(primaries, options: Self.noHoldOut, base: first)
        #expect(second.header.labels == ["blue", "green", "red"] && second.header.featureMethod == "features")
        #expect(second.script == first.script)
        let classifier = try Classifier(second)
        #expect(
            try classifier.classify(try RGBImage.decode(Self.photo((30, 200, 60), mark: 8), name: "g.png"), top: 1).map(
                \.label) == ["green"])
    }

    /// The cnn's default shifts and turns are not applied to a frozen extractor's training: only augmentation asked
    /// for adds copies (the default added them, as `Augmentation?`'s `?? .none` read as nil).
    @Test func noAugmentationUnlessAskedFor() throws {
        let base = try Self.base(Self.colourModule), data = try Self.temperatures()
        var plain = Self.noHoldOut
        plain.augmentation = Augmentation.none
        var brightened = Self.noHoldOut
        brightened.augmentation = Augmentation(exposure: 0.3)
        let byDefault = try ClassifierTrainer.train(data, options: Self.noHoldOut, base: base)
        #expect(byDefault.tensors == (try ClassifierTrainer.train(data, options: plain, base: base)).tensors)
        #expect(byDefault.tensors != (try ClassifierTrainer.train(data, options: brightened, base: base)).tensors)
    }

    @Test func modelsThatCannotBeABaseAreRefused() throws {
        let script = try Self.base(Self.colourModule)
        var onnx = script.header
        onnx.algorithm = "onnx"
        #expect(throws: ClassificationError.self) { try ClassifierTrainer.checkBase(onnx, algorithm: .cnn) }
        var scriptDetector = script.header
        scriptDetector.kind = .detector
        #expect(throws: ClassificationError.self) { try ClassifierTrainer.checkBase(scriptDetector, algorithm: .cnn) }
        #expect(throws: ClassificationError.self) { try DetectorTrainer.checkBase(script.header) }
        var cnn = ModelHeader(kind: .classifier, algorithm: "cnn", labels: ["a", "b"], inputWidth: 16, inputHeight: 16)
        cnn.network = ResidualNetworkConfiguration(widths: [4, 8], classes: 2)
        #expect(throws: ClassificationError.invalid("a cnn base fine-tunes with the cnn algorithm, not features")) {
            try ClassifierTrainer.checkBase(cnn, algorithm: .features)
        }
        try ClassifierTrainer.checkBase(cnn, algorithm: .cnn)
        try ClassifierTrainer.checkBase(script.header, algorithm: .cnn)
        try ClassifierTrainer.checkBase(script.header, algorithm: .features)
    }

    /// A module whose features differ in length from image to image cannot carry a linear head.
    @Test func featuresOfVaryingLengthAreRefused() throws {
        let base = try Self.base(
            "def features(self, x):\n    return x[x > 0.0]\ndef forward(self, x):\n    return x.mean([2, 3])\n")
        #expect(
            throws: ClassificationError.invalid(
                "the TorchScript module's features returns no features of one fixed length")
        ) {
            try ClassifierTrainer.train(try Self.temperatures(), options: Self.noHoldOut, base: base)
        }
    }

    /// A module that fails on the images is the imported model's fault: INVALID_ARGUMENT naming it.
    @Test func aModuleFailingOnTheImagesIsInvalidArgument() throws {
        let base = try Self.base(
            "def features(self, x):\n    return x.view(7, 11)\ndef forward(self, x):\n    return x.mean([2, 3])\n")
        do {
            _ = try ClassifierTrainer.train(try Self.temperatures(), options: Self.noHoldOut, base: base)
            Issue.record("training succeeded")
        } catch let error as ClassificationError {
            #expect(
                error.category == .invalidArgument && error.message.contains("the TorchScript model does not run"),
                "\(error)")
        }
    }
}

/// The real digits with a module whose embedding is the 8×8 block means of the grey image (the digits are 8×8
/// scans scaled up): a linear head on it must classify most of the test set.
@Suite(.enabled(if: RealData.enabled, RealData.skipMessage))
struct ScriptBaseDigitsTests {
    @Test func aHeadOnAnImportedEmbeddingLearnsTheDigits() throws {
        let train = try RealData.digitsTrain.get(), test = try RealData.digitsTest.get()
        let base = try ScriptBaseTests.base(
            """
            def features(self, x):
                return torch.adaptive_avg_pool2d(x.mean(1, keepdim=True), [8, 8]).flatten(1)
            def forward(self, x):
                return x.mean([2, 3])
            """, side: 32)
        let file = try ClassifierTrainer.train(train, options: ClassifierTrainingOptions(), base: base)
        let evaluation = try ClassifierEvaluation.run(try Classifier(file), on: test)
        print(
            "digits on an imported 8×8 embedding: test accuracy \(evaluation.accuracy), validation \(file.header.validationAccuracy ?? -1), \(file.header.trainingSeconds ?? -1) s"
        )
        #expect(file.header.featureMethod == "features" && file.header.validationAccuracy != nil)
        #expect(evaluation.accuracy >= 0.9)
    }
}
