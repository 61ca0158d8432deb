import Foundation
import OCRTestSupport
import Testing

@testable import TextRecognition

@Suite struct TesseractEngineTests {
    /// Trained data Tesseract cannot load is an error, and the handle made for it is deleted once: the failed init
    /// deleted it and then `deinit` ended and deleted it again (the double free that aborted ocr in dqlite's case).
    @Test func trainedDataThatDoesNotLoadIsAnErrorAndItsHandleIsDeletedOnce() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tessdata-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        try Data((0..<4096).map { UInt8(truncatingIfNeeded: $0 &* 31) }).write(
            to: directory.appendingPathComponent("zzz.traineddata"))
        for _ in 0..<3 {
            #expect {
                try TesseractEngine(configuration: EngineConfiguration(languages: ["zzz"]), dataPath: directory.path)
            } throws: { error in
                guard case EngineError.tesseract(let message) = error else { return false }
                return message == "initialising zzz failed"
            }
        }
    }
}

/// A reading already running stops at its limit (Tesseract's monitor deadline), so a photo's time budget is kept
/// even while Tesseract reads: before, a running reading was always waited for.
@Suite struct RecognitionLimitTests {
    @Test(.enabled(if: OCRData.enabled, Comment(rawValue: OCRData.skipText)))
    func aReadingStopsAtItsLimitAndGivesNothing() throws {
        let engine = try TesseractEngine(configuration: EngineConfiguration(languages: ["eng"]))
        let page = try ImageDecoder().decode(try OCRData.data("8071_093.3B.tif")).pages[0]
        let clock = ContinuousClock()
        var started = clock.now
        let whole = try #require(try engine.recognize(page, segmentation: .page, within: nil))
        let wholeTime = clock.now - started
        #expect(whole.words.count > 100, "a full page: \(whole.words.count) words")
        started = clock.now
        let cut = try engine.recognize(page, segmentation: .page, within: .milliseconds(20))
        let cutTime = clock.now - started
        #expect(cut == nil, "a page cut off midway is not returned")
        #expect(cutTime < wholeTime / 2, "stopped at the limit: \(cutTime) against \(wholeTime) for the whole page")
        // Without a limit, and with one it does not reach, the page is read as before.
        let again = try #require(try engine.recognize(page, segmentation: .page, within: wholeTime * 20))
        #expect(again.words.count == whole.words.count)
    }
}
