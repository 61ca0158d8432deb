import Foundation
import OpenCVDNN
import Testing
import TextRecognition

@testable import PPOCR

/// PP-OCR through OpenCV on the rendered display photos of Tests/DisplayPhotos, with the models compose installs.
@Suite(.serialized) struct DisplayReadingTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    /// The folder `compose/compose ppocr` installs (or MENAGERIE_PPOCR).
    static let folder =
        ProcessInfo.processInfo.environment["MENAGERIE_PPOCR"]
        ?? root.appendingPathComponent("compose/.cache/ppocr").path
    /// Under CI=true the tests run (and fail) without it, as `compose test` installs it.
    static let installed =
        FileManager.default.fileExists(atPath: folder + "/" + PPOCRModels.manifestName)
        || ProcessInfo.processInfo.environment["CI"] == "true"
    static let missing: Comment = "skipped: PP-OCR is not installed (compose/compose ppocr; set CI=true to require it)"

    static let models = Result { try PPOCRModels.load(directory: folder) }

    static func pixels(_ name: String) throws -> RGBPixels {
        let data = try Data(contentsOf: root.appendingPathComponent("Tests/DisplayPhotos/\(name)"))
        let image = try ImageDecoder().decode(data).pages[0]
        return RGBPixels(width: image.width, height: image.height, bytes: try image.rgbBytes())
    }

    /// The truth of `name`: its three values.
    static func truth(_ name: String) throws -> [String] {
        let lines = try String(
            contentsOf: root.appendingPathComponent("Tests/DisplayPhotos/truth.tsv"), encoding: .utf8
        )
        .split(separator: "\n")
        let row = try #require(lines.first { $0.hasPrefix(name + "\t") }).split(separator: "\t").map(String.init)
        return Array(row.suffix(3))
    }

    @Test func theModelsAreCheckedAgainstTheirManifest() throws {
        try #require(Self.installed, Self.missing)
        let models = try Self.models.get()
        #expect(models.characters.count == 18708)
        #expect(Set("ěščřžýáíéůúťďňĚŠČŘŽÝÁÍÉŮÚŤĎŇ".map(String.init)).isSubset(of: Set(models.characters)))
        // A copy with one byte changed is refused.
        let copy = FileManager.default.temporaryDirectory.appendingPathComponent("ppocr-\(UUID().uuidString)")
        try FileManager.default.copyItem(atPath: Self.folder, toPath: copy.path)
        defer { try? FileManager.default.removeItem(at: copy) }
        let characters = copy.appendingPathComponent("characters.txt")
        var bytes = try Data(contentsOf: characters)
        bytes[0] ^= 1
        try bytes.write(to: characters)
        #expect(throws: PPOCRError.self) { try PPOCRModels.load(directory: copy.path) }
        #expect(throws: PPOCRError.self) { try PPOCRModels.load(directory: copy.path + "/absent") }
    }

    @Test(arguments: ["clean-1.png", "inverted-1.png", "rotated-1.png", "small-1.png"])
    func aRenderedDisplayIsRead(_ name: String) throws {
        try #require(Self.installed, Self.missing)
        let engine = try PPOCREngine(models: try Self.models.get())
        let pixels = try Self.pixels(name)
        let clock = ContinuousClock(), start = clock.now
        let lines = try engine.read(pixels)
        let elapsed = clock.now - start
        let words = lines.flatMap(\.words).map(\.text)
        print(
            "PP-OCR \(name) (\(pixels.width) × \(pixels.height)) in \(elapsed) (debug build): \(lines.map { "\($0.text) [\(String(format: "%.2f", $0.confidence))]" })"
        )
        for value in try Self.truth(name) {
            #expect(words.contains { $0 == value || $0.hasPrefix(value) }, "\(value) not among \(words)")
        }
        #expect(lines.map(\.text).joined(separator: " ").contains("Napětí"))
        for line in lines {
            #expect(line.box.x >= 0 && line.box.x + line.box.width <= pixels.width)
            for word in line.words {
                #expect(word.box.x >= line.box.x && word.box.x + word.box.width <= line.box.x + line.box.width)
            }
        }
    }

    /// Where a phone-size photo's time goes (printed; a debug build measures Swift's own loops slowly): the display
    /// photo enlarged to 12 megapixels (4,320 × 2,777).
    @Test func aTwelveMegapixelPhotoIsReadAndTimed() throws {
        try #require(Self.installed, Self.missing)
        let engine = try PPOCREngine(models: try Self.models.get())
        let data = try Data(contentsOf: Self.root.appendingPathComponent("Tests/DisplayPhotos/clean-1.png"))
        let image = try ImageDecoder().decode(data).pages[0].scaled(by: 7.715)
        let clock = ContinuousClock()
        var start = clock.now
        let pixels = RGBPixels(width: image.width, height: image.height, bytes: try image.rgbBytes())
        let convert = clock.now - start
        start = clock.now
        let boxes = try engine.detect(pixels)
        let detect = clock.now - start
        start = clock.now
        let lines = try engine.read(pixels)
        let read = clock.now - start
        print(
            "PP-OCR on \(pixels.width) × \(pixels.height) (debug build): RGB copy \(convert), detection \(detect) (\(boxes.count) boxes), detection + recognition \(read): \(lines.map(\.text))"
        )
        let words = lines.flatMap(\.words).map(\.text)
        for value in try Self.truth("clean-1.png") {
            #expect(words.contains { $0.hasPrefix(value) }, "\(value) not among \(words)")
        }
    }
}
