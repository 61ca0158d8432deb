import Foundation
import Testing

@testable import ClassificationCore

/// The shared real datasets (`<package root>/../shared/datasets`).
enum RealData {
    static let directory: URL = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("shared/datasets")

    /// Real-data tests run when the data is present, and always under `CI=true` (where they fail if it is missing).
    static let enabled =
        FileManager.default.fileExists(atPath: directory.appendingPathComponent("digits").path)
        || ProcessInfo.processInfo.environment["CI"] == "true"
    static let skipMessage: Comment = "skipped: ../shared/datasets/digits is missing (set CI=true to require it)"

    static let digitsTrain: Result<Dataset, Error> = Result {
        try DatasetBuilder.classification(directory: directory.appendingPathComponent("digits/train"))
    }
    static let digitsTest: Result<Dataset, Error> = Result {
        try DatasetBuilder.classification(directory: directory.appendingPathComponent("digits/test"))
    }
}
