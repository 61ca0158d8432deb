import Base
import Foundation
import RPC
import Testing
import TextRecognition

@testable import OCRService

/// Issue 24: upload bytes draw from the process's memory budget, so six unfinished 400 MiB batches no
/// longer take a replica to 2.8 GB: past the budget a chunk waits for room, then is refused, and what an
/// upload held comes back when it is dropped (the client went away) or its batch's job ends.
@Suite struct UploadBudgetTests {
    @Test func anUploadPastTheBudgetIsRefusedAfterWaitingAndItsBytesComeBackWhenDropped() async throws {
        let budget = MemoryBudget(limit: 200 << 10)
        let chunk = [UInt8](repeating: 0, count: 64 << 10)
        do {
            var first = UploadCollector(limit: 1 << 30, decoder: ImageDecoder(), reservation: MemoryReservation(budget))
            var second = UploadCollector(
                limit: 1 << 30, decoder: ImageDecoder(), reservation: MemoryReservation(budget),
                patience: .milliseconds(200))
            try await first.append(chunk)
            try await first.append(chunk)
            try await second.append(chunk)
            #expect(budget.used == 3 * chunk.count)
            let started = ContinuousClock.now
            await #expect {
                try await second.append(chunk)
            } throws: { error in
                let error = error as? RPCError
                return error?.code == .resourceExhausted && error?.message.contains("memory budget") == true
            }
            #expect(ContinuousClock.now - started >= .milliseconds(200), "refused only once its patience ran out")
            #expect(budget.used == 3 * chunk.count, "the refused chunk took nothing")
            #expect(budget.refused == 1, "one refusal counted, not one per try")
        }
        #expect(budget.used == 0)
    }

    /// Backpressure before refusal: a chunk that does not fit waits (its upload reads nothing more of the stream
    /// meanwhile) and goes on as soon as another upload gives its bytes back — before, it was refused at once.
    @Test func aChunkThatDoesNotFitWaitsForAnotherUploadToFinish() async throws {
        let budget = MemoryBudget(limit: 200 << 10)
        let chunk = [UInt8](repeating: 0, count: 64 << 10)
        let other = MemoryReservation(budget)
        #expect(other.grow(by: 3 * chunk.count))
        // The other upload lets go on a thread of its own: a task's timer could wait past the chunk's patience while
        // other tests' blocking work holds the cooperative pool (seen under a parallel `swift test`), and the chunk
        // would be refused for the test's sake, not the budget's.
        let released = Thread {
            Thread.sleep(forTimeInterval: 0.15)
            other.releaseAll()
        }
        released.start()
        var upload = UploadCollector(limit: 1 << 30, decoder: ImageDecoder(), reservation: MemoryReservation(budget))
        try await upload.append(chunk)
        #expect(upload.data.count == chunk.count)
        #expect(budget.used == chunk.count && budget.refused == 0)
    }

    /// A batch's files share one reservation, held past each file until the batch lets go.
    @Test func aBatchsFilesHoldTheirShareUntilReleased() async throws {
        let budget = MemoryBudget(limit: 1 << 20)
        let held = MemoryReservation(budget)
        for _ in 0..<3 {
            var file = UploadCollector(limit: 1 << 30, decoder: ImageDecoder(), reservation: held)
            try await file.append([UInt8](repeating: 0, count: 100 << 10))
            _ = try file.finish()
        }
        #expect(budget.used == 300 << 10)
        held.releaseAll()
        #expect(budget.used == 0)
    }

    /// A photo's decoded pages hold about `DecodeHold.bytesPerPixel` bytes a pixel of the budget while it is read: refused when they do not
    /// fit within the patience, held while they do, nothing for bytes whose header does not read.
    @Test func aPhotosDecodedPagesHoldTheirShareWhileItIsRead() async throws {
        let png = try #require(
            Data(
                base64Encoded:
                    "iVBORw0KGgoAAAANSUhEUgAAAGQAAABkCAAAAABVicqIAAAAIUlEQVR4nO3BgQAAAADDoPlTX+EAVQEAAAAAAAAAAACPASd0AAEsXIkWAAAAAElFTkSuQmCC"
            ))
        #expect(ImageDecoder.announcedPixels(prefix: png) == 100 * 100)
        let budget = MemoryBudget(limit: 100 << 10)
        let held = try await DecodeHold.reserve(
            for: png, maxPixels: 1 << 30, budget: budget, patience: .milliseconds(50))
        #expect(held.bytes == 100 * 100 * DecodeHold.bytesPerPixel && budget.used == held.bytes)
        await #expect {
            _ = try await DecodeHold.reserve(for: png, maxPixels: 1 << 30, budget: budget, patience: .milliseconds(50))
        } throws: { error in
            (error as? RPCError)?.code == .resourceExhausted
                && (error as? RPCError)?.message.contains("memory budget") == true
        }
        #expect(budget.used == held.bytes, "the refused photo holds nothing")
        held.releaseAll()
        #expect(budget.used == 0, "given back once the photo is read")
        let unreadable = try await DecodeHold.reserve(
            for: Data(repeating: 7, count: 100), maxPixels: 1 << 30, budget: budget)
        #expect(unreadable.bytes == 0)
    }

    /// The default pixel limit comes from the memory budget: a photo at the limit fits an empty budget whole, so a
    /// photo its header admits is never one the budget can never hold (before: 60 MP against 256 MiB at 6 bytes a
    /// pixel, while a 36 MP scan took 328 MB — admitted, then its hold could not be had and it waited to be refused).
    @Test func theDefaultPixelLimitIsWhatTheBudgetHolds() async throws {
        for mib in [64, 256, 1024] {
            let budget = MemoryBudget(limit: mib << 20)
            let pixels = Int(DecodeHold.megapixels(fittingIn: budget.limit) * 1_000_000)
            #expect(pixels * DecodeHold.bytesPerPixel <= budget.limit, "\(mib) MiB")
            #expect((pixels + 1_000) * DecodeHold.bytesPerPixel > budget.limit, "\(mib) MiB: the limit uses the budget")
            #expect(
                budget.reserve(pixels * DecodeHold.bytesPerPixel), "\(mib) MiB: a photo at the limit is held at once")
        }
        #expect(DecodeHold.bytesPerPixel >= 10, "a 36 MP PNG's scan raised peak RSS by 9.1 bytes a pixel (issue 40)")
    }
}
