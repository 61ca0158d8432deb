import Base
import Foundation
import Testing
import Torch

@testable import ClassificationCore

/// Issue 41, "fast answers": a classifier runs its TorchScript module frozen for inference (batch norm folded into
/// the convolutions), with the features of the module as loaded to float rounding.
@Suite(.serialized) struct FrozenInferenceTests {
    /// A module TorchScript cannot freeze (here: asked to keep a method it lacks) runs as loaded and says why, so the
    /// service can log that its answers come slower instead of falling back in silence; one that freezes says nothing.
    @Test func aModuleThatCannotBeFrozenSaysWhy() throws {
        let bytes = try ScriptModule.compile(
            source: """
                def forward(self, x):
                    return x.mean([2, 3])

                """)
        let header = ModelHeader(
            kind: .classifier, algorithm: "torchscript", labels: ["a"], inputWidth: 8, inputHeight: 8)
        let module = try ScriptModule(bytes: bytes)
        let frozen = ScriptFeatures(module: module, method: "forward", header: header).frozenForInference()
        #expect(frozen.notFrozen == nil && frozen.module !== module)
        let unfrozen = ScriptFeatures(module: module, method: "embedding", header: header).frozenForInference()
        #expect(unfrozen.module === module)
        #expect(unfrozen.notFrozen?.isEmpty == false, "no reason given")
    }

    @Test(.enabled(if: ONNXTransferExportTests.installed, ONNXTransferExportTests.missing))
    func theFrozenFeaturePrintGivesTheFeaturesOfTheLoadedOne() throws {
        try Torch.setThreads(Int(ProcessInfo.processInfo.environment["TORCH_THREADS"] ?? "") ?? 2)
        let file = try ONNXTransferExportTests.trained.get()
        let loaded = try ScriptFeatures(model: file, method: file.header.featureMethod)
        let frozen = loaded.frozenForInference()
        #expect(frozen.module !== loaded.module, "the feature print did not freeze")
        let inputs = try ONNXTransferExportTests.photos.map {
            try Preprocessing.input(
                $0, width: file.header.inputWidth, height: file.header.inputHeight, scaling: file.header.scaling
            ).pixels
        }
        var worst: Float = 0
        for input in inputs {
            let (a, b) = (try loaded.extract(input), try frozen.extract(input))
            #expect(a.count == b.count && a.count == 1280)
            worst = max(worst, zip(a, b).map { abs($0 - $1) }.max() ?? .infinity)
        }
        #expect(worst < 1e-4, "max |Δ| \(worst)")

        // What it saves, alternated so both see the same load (printed: the machine's load decides the figure).
        var times: [(loaded: Double, frozen: Double)] = []
        for _ in 0..<7 {
            let started = ContinuousClock.now
            _ = try loaded.extract(inputs[0])
            let middle = ContinuousClock.now
            _ = try frozen.extract(inputs[0])
            times.append(((middle - started).seconds * 1000, (ContinuousClock.now - middle).seconds * 1000))
        }
        let median = { (values: [Double]) in values.sorted()[values.count / 2] }
        print(
            String(
                format:
                    "feature print, one 224×224 photo on %d libtorch threads: as loaded p50 %.1f ms, frozen %.1f ms (max |Δ| %.1e)",
                Torch.threads, median(times.map(\.loaded)), median(times.map(\.frozen)), Double(worst)))
    }
}
