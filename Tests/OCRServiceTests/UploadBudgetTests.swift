import Base
import Foundation
import RPC
import Testing
import TextRecognition
@testable import OCRService

/// Issue 24: upload bytes draw from the process's memory budget, so six unfinished 400 MiB batches no
/// longer take a replica to 2.8 GB: past the budget a chunk is refused, and what an upload held comes
/// back when it is dropped (the client went away) or its batch's job ends.
@Suite struct UploadBudgetTests {
    @Test func anUploadPastTheBudgetIsRefusedAndItsBytesComeBackWhenDropped() throws {
        let budget = MemoryBudget(limit: 200 << 10)
        let chunk = [UInt8](repeating: 0, count: 64 << 10)
        do {
            var first = UploadCollector(limit: 1 << 30, decoder: ImageDecoder(), reservation: MemoryReservation(budget))
            var second = UploadCollector(limit: 1 << 30, decoder: ImageDecoder(), reservation: MemoryReservation(budget))
            try first.append(chunk)
            try first.append(chunk)
            try second.append(chunk)
            #expect(budget.used == 3 * chunk.count)
            #expect {
                try second.append(chunk)
            } throws: { error in
                let error = error as? RPCError
                return error?.code == .resourceExhausted && error?.message.contains("memory budget") == true
            }
            #expect(budget.used == 3 * chunk.count, "the refused chunk took nothing")
        }
        #expect(budget.used == 0)
    }

    /// A batch's files share one reservation, held past each file until the batch lets go.
    @Test func aBatchsFilesHoldTheirShareUntilReleased() throws {
        let budget = MemoryBudget(limit: 1 << 20)
        let held = MemoryReservation(budget)
        for _ in 0..<3 {
            var file = UploadCollector(limit: 1 << 30, decoder: ImageDecoder(), reservation: held)
            try file.append([UInt8](repeating: 0, count: 100 << 10))
            _ = try file.finish()
        }
        #expect(budget.used == 300 << 10)
        held.releaseAll()
        #expect(budget.used == 0)
    }
}
