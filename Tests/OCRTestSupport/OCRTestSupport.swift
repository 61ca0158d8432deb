import Foundation
import TextRecognition

/// The shared OCR pages (`<package root>/../shared/datasets/ocr`), ground truth beside each image.
public enum OCRData {
    public static let directory: URL = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("shared/datasets/ocr")

    /// Real-data tests run when the data is present, and always under `CI=true` (where they fail if it is missing).
    public static let enabled =
        FileManager.default.fileExists(atPath: directory.path)
        || ProcessInfo.processInfo.environment["CI"] == "true"
    public static let skipText = "skipped: ../shared/datasets/ocr is missing (set CI=true to require it)"

    public static func url(_ name: String) -> URL { directory.appendingPathComponent(name) }
    public static func data(_ name: String) throws -> Data { try Data(contentsOf: url(name)) }
    public static func groundTruth(_ image: String) throws -> String {
        let base = (image as NSString).deletingPathExtension
        return String(decoding: try data(base + ".txt"), as: UTF8.self)
    }
}

/// Runs of white space as one space, trimmed: layout differences are not recognition errors.
public func collapsingWhiteSpace(_ text: String) -> String {
    text.split(whereSeparator: \.isWhitespace).joined(separator: " ")
}

/// Character error rate: edit distance between the texts (white space collapsed) over the reference's length.
public func characterErrorRate(_ recognized: String, reference: String) -> Double {
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
public enum TesseractCLI {
    /// `psm` is tesseract's page-segmentation mode (nil: its default); `ompThreadLimit` false runs it as it runs
    /// by default (OpenMP threads on every core), for the benchmark's "by default" row.
    public static func text(
        _ file: URL, languages: String = "ces+eng", psm: String? = nil, ompThreadLimit: Bool = true
    ) async throws -> String {
        try await withCheckedThrowingContinuation { continuation in
            Thread.detachNewThread {
                let process = Process()
                process.executableURL = URL(fileURLWithPath: "/usr/bin/tesseract")
                process.arguments = [file.path, "stdout", "-l", languages] + (psm.map { ["--psm", $0] } ?? [])
                var environment = ProcessInfo.processInfo.environment
                // A process that links TextRecognition sets OMP_THREAD_LIMIT=1 for its children; the default run drops it.
                if ompThreadLimit {
                    environment["OMP_THREAD_LIMIT"] = "1"
                } else {
                    environment.removeValue(forKey: "OMP_THREAD_LIMIT")
                }
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
public enum TextRenderer {
    public static let fontsDirectory = "/usr/share/fonts/truetype/dejavu"
    public static var available: Bool {
        FileManager.default.isExecutableFile(atPath: "/usr/bin/text2image")
            && FileManager.default.fileExists(atPath: fontsDirectory + "/DejaVuSans.ttf")
    }

    /// A binary page with `lines` at `points` (300 dpi), and each line's box in pixels (top-left origin).
    public static func render(
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

    public enum RenderError: Error { case failed(Int32) }

    /// Groups the box file's character boxes (bottom-left origin, spaces skipped) by line.
    public static func lineBoxes(_ boxFile: String, lines: [String], imageHeight: Int) -> [PixelRect] {
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
            let top = imageHeight - (slice.map(\.top).max() ?? 0),
                bottom = imageHeight - (slice.map(\.bottom).min() ?? 0)
            boxes.append(PixelRect(x: left, y: top, width: right - left, height: bottom - top))
        }
        return boxes
    }
}

/// Display-like photos rendered for template tests and the benchmark: light digits on a dark panel (a battery
/// monitor), the values changing between photos and a `CHARGING` label that moves about, sometimes between them.
public enum DisplayPhotos {
    public static let labels = ["Volts", "Amps", "Temp"]
    public static let values = [["12.64", "3.20", "24.5"], ["13.05", "0.85", "22.1"], ["11.92", "7.43", "26.8"]]
    public static let distractor = "CHARGING"
    /// Where the distractor sits on each photo.
    public static let distractorPlaces = [(560, 610), (250, 205), (80, 30)]

    /// Every snippet of text (labels, values, the distractor and `extra`), cut out of one rendered sheet.
    public static func snippets(extra: [String] = []) throws -> [String: Image] {
        let texts = labels + values.flatMap { $0 } + [distractor] + extra
        let sheet = try TextRenderer.render(texts, points: 14, width: 900, height: 1700 + 100 * extra.count)
        var cut: [String: Image] = [:]
        for (text, box) in zip(texts, sheet.lineBoxes) {
            cut[text] = try sheet.image.cropped(
                to: PixelRect(x: box.x - 4, y: box.y - 4, width: box.width + 8, height: box.height + 8))
        }
        return cut
    }

    /// Photo `index` (0…2) as a PNG of 1000 × 700 pixels.
    public static func photo(_ index: Int, _ snippets: [String: Image]) throws -> Data {
        try photo(values: values[index], distractorAt: distractorPlaces[index], snippets)
    }

    /// A panel showing `values` beside the labels and the distractor at `distractorAt` (in a 1000 × 700 layout),
    /// `scale` times that size (the text keeps its size).
    public static func photo(
        values shown: [String], distractorAt place: (Int, Int), scale: Double = 1, _ snippets: [String: Image]
    ) throws -> Data {
        func s(_ value: Int) -> Int { Int((Double(value) * scale).rounded()) }
        var panel = try Image.blank(width: s(1000), height: s(700), gray: 60)
        for (row, label) in labels.enumerated() {
            panel = try panel.painting(snippets[label]!, x: s(80), y: s(120 + 180 * row), gray: 235)
            panel = try panel.painting(snippets[shown[row]]!, x: s(560), y: s(120 + 180 * row), gray: 235)
        }
        panel = try panel.painting(snippets[distractor]!, x: s(place.0), y: s(place.1), gray: 235)
        return try panel.encoded(as: .png)
    }
}

/// The committed display photos of `Tests/DisplayPhotos` (made by its `generate.py`) and their ground truth: a
/// charger's panel with "Napětí 14.38 V", "Proud 2.10 A", "Nabito 45 %" under one condition each (clean, inverted,
/// shifted, small, large, blurred, rotated, seven-segment), plus the photos the template tests name and rendered
/// Czech lines. In the repository, so tests on them never skip.
public enum DisplayPhotoFixture {
    public static let directory: URL = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("DisplayPhotos")
    public static let valueNames = ["Napětí", "Proud", "Nabito"]
    public static let units = ["V", "A", "%"]

    public struct Photo: Sendable {
        public var file: String
        public var condition: String
        public var font: String
        public var polarity: String
        /// As the display shows them, in `valueNames` order ("" for a value the display does not show).
        public var values: [String]
        public var url: URL { DisplayPhotoFixture.directory.appendingPathComponent(file) }
        public func data() throws -> Data { try Data(contentsOf: url) }
    }

    /// Every photo of `truth.tsv`, in its order.
    public static func photos() throws -> [Photo] {
        let text = String(decoding: try Data(contentsOf: directory.appendingPathComponent("truth.tsv")), as: UTF8.self)
        return text.split(separator: "\n").dropFirst().map { line in
            let fields = line.split(separator: "\t", omittingEmptySubsequences: false).map(String.init)
            return Photo(
                file: fields[0], condition: fields[1], font: fields[2], polarity: fields[3],
                values: Array(fields[9...]) + Array(repeating: "", count: max(0, 12 - fields.count)))
        }
    }

    public static func photo(_ file: String) throws -> Photo {
        guard let photo = try photos().first(where: { $0.file == file }) else { throw FixtureError.missing(file) }
        return photo
    }

    /// The photos the template tests name: the template's first photo, the display moved up by a row, one
    /// whose current reads nothing, and one whose current (in volts, half a row up) fits two slots.
    public static let templatePhotos = ["template", "moved-up-a-row", "no-current", "two-slots"]

    /// The conditions in the order the photos list them (the template tests' own photos left out).
    public static func conditions(_ photos: [Photo]) -> [String] {
        var seen: [String] = []
        for photo in photos where !seen.contains(photo.condition) && !templatePhotos.contains(photo.condition) {
            seen.append(photo.condition)
        }
        return seen
    }

    /// Which of `photo`'s values appear in `text` as a word of their own (a unit stuck to the number allowed:
    /// `14.38V`): how a scan is scored.
    public static func valuesRead(_ text: String, photo: Photo) -> Int {
        let words = Set(
            text.split(whereSeparator: \.isWhitespace).map { word -> String in
                var word = String(word)
                while let last = word.last, "VA%".contains(last) { word.removeLast() }
                return word
            })
        return photo.values.filter { !$0.isEmpty && words.contains($0) }.count
    }

    /// Rendered Czech text: `czech-N.png` with `czech-N.txt`.
    public static func czechPages() throws -> [(image: URL, truth: String)] {
        try (1...3).map { n in
            (
                directory.appendingPathComponent("czech-\(n).png"),
                String(
                    decoding: try Data(contentsOf: directory.appendingPathComponent("czech-\(n).txt")), as: UTF8.self)
            )
        }
    }

    public enum FixtureError: Error { case missing(String) }
}

/// A phone's photo of a device (issue 40): a light grey body with dark labels at the left and a black display
/// whose values glow orange (a charger), the display a third of the frame, so the photo as a whole is not dark
/// and the values are light on dark while the labels are dark on light. Any size (`width` × 3/4 of it: 4000 for
/// 12 MP), dimmed for a photo in low light; the text scales with the photo.
public enum DevicePhoto {
    public static let labels = ["Napětí", "Proud", "Nabito"]
    public static let values = ["239.8 V", "2.10 A", "45 %"]
    public static let numbers = ["239.8", "2.10", "45"]

    /// The labels' and values' snippets, rendered once (binary, about 40 px high).
    public static func snippets() throws -> [String: Image] {
        let texts = labels + values
        let sheet = try TextRenderer.render(texts, points: 16, width: 900, height: 900)
        var cut: [String: Image] = [:]
        for (text, box) in zip(texts, sheet.lineBoxes) {
            cut[text] = try sheet.image.cropped(
                to: PixelRect(x: box.x - 4, y: box.y - 4, width: box.width + 8, height: box.height + 8))
        }
        return cut
    }

    /// The photo as an image (RGB); `light` scales every colour (1: daylight, 0.2: a dim room).
    public static func image(
        width: Int = 1000, light: Double = 1, degrees: Double = 0, valueScale: Double = 1.4, _ snippets: [String: Image]
    ) throws -> Image {
        let height = width * 3 / 4, k = Double(width) / 1000
        func s(_ value: Int) -> Int { Int((Double(value) * k).rounded()) }
        // Grey levels stand for colours until the end: 190 body, 12 display, 40 labels, 161 the display's digits.
        var grey = try Image.blank(width: width, height: height, gray: 190)
        grey = try grey.pasting(try Image.blank(width: s(620), height: s(480), gray: 12), x: s(300), y: s(130))
        for (row, (label, value)) in zip(labels, values).enumerated() {
            let y = s(190 + 140 * row)
            grey = try grey.painting(try snippets[label]!.scaled(by: k), x: s(50), y: y, gray: 40)
            grey = try grey.painting(try snippets[value]!.scaled(by: k * valueScale), x: s(400), y: y - s(8), gray: 161)
        }
        let levels = try grey.greyBytes()
        var rgb = [UInt8](repeating: 0, count: levels.count * 3)
        func scaled(_ c: Double) -> UInt8 { UInt8(max(0, min(255, (c * light).rounded()))) }
        let orange = (scaled(255), scaled(140), scaled(20))
        var table = [(UInt8, UInt8, UInt8)](repeating: (0, 0, 0), count: 256)
        for level in 0..<256 {
            let v = scaled(Double(level))
            table[level] = (v, v, v)
        }
        table[161] = orange
        rgb.withUnsafeMutableBufferPointer { out in
            for (index, level) in levels.enumerated() {
                let c = table[Int(level)]
                out[3 * index] = c.0
                out[3 * index + 1] = c.1
                out[3 * index + 2] = c.2
            }
        }
        let photo = try Image.fromRGB(rgb, width: width, height: height)
        return degrees == 0 ? photo : try photo.rotated(degrees: degrees)
    }

    /// The photo as a JPEG, as a phone stores it.
    public static func jpeg(
        width: Int = 1000, light: Double = 1, degrees: Double = 0, valueScale: Double = 1.4, _ snippets: [String: Image]
    ) throws -> Data {
        try image(width: width, light: light, degrees: degrees, valueScale: valueScale, snippets).encoded(as: .jpeg)
    }
}
