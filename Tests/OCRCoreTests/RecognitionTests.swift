import Foundation
import Testing
import TextRecognition

@testable import OCRCore

/// Recognition on the shared pages and on pages the tests render, through `TextRecognizer` with default options
/// (`ces+eng`, accurate) unless a test says otherwise.
@Suite struct RecognitionTests {
    static let pages = ["phototest.tif", "eurotext.tif", "8071_093.3B.tif", "8087_054.3B.tif"]

    /// Each shared page with ground truth: no more wrong characters than the `tesseract` program makes on it with
    /// the same languages. The program runs beside the service's engine, as it would in a benchmark.
    @Test(.enabled(if: OCRData.enabled, OCRData.skipMessage), arguments: pages)
    func noWorseThanTheCommandLineProgram(page: String) async throws {
        async let cli = TesseractCLI.text(OCRData.url(page))
        let result = try await sharedRecognizer.recognize(try OCRData.data(page))
        let truth = try OCRData.groundTruth(page)
        let ours = characterErrorRate(result.text, reference: truth)
        let theirs = characterErrorRate(try await cli, reference: truth)
        print(
            "CER \(page): service \(String(format: "%.2f", ours * 100)) %, tesseract program \(String(format: "%.2f", theirs * 100)) %, \(String(format: "%.2f", result.timings.total)) s"
        )
        #expect(ours <= theirs + 0.0005, "\(page): \(ours) vs the program's \(theirs)")
    }

    /// Pages turned by 90°, 180° and 270° come out upright in accurate mode (the program gets over 80 % wrong on the
    /// 180° one).
    @Test(
        .enabled(if: OCRData.enabled, OCRData.skipMessage),
        arguments: [
            ("phototest-rotated-L.png", 90), ("phototest-rotated-R.png", 270), ("phototest-rotated-180.png", 180),
        ])
    func rotatedPagesAreTurnedUpright(page: String, degrees: Int) async throws {
        let result = try await sharedRecognizer.recognize(try OCRData.data(page))
        let rate = characterErrorRate(result.text, reference: try OCRData.groundTruth("phototest.tif"))
        print("CER \(page): \(String(format: "%.2f", rate * 100)) % (turned \(result.orientationDegrees)°)")
        #expect(rate < 0.01)
        #expect(result.orientationDegrees == degrees)
        #expect(result.pages[0].width == 640 && result.pages[0].height == 480, "boxes are in the upright image")
    }

    /// White text on black: an inverted copy of phototest.tif reads as well as the original.
    @Test(.enabled(if: OCRData.enabled, OCRData.skipMessage), arguments: RecognitionLevel.allCases)
    func invertedPageReadsAsWellAsTheOriginal(level: RecognitionLevel) async throws {
        let original = try OCRData.data("phototest.tif")
        let inverted = try ImageDecoder().decode(original).pages[0].inverted().grayscale().encoded(as: .png)
        let options = RecognitionOptions(level: level)
        let truth = try OCRData.groundTruth("phototest.tif")
        let originalRate = characterErrorRate(
            try await sharedRecognizer.recognize(original, options: options).text, reference: truth)
        let result = try await sharedRecognizer.recognize(inverted, options: options)
        let invertedRate = characterErrorRate(result.text, reference: truth)
        print(
            "CER inverted phototest (\(level)): \(String(format: "%.2f", invertedRate * 100)) %, original \(String(format: "%.2f", originalRate * 100)) %"
        )
        #expect(result.pages[0].inverted)
        #expect(invertedRate <= originalRate + 0.002)
    }

    static let czech = [
        "Příliš žluťoučký kůň úpěl ďábelské ódy.",
        "Hleď, toť čarovný je loužek, kde hedvábné",
        "štěstí září. Večer jsme šli do zoologické",
        "zahrady: lvi, tygři, žirafy a čápi. Ředitel",
        "řekl, že nový pavilon otevřou příští úterý.",
    ]

    /// Czech with every diacritic, rendered by the test, under 3 % wrong characters with the default languages.
    @Test(.enabled(if: TextRenderer.available, "skipped: text2image or DejaVu fonts are missing"))
    func czechWithDiacritics() async throws {
        let page = try TextRenderer.render(Self.czech, points: 12, width: 2200, height: 700).image
        let result = try await sharedRecognizer.recognize(try page.encoded(as: .png))
        let rate = characterErrorRate(result.text, reference: Self.czech.joined(separator: " "))
        print("CER rendered Czech: \(String(format: "%.2f", rate * 100)) %\n\(result.text)")
        #expect(rate < 0.03)
    }

    /// A colour JPEG photo of the page goes through the grey conversion and the local threshold.
    @Test(.enabled(if: OCRData.enabled, OCRData.skipMessage))
    func colourJPEGIsBinarisedAndRead() async throws {
        let page = try ImageDecoder().decode(try OCRData.data("phototest.tif")).pages[0]
        let jpeg = try page.converted(toDepth: 32).encoded(as: .jpeg)
        let result = try await sharedRecognizer.recognize(jpeg)
        let rate = characterErrorRate(result.text, reference: try OCRData.groundTruth("phototest.tif"))
        print("CER colour JPEG phototest: \(String(format: "%.2f", rate * 100)) %")
        // 1.06 % since the accurate level keeps, of the binarised, the grey enlarged and the plain reading, the one
        // with the highest mean confidence (one character more wrong here than the binarised reading alone).
        #expect(rate < 0.015)
    }

    /// Every page of a multi-page TIFF is read; observations say their page.
    @Test(.enabled(if: OCRData.enabled, OCRData.skipMessage))
    func multiPageTIFF() async throws {
        let page = try ImageDecoder().decode(try OCRData.data("phototest.tif")).pages[0]
        let data = try Image.multipageTIFF([try Image.blank(width: 200, height: 100, depth: 1), page])
        let result = try await sharedRecognizer.recognize(data, options: RecognitionOptions(level: .fast))
        #expect(result.pages.count == 2)
        #expect(result.pages[0].observations.isEmpty)
        #expect(!result.observations.isEmpty && result.observations.allSatisfy { $0.page == 1 })
        #expect(result.text.hasPrefix("This is a lot of 12 point text"))
    }

    @Test func undecodableBytesAreInvalidArgument() async throws {
        await #expect(throws: OCRError(.invalidArgument, "cannot decode image")) {
            try await sharedRecognizer.recognize(Data("not an image at all".utf8))
        }
    }

    @Test func tooManyPixelsAreResourceExhausted() async throws {
        let recognizer = TextRecognizer(engines: sharedRecognizer.engines, limits: DecodeLimits(maxPixels: 10_000))
        let data = try Image.blank(width: 200, height: 100).encoded(as: .png)
        await #expect(
            throws: OCRError(.resourceExhausted, ImageError.tooManyPixels(pixels: 20_000, limit: 10_000).description)
        ) {
            try await recognizer.recognize(data)
        }
    }

    @Test func aPageWithoutTextIsNotFound() async throws {
        let data = try Image.blank(width: 300, height: 200).encoded(as: .png)
        await #expect(throws: OCRError.noText) {
            try await sharedRecognizer.recognize(data, options: RecognitionOptions(level: .fast))
        }
    }

    @Test func invalidOptionsAreRefusedBeforeAnyWork() async throws {
        let data = Data()
        await #expect(throws: OCRError.self) {
            try await sharedRecognizer.recognize(data, options: RecognitionOptions(languages: ["klingon"]))
        }
        await #expect(throws: OCRError.self) {
            try await sharedRecognizer.recognize(data, options: RecognitionOptions(languages: []))
        }
        await #expect(throws: OCRError.self) {
            try await sharedRecognizer.recognize(data, options: RecognitionOptions(minimumTextHeight: 1.5))
        }
        await #expect(throws: OCRError.self) {
            try await sharedRecognizer.recognize(data, options: RecognitionOptions(customWords: ["two words"]))
        }
        #expect(RecognitionOptions.languages(from: "ces+eng") == ["ces", "eng"])
    }
}
