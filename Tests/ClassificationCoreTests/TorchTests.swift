import Foundation
import TestSupport
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

    /// A thread of its own ends with its work and takes its OpenMP threads with it (libgomp keeps them for as long as
    /// the thread that ran a parallel operation lives; outnumbering the cores, they made every inference pay for
    /// wake-ups: 18–21 ms against 10.4); its result and errors come back.
    @Test func aThreadOfItsOwnTakesItsOpenMPThreadsWithIt() throws {
        let named: @Sendable () -> [String] = {
            ((try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []).filter { task in
                (try? String(contentsOfFile: "/proc/self/task/\(task)/comm", encoding: .utf8))?
                    .trimmingCharacters(in: .whitespacesAndNewlines) == Torch.threadName
            }
        }
        let during = try Torch.onThreadOfItsOwn { () throws -> (threads: Int, sum: Float) in
            try Torch.setThreads(2)
            let product = try Tensor.ones([256, 256]).matmul(try Tensor.ones([256, 256]))
            return (named().count, try product.sum().item())
        }
        #expect(during.sum == 256 * 256 * 256)
        // The thread and the OpenMP thread its parallel operations started.
        try #require(ProcessInfo.processInfo.activeProcessorCount >= 2, "one core: no OpenMP thread to see")
        #expect(during.threads >= 2, "\(during.threads) threads")
        // The thread and its OpenMP thread end; a thread of libtorch's process-wide pool (`pthreadpool`, started
        // anew whenever a thread sets its count, as the new thread's first operation does) may stay.
        let deadline = ContinuousClock.now + TestTime.scaled(.seconds(10))
        while named().count > during.threads - 2, ContinuousClock.now < deadline { Thread.sleep(forTimeInterval: 0.01) }
        #expect(named().count <= during.threads - 2, "\(named()) left of \(during.threads)")
        #expect(throws: TorchError.self) { try Torch.onThreadOfItsOwn { try Tensor([1, 2, 3], shape: [2, 2]) } }
    }

    @Test func threadCountIsSetExplicitly() throws {
        let before = Torch.threads
        try Torch.setThreads(2)
        #expect(Torch.threads == 2)
        try Torch.setThreads(before)
    }
}
