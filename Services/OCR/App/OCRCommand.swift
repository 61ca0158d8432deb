import ArgumentParser
import Foundation
import OCRCore
import OCRService
import ServiceKit
import TextRecognition

/// The ocr service executable.
@main
struct OCRCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ocr",
        abstract: "Menagerie's ocr service: text recognition with Tesseract, templates and records.",
        discussion: """
            Templates and records live in an SQLite file (--database, default DATA_DIR/ocr.sqlite) that replicas \
            may share. Recognition uses the trained data in $TESSDATA_PREFIX or Debian's tessdata directory.
            """)

    @OptionGroup var options: ServiceOptions

    @Option(name: .customLong("database"), help: "The SQLite file (default: DATA_DIR/ocr.sqlite).")
    var databasePath: String?

    @Option(name: .customLong("max-megapixels"), help: "Largest decoded image (per page) accepted, in megapixels.")
    var maxMegapixels = 60.0

    func validate() throws {
        guard maxMegapixels.isFinite, maxMegapixels >= 0.01, maxMegapixels <= 1000 else {
            throw ValidationError("--max-megapixels must be 0.01…1000 (got \(maxMegapixels))")
        }
    }

    func run() async throws {
        try await ServiceRunner.run(name: "ocr", options: options) { environment in
            let path = databasePath ?? environment.dataDirectory.appendingPathComponent("ocr.sqlite").path
            let store = try TemplateStore(path: path)
            let recognizer = TextRecognizer(limits: DecodeLimits(maxPixels: Int(maxMegapixels * 1_000_000)))
            return [OCRService(store: store, recognizer: recognizer)]
        }
    }
}
