import Foundation
import OCRCore
@_exported import OCRTestSupport
import Testing
import TextRecognition

extension OCRData {
    static let skipMessage: Comment = Comment(rawValue: skipText)
}

/// One recogniser (and engine pool) for all tests in the process, so each language set initialises once or twice.
let sharedRecognizer = TextRecognizer(engines: EnginePool(maxEnginesPerConfiguration: 2))
