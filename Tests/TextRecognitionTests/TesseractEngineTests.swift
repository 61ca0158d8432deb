import Foundation
import Testing
@testable import TextRecognition

@Suite struct TesseractEngineTests {
    /// Trained data Tesseract cannot load is an error, and the handle made for it is deleted once: the failed init
    /// deleted it and then `deinit` ended and deleted it again (the double free that aborted ocr in dqlite's case).
    @Test func trainedDataThatDoesNotLoadIsAnErrorAndItsHandleIsDeletedOnce() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tessdata-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        try Data((0..<4096).map { UInt8(truncatingIfNeeded: $0 &* 31) }).write(to: directory.appendingPathComponent("zzz.traineddata"))
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
