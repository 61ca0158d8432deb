import Foundation
import Testing
@testable import OCRCore
import TextRecognition

/// The shared OCR pages (`<package root>/../shared/datasets/ocr`), ground truth beside each image.
enum OCRData {
    static let directory: URL = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("shared/datasets/ocr")

    /// Real-data tests run when the data is present, and always under `CI=true` (where they fail if it is missing).
    static let enabled = FileManager.default.fileExists(atPath: directory.path)
        || ProcessInfo.processInfo.environment["CI"] == "true"
    static let skipMessage: Comment = "skipped: ../shared/datasets/ocr is missing (set CI=true to require it)"

    static func url(_ name: String) -> URL { directory.appendingPathComponent(name) }
    static func data(_ name: String) throws -> Data { try Data(contentsOf: url(name)) }
    static func groundTruth(_ image: String) throws -> String {
        let base = (image as NSString).deletingPathExtension
        return String(decoding: try data(base + ".txt"), as: UTF8.self)
    }
}

/// One recogniser (and engine pool) for all tests in the process, so each language set initialises once or twice.
let sharedRecognizer = TextRecognizer(engines: EnginePool(maxEnginesPerConfiguration: 2))

/// Runs of white space as one space, trimmed: layout differences are not recognition errors.
func collapsingWhiteSpace(_ text: String) -> String {
    text.split(whereSeparator: \.isWhitespace).joined(separator: " ")
}

/// Character error rate: edit distance between the texts (white space collapsed) over the reference's length.
func characterErrorRate(_ recognized: String, reference: String) -> Double {
    let a = Array(collapsingWhiteSpace(recognized)), b = Array(collapsingWhiteSpace(reference))
    guard !b.isEmpty else { return a.isEmpty ? 0 : 1 }
    var previous = Array(0...a.count), current = [Int](repeating: 0, count: a.count + 1)
    for j in 1...b.count {
        current[0] = j
        for i in 1...max(1, a.count) where i <= a.count {
            current[i] = min(previous[i] + 1, current[i - 1] + 1, previous[i - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
        }
        if a.isEmpty { current[0] = j }
        swap(&previous, &current)
    }
    return Double(previous[a.count]) / Double(b.count)
}

/// The `tesseract` program on a file as its best use runs it (`OMP_THREAD_LIMIT=1`), on a thread of its own so
/// it runs beside the engine under test.
enum TesseractCLI {
    static func text(_ file: URL, languages: String = "ces+eng") async throws -> String {
        try await withCheckedThrowingContinuation { continuation in
            Thread.detachNewThread {
                let process = Process()
                process.executableURL = URL(fileURLWithPath: "/usr/bin/tesseract")
                process.arguments = [file.path, "stdout", "-l", languages]
                var environment = ProcessInfo.processInfo.environment
                environment["OMP_THREAD_LIMIT"] = "1"
                process.environment = environment
                let output = Pipe()
                process.standardOutput = output
                process.standardError = FileHandle.nullDevice
                do {
                    try process.run()
                    let data = output.fileHandleForReading.readDataToEndOfFile()
                    process.waitUntilExit()
                    continuation.resume(returning: String(decoding: data, as: UTF8.self))
                } catch {
                    continuation.resume(throwing: error)
                }
            }
        }
    }
}

/// Text rendered by Tesseract's `text2image` (Debian tesseract-ocr) with DejaVu (fonts-dejavu-core), which renders
/// any Unicode text Pango can lay out: how the tests make Czech pages and display-like photos.
enum TextRenderer {
    static let fontsDirectory = "/usr/share/fonts/truetype/dejavu"
    static var available: Bool {
        FileManager.default.isExecutableFile(atPath: "/usr/bin/text2image")
            && FileManager.default.fileExists(atPath: fontsDirectory + "/DejaVuSans.ttf")
    }

    /// A binary page with `lines` at `points` (300 dpi), and each line's box in pixels (top-left origin).
    static func render(
        _ lines: [String], points: Int = 14, width: Int = 2400, height: Int = 1600, font: String = "DejaVu Sans"
    ) throws -> (image: Image, lineBoxes: [PixelRect]) {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("ocr-render-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let textFile = directory.appendingPathComponent("text.txt")
        try Data((lines.joined(separator: "\n") + "\n").utf8).write(to: textFile)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/text2image")
        process.currentDirectoryURL = directory
        process.arguments = [
            "--text=\(textFile.path)", "--outputbase=\(directory.path)/page", "--font=\(font)",
            "--fonts_dir=\(fontsDirectory)", "--fontconfig_tmpdir=\(directory.path)", "--ptsize=\(points)",
            "--resolution=300", "--xsize=\(width)", "--ysize=\(height)", "--margin=60", "--leading=24",
        ]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw RenderError.failed(process.terminationStatus) }
        let image = try ImageDecoder().decode(Data(contentsOf: directory.appendingPathComponent("page.tif"))).pages[0]
        let boxes = String(decoding: try Data(contentsOf: directory.appendingPathComponent("page.box")), as: UTF8.self)
        return (image, lineBoxes(boxes, lines: lines, imageHeight: image.height))
    }

    enum RenderError: Error { case failed(Int32) }

    /// Groups the box file's character boxes (bottom-left origin, spaces skipped) by line.
    static func lineBoxes(_ boxFile: String, lines: [String], imageHeight: Int) -> [PixelRect] {
        var characters: [(left: Int, bottom: Int, right: Int, top: Int)] = []
        for line in boxFile.split(separator: "\n") {
            let fields = line.split(separator: " ")
            guard let first = line.first, !first.isWhitespace, fields.count >= 6,
                let left = Int(fields[fields.count - 5]), let bottom = Int(fields[fields.count - 4]),
                let right = Int(fields[fields.count - 3]), let top = Int(fields[fields.count - 2])
            else { continue }
            characters.append((left, bottom, right, top))
        }
        var boxes: [PixelRect] = []
        var next = 0
        for line in lines {
            let count = line.filter { !$0.isWhitespace }.count
            let slice = characters[min(next, characters.count)..<min(next + count, characters.count)]
            next += count
            let left = slice.map(\.left).min() ?? 0, right = slice.map(\.right).max() ?? 0
            let top = imageHeight - (slice.map(\.top).max() ?? 0), bottom = imageHeight - (slice.map(\.bottom).min() ?? 0)
            boxes.append(PixelRect(x: left, y: top, width: right - left, height: bottom - top))
        }
        return boxes
    }
}
