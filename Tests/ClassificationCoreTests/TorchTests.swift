import Testing
import Torch

@testable import ClassificationCore

@Suite struct TorchTests {
    @Test func aCppExceptionBecomesASwiftError() throws {
        let a = try Tensor([1, 2, 3, 4, 5, 6], shape: [2, 3])
        let b = try Tensor([1, 2, 3, 4], shape: [2, 2])
        do {
            _ = try a.matmul(b)
            Issue.record("a [2, 3] × [2, 2] product succeeded")
        } catch let error as TorchError {
            // c10's message without its C++ backtrace.
            #expect(error.message.contains("cannot be multiplied"), "\(error.message)")
            #expect(!error.message.contains("Exception raised from"), "\(error.message)")
        }
        // The shim keeps working after a failure.
        #expect(try a.matmul(try Tensor([1, 0, 0, 1, 0, 0], shape: [3, 2])).floats() == [1, 2, 4, 5])
        #expect(throws: TorchError.self) { try ScriptModule(bytes: Array("not a zip archive".utf8)) }
        #expect(throws: TorchError.self) { try Tensor([1, 2, 3], shape: [2, 2]) }
    }

    @Test func tensorsRoundTripAndGradientsFlow() throws {
        let x = try Tensor([1, 2, 3], shape: [3]).requiringGradients()
        let loss = try x.squared().sum()
        try loss.backward()
        #expect(try loss.item() == 14)
        let optimizer = try Optimizer(.sgd, parameters: [x], learningRate: 0.5)
        try optimizer.step()  // x − 0.5 · 2x = 0
        #expect(try x.floats() == [0, 0, 0])
        #expect(try Tensor(int64s: [3, 1, 2], shape: [3]).int64s() == [3, 1, 2])
        #expect(try Tensor.zeros([2, 3, 4]).shape == [2, 3, 4])
    }

    @Test func threadCountIsSetExplicitly() throws {
        let before = Torch.threads
        try Torch.setThreads(2)
        #expect(Torch.threads == 2)
        try Torch.setThreads(before)
    }
}
