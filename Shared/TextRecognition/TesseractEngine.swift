import CTesseract
import Foundation

/// What an engine is initialised with. Tesseract reads languages and user words only at initialisation, so
/// engines are pooled per configuration (`EnginePool`).
public struct EngineConfiguration: Sendable, Hashable {
    /// Tesseract language codes in priority order (`["ces", "eng"]` is Tesseract's `ces+eng`).
    public var languages: [String]
    /// Words added to the dictionary (domain terms), so the recogniser prefers them over look-alikes.
    public var userWords: [String]
    /// Tesseract user patterns (`\d\d.\d V`), one per entry.
    public var userPatterns: [String]

    public init(languages: [String] = ["ces", "eng"], userWords: [String] = [], userPatterns: [String] = []) {
        self.languages = languages
        self.userWords = Array(Set(userWords.filter { !$0.isEmpty })).sorted()
        self.userPatterns = Array(Set(userPatterns.filter { !$0.isEmpty })).sorted()
    }

    /// Tesseract's spelling of the language list.
    public var languageString: String { languages.joined(separator: "+") }
}

/// Why an engine could not be made or could not read an image.
public enum EngineError: Error, Equatable, Sendable, CustomStringConvertible {
    /// A language with no trained data installed (or an invalid code).
    case languageUnavailable(String)
    /// Tesseract failed to initialise or to recognise (an internal error).
    case tesseract(String)

    public var description: String {
        switch self {
        case .languageUnavailable(let language):
            "language \(language) is not installed (installed: \(TesseractRuntime.installedLanguages().joined(separator: ", ")))"
        case .tesseract(let message): "tesseract failed: \(message)"
        }
    }
}

/// How Tesseract should look for text (its page-segmentation mode).
public enum SegmentationMode: String, Sendable, CaseIterable {
    /// A page of blocks and columns, found automatically (PSM 3, Tesseract's default).
    case page
    /// One uniform block of text (PSM 6).
    case block
    /// A single line (PSM 7).
    case line
    /// As much text as possible in no particular order: labels, displays, signs (PSM 11).
    case sparse

    var tesseractMode: TessPageSegMode {
        switch self {
        case .page: PSM_AUTO
        case .block: PSM_SINGLE_BLOCK
        case .line: PSM_SINGLE_LINE
        case .sparse: PSM_SPARSE_TEXT
        }
    }
}

/// A recognised word, line or block: its text, Tesseract's confidence scaled to 0–1 and its box in pixels of the
/// image it was recognised on (top-left origin).
public struct RecognizedText: Sendable, Hashable {
    public var text: String
    public var confidence: Double
    public var box: PixelRect

    public init(text: String, confidence: Double, box: PixelRect) {
        self.text = text
        self.confidence = confidence
        self.box = box
    }
}

public struct RecognizedLine: Sendable, Hashable {
    public var line: RecognizedText
    public var words: [RecognizedText]

    public init(line: RecognizedText, words: [RecognizedText]) {
        self.line = line
        self.words = words
    }
}

public struct RecognizedBlock: Sendable, Hashable {
    public var block: RecognizedText
    public var lines: [RecognizedLine]

    public init(block: RecognizedText, lines: [RecognizedLine]) {
        self.block = block
        self.lines = lines
    }
}

/// What Tesseract found on one image.
public struct RecognizedPage: Sendable, Hashable {
    public var width: Int
    public var height: Int
    public var blocks: [RecognizedBlock]

    public init(width: Int, height: Int, blocks: [RecognizedBlock]) {
        self.width = width
        self.height = height
        self.blocks = blocks
    }

    /// The text of all blocks, lines separated by newlines and blocks by blank lines.
    public var text: String {
        blocks.map { $0.lines.map(\.line.text).joined(separator: "\n") }.joined(separator: "\n\n")
    }

    public var words: [RecognizedText] { blocks.flatMap { $0.lines.flatMap(\.words) } }
}

/// Where the text's top points, as Tesseract's orientation detection (OSD) sees it.
public struct OrientationEstimate: Sendable, Hashable {
    /// Clockwise quarter turns that make the page upright (0–3).
    public var quarterTurnsToUpright: Int
    /// Tesseract's orientation confidence (higher is surer; below about 2 it is a guess).
    public var confidence: Double
    /// The script it saw (`Latin`, `Cyrillic`…).
    public var script: String
}

/// One initialised Tesseract engine (`TessBaseAPI`) and, made when first needed, an orientation detector.
///
/// Not thread-safe: an engine is used by one thread at a time, which `EnginePool` guarantees by lending each to
/// one caller. `@unchecked Sendable` so the pool can hand it between threads.
public final class TesseractEngine: @unchecked Sendable {
    public let configuration: EngineConfiguration
    private let handle: OpaquePointer
    private var orientationDetector: OpaquePointer?

    /// Loads the trained data of `configuration.languages` from `dataPath` with the LSTM recogniser (about 0.3 s for
    /// `ces+eng`).
    public init(configuration: EngineConfiguration, dataPath: String = TesseractRuntime.dataPath) throws {
        TesseractRuntime.configureOnce()
        let installed = Set(TesseractRuntime.installedLanguages(in: dataPath))
        guard !configuration.languages.isEmpty else { throw EngineError.languageUnavailable("(none)") }
        for language in configuration.languages where !installed.contains(language) {
            throw EngineError.languageUnavailable(language)
        }
        self.configuration = configuration
        guard let handle = TessBaseAPICreate() else { throw EngineError.tesseract("TessBaseAPICreate") }
        // Every stored property is set from here on: a throw runs `deinit`, which ends and deletes the handle.
        self.handle = handle

        var files: [URL] = []
        defer { for file in files { try? FileManager.default.removeItem(at: file) } }
        // Init-only variables: the user word and pattern files are read during initialisation.
        var variables: [(String, String)] = [("debug_file", "/dev/null")]
        func temporaryFile(_ lines: [String], _ suffix: String) throws -> String {
            let url = FileManager.default.temporaryDirectory
                .appendingPathComponent("menagerie-ocr-\(UUID().uuidString).\(suffix)")
            try Data((lines.joined(separator: "\n") + "\n").utf8).write(to: url)
            files.append(url)
            return url.path
        }
        do {
            if !configuration.userWords.isEmpty {
                variables.append(("user_words_file", try temporaryFile(configuration.userWords, "user-words")))
            }
            if !configuration.userPatterns.isEmpty {
                variables.append(("user_patterns_file", try temporaryFile(configuration.userPatterns, "user-patterns")))
            }
        } catch {
            throw EngineError.tesseract("cannot write the user words: \(error)")
        }
        let status = Self.withCStrings(variables.map(\.0)) { names in
            Self.withCStrings(variables.map(\.1)) { values in
                TessBaseAPIInit4(
                    handle, dataPath, configuration.languageString, OEM_LSTM_ONLY, nil, 0,
                    names, values, variables.count, 0)
            }
        }
        guard status == 0 else { throw EngineError.tesseract("initialising \(configuration.languageString) failed") }
        // Global and adaptive inversion stays Tesseract's own too: a line it reads poorly is retried inverted.
        _ = TessBaseAPISetVariable(handle, "tessedit_do_invert", "1")
    }

    deinit {
        TessBaseAPIEnd(handle)
        TessBaseAPIDelete(handle)
        if let orientationDetector {
            TessBaseAPIEnd(orientationDetector)
            TessBaseAPIDelete(orientationDetector)
        }
    }

    /// Recognises `image` and returns its blocks, lines and words. An image without text gives a page with no
    /// blocks, not an error.
    public func recognize(_ image: Image, segmentation: SegmentationMode = .page) throws -> RecognizedPage {
        guard let page = try recognize(image, segmentation: segmentation, within: nil) else {
            throw EngineError.tesseract("recognition failed")
        }
        return page
    }

    /// `recognize`, stopped once `limit` has passed (Tesseract's monitor deadline, checked between words): nil when
    /// it was, since a page cut off midway is not a reading to keep. A photo's time budget ends a reading already
    /// running this way, instead of waiting for it (a dark 3 MP photo's one reading took minutes).
    public func recognize(_ image: Image, segmentation: SegmentationMode, within limit: Duration?) throws
        -> RecognizedPage?
    {
        TesseractRuntime.limitOpenMPToCallingThread()
        TessBaseAPISetPageSegMode(handle, segmentation.tesseractMode)
        TessBaseAPISetImage2(handle, image.pix)
        if pixGetXRes(image.pix) < 70 { TessBaseAPISetSourceResolution(handle, 300) }
        defer { TessBaseAPIClear(handle) }
        let monitor: OpaquePointer? = limit.flatMap { limit in
            guard let monitor = TessMonitorCreate() else { return nil }
            // Whole milliseconds, at least 1: Tesseract takes 0 as "no deadline".
            let milliseconds = limit.components.seconds * 1000 + limit.components.attoseconds / 1_000_000_000_000_000
            TessMonitorSetDeadlineMSecs(monitor, Int32(clamping: max(1, milliseconds)))
            return monitor
        }
        defer { if let monitor { TessMonitorDelete(monitor) } }
        let started = ContinuousClock.now
        guard TessBaseAPIRecognize(handle, monitor) == 0 else {
            if let limit, ContinuousClock.now - started >= limit { return nil }
            throw EngineError.tesseract("recognition failed")
        }
        var page = RecognizedPage(width: image.width, height: image.height, blocks: [])
        guard let iterator = TessBaseAPIGetIterator(handle) else { return page }
        defer { TessResultIteratorDelete(iterator) }
        let pageIterator = TessResultIteratorGetPageIteratorConst(iterator)

        func element(_ level: TessPageIteratorLevel) -> RecognizedText? {
            guard let cText = TessResultIteratorGetUTF8Text(iterator, level) else { return nil }
            defer { TessDeleteText(cText) }
            let text = String(cString: cText).trimmingCharacters(in: .whitespacesAndNewlines)
            var left: Int32 = 0, top: Int32 = 0, right: Int32 = 0, bottom: Int32 = 0
            guard TessPageIteratorBoundingBox(pageIterator, level, &left, &top, &right, &bottom) != 0 else {
                return nil
            }
            let confidence = Double(TessResultIteratorConfidence(iterator, level)) / 100
            return RecognizedText(
                text: text, confidence: min(1, max(0, confidence)),
                box: PixelRect(x: Int(left), y: Int(top), width: Int(right - left), height: Int(bottom - top)))
        }

        repeat {
            if TessPageIteratorIsAtBeginningOf(pageIterator, RIL_BLOCK) != 0, let block = element(RIL_BLOCK) {
                page.blocks.append(RecognizedBlock(block: block, lines: []))
            }
            if TessPageIteratorIsAtBeginningOf(pageIterator, RIL_TEXTLINE) != 0, let line = element(RIL_TEXTLINE),
                !page.blocks.isEmpty
            {
                page.blocks[page.blocks.count - 1].lines.append(RecognizedLine(line: line, words: []))
            }
            if let word = element(RIL_WORD), !word.text.isEmpty, !page.blocks.isEmpty,
                !page.blocks[page.blocks.count - 1].lines.isEmpty
            {
                let b = page.blocks.count - 1
                page.blocks[b].lines[page.blocks[b].lines.count - 1].words.append(word)
            }
        } while TessResultIteratorNext(iterator, RIL_WORD) != 0

        // Tesseract reports empty blocks and lines for image regions it took for text: drop them.
        page.blocks = page.blocks.compactMap { block in
            var block = block
            block.lines = block.lines.filter { !$0.words.isEmpty && !$0.line.text.isEmpty }
            return block.lines.isEmpty ? nil : block
        }
        return page
    }

    /// Tesseract's orientation and script detection on `image`, or nil when it found too little text to say.
    public func detectOrientation(_ image: Image) throws -> OrientationEstimate? {
        TesseractRuntime.limitOpenMPToCallingThread()
        let detector = try orientationDetectorHandle()
        TessBaseAPISetImage2(detector, image.pix)
        if pixGetXRes(image.pix) < 70 { TessBaseAPISetSourceResolution(detector, 300) }
        defer { TessBaseAPIClear(detector) }
        var degrees: Int32 = 0
        var orientationConfidence: Float = 0, scriptConfidence: Float = 0
        var script: UnsafePointer<CChar>?
        guard
            TessBaseAPIDetectOrientationScript(
                detector, &degrees, &orientationConfidence, &script, &scriptConfidence) != 0
        else { return nil }
        let scriptName = script.map { String(cString: $0) } ?? ""
        // `degrees` is how far the page was turned clockwise (a page turned left reads 270): turning it back
        // upright takes the rest of the full turn.
        return OrientationEstimate(
            quarterTurnsToUpright: (4 - (Int(degrees) / 90) % 4) % 4, confidence: Double(orientationConfidence),
            script: scriptName)
    }

    /// Makes the orientation detector now (`EnginePool.prewarm`), so the first accurate scan does not pay for it.
    public func prepareOrientationDetector() throws { _ = try orientationDetectorHandle() }

    /// Whether the orientation detector has been made.
    public var hasOrientationDetector: Bool { orientationDetector != nil }

    private func orientationDetectorHandle() throws -> OpaquePointer {
        if let orientationDetector { return orientationDetector }
        guard let detector = TessBaseAPICreate() else { throw EngineError.tesseract("TessBaseAPICreate") }
        let status = Self.withCStrings(["debug_file"]) { names in
            Self.withCStrings(["/dev/null"]) { values in
                TessBaseAPIInit4(
                    detector, TesseractRuntime.dataPath, "osd", OEM_TESSERACT_ONLY, nil, 0, names, values, 1, 0)
            }
        }
        guard status == 0 else {
            TessBaseAPIDelete(detector)
            throw EngineError.languageUnavailable("osd")
        }
        TessBaseAPISetPageSegMode(detector, PSM_OSD_ONLY)
        orientationDetector = detector
        return detector
    }

    private static func withCStrings<R>(
        _ strings: [String], _ body: (UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>) -> R
    ) -> R {
        var pointers = strings.map { strdup($0) }
        defer { for pointer in pointers { free(pointer) } }
        pointers.append(nil)
        return pointers.withUnsafeMutableBufferPointer { body($0.baseAddress!) }
    }
}
