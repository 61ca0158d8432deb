import Foundation
import OCRTestSupport
import Testing
import TextRecognition

/// Photos as phones take them, through the gateway: HEIC and WebP in a dataset and in predictions, a truncated JPEG
/// refused by name (or left out under --skip-bad), several photos answered one by one; OCR reads a HEIC display.
@Suite(.serialized) struct PhonePhotoStackTests {
    /// digit-detection's img065.jpg is 59 KB: cut to 2 KB, it was accepted and classified.
    static func cutJPEG() throws -> Data {
        let whole = try Data(
            contentsOf: ClassificationStackTests.datasets.appendingPathComponent("digit-detection/images/img065.jpg"))
        return whole.prefix(2048)
    }

    @Test(.enabled(if: ClassificationStackTests.enabled, ClassificationStackTests.skipMessage))
    func heicWebPAndBadFilesInDatasetsAndPredictions() async throws {
        try await Stack.with(services: ["classification"]) { stack in
            let up = try await stack.compose("up")
            try #require(up.status == 0, "compose up failed: \(up.output)")
            let folder = stack.directory.appendingPathComponent("files/phones")
            try ClassificationStackTests.digitsSubset("train", labels: ["0", "1"], count: 12, into: folder)
            // Two of each label's PNGs turned into a HEIC and a WebP, as a phone and a browser save them.
            var converted: [URL] = []
            for label in ["0", "1"] {
                let labelFolder = folder.appendingPathComponent(label)
                let names = try FileManager.default.contentsOfDirectory(atPath: labelFolder.path).sorted()
                for (name, format) in zip(names.prefix(2), [ImageFormat.heic, .webp]) {
                    let png = labelFolder.appendingPathComponent(name)
                    let image = try ImageDecoder().decode(try Data(contentsOf: png)).pages[0]
                    let target = png.deletingPathExtension().appendingPathExtension(format.rawValue)
                    try image.converted(toDepth: 32).encoded(as: format).write(to: target)
                    try FileManager.default.removeItem(at: png)
                    converted.append(target)
                }
            }
            try Self.cutJPEG().write(to: folder.appendingPathComponent("1/cut.jpg"))
            try Data("taken at noon".utf8).write(to: folder.appendingPathComponent("0/notes.txt"))

            let refused = try await stack.gateway(["classify", "dataset", "create", "phones", "--from", folder.path])
            #expect(refused.status == 3, "\(refused.output)")
            #expect(refused.output.contains("1/cut.jpg") && refused.output.contains("truncated"), "\(refused.output)")
            #expect(refused.output.contains("skipped 0/notes.txt: not an image"), "\(refused.output)")

            let kept = try await stack.gateway([
                "classify", "dataset", "create", "phones", "--from", folder.path, "--skip-bad",
            ])
            #expect(kept.status == 0, "\(kept.output)")
            #expect(
                kept.output.contains("phones: classification, 24 images, 2 labels"),
                "the HEIC and WebP files count: \(kept.output)")
            #expect(kept.output.contains("skipped 1/cut.jpg: ") && kept.output.contains("truncated"), "\(kept.output)")
            let json = try jsonObject(
                try await stack.gateway([
                    "classify", "dataset", "create", "phones-json", "--from", folder.path, "--skip-bad", "--json",
                ]))
            #expect(
                (json["skipped"] as? [[String: Any]])?.compactMap { $0["path"] as? String } == ["1/cut.jpg"], "\(json)")

            let trained = try await stack.gateway([
                "classify", "train", "--dataset", "phones", "--epochs", "1", "--name", "phones",
            ])
            try #require(trained.status == 0, "\(trained.output)")

            // Several photos: each answered under its name, the cut one named with its error, the status its (3).
            let cut = folder.appendingPathComponent("1/cut.jpg")
            let several = try await stack.gateway([
                "classify", "image", converted[0].path, cut.path, converted[1].path, "--model", "phones", "--top", "1",
            ])
            #expect(several.status == 3, "\(several.output)")
            #expect(
                several.output.contains("\(converted[0].path):") && several.output.contains("\(converted[1].path):"),
                "\(several.output)")
            #expect(
                several.output.contains("error: \(cut.path): ") && several.output.contains("truncated"),
                "\(several.output)")
            let alone = try await stack.gateway(["classify", "image", cut.path, "--model", "phones"])
            #expect(
                alone.status == 3 && alone.output.contains("truncated"), "a cut JPEG is not classified: \(alone.output)"
            )
            let detected = try await stack.gateway(["classify", "detect", cut.path, converted[0].path])
            #expect(detected.output.contains("error: \(cut.path): "), "\(detected.output)")
        }
    }

    /// A HEIC photo of a display through `gateway ocr scan`, as an iPhone sends it: Leptonica cannot read HEIC.
    @Test func ocrReadsAHEICPhotoOfADisplay() async throws {
        try await OCRStackTests.withOCR { stack, files in
            let photo = try DisplayPhotoFixture.photo("clean-1.png")
            let heic = files.appendingPathComponent("clean-1.heic")
            try ImageDecoder().decode(try photo.data()).pages[0].encoded(as: .heic).write(to: heic)
            let scanned = try await stack.gateway(["ocr", "scan", heic.path])
            #expect(scanned.status == 0 && photo.values.allSatisfy { scanned.output.contains($0) }, "\(scanned.output)")
            let cut = files.appendingPathComponent("cut.jpg")
            try Self.cutJPEG().write(to: cut)
            let refused = try await stack.gateway(["ocr", "scan", cut.path])
            #expect(refused.status == 3 && refused.output.contains("truncated"), "\(refused.output)")
        }
    }
}
