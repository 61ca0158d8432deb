import TextRecognition

/// How hard to look: the two levels of Apple Vision's text recognition, on Tesseract.
public enum RecognitionLevel: String, Sendable, CaseIterable, Codable {
    /// Recognition only (plus inverting a mostly dark image): for clean, upright scans and screenshots, and where
    /// latency matters. A page turned on its side reads poorly.
    case fast
    /// Before recognising, detects the page's orientation (Tesseract's OSD) and turns it upright, levels skewed
    /// lines, and binarises grey and colour photos with a local (Sauvola) threshold that copes with shadows and
    /// uneven light. Costs roughly a third more time than `fast` on a page. When that reading is not sure of itself
    /// (or found little, as on a display) the image is read again without the binarisation and as it is, and the
    /// reading with the higher mean confidence is kept: a local threshold can break accents and a display's
    /// strokes. The default.
    case accurate

    /// The preparations tried, in order.
    var preprocessing: [PreprocessingOptions] {
        switch self {
        case .fast: [.minimal]
        case .accurate: [.full, .enlarged, .minimal]
        }
    }
}

/// What to recognise and how: the options of a scan, validated before any work.
public struct RecognitionOptions: Sendable, Hashable {
    /// Tesseract language codes in priority order; the default reads Czech and English.
    public var languages: [String]
    public var level: RecognitionLevel
    /// Words that take priority over the dictionary's look-alikes (product names, units, codes).
    public var customWords: [String]
    /// Text lower than this fraction of the image height (0–1) is left out of the result; 0 keeps everything.
    public var minimumTextHeight: Double
    /// Where to expect text; `.sparse` suits displays and labels, `.page` documents; nil (the default) chooses per
    /// image: page segmentation, and sparse too when that finds little (see `TextRecognizer.bestReading`).
    public var segmentation: SegmentationMode?
    /// Seconds a photo's readings may take before no further one is started: the best found so far is kept and
    /// the page says it was cut short (`PageResult.cutShort`), where a slow photo failed with DEADLINE_EXCEEDED
    /// before (issue 40). A reading under way is not interrupted.
    public var timeBudget: Double

    /// A phone photo is read in about 2 s; a page at the accurate level in under 5 s (Services/OCR/README.md).
    public static let defaultTimeBudget = 8.0

    public static let defaultLanguages = ["ces", "eng"]
    public static let maxCustomWords = 1000
    public static let maxWordLength = 64

    public init(
        languages: [String] = defaultLanguages, level: RecognitionLevel = .accurate, customWords: [String] = [],
        minimumTextHeight: Double = 0, segmentation: SegmentationMode? = nil, timeBudget: Double = defaultTimeBudget
    ) {
        self.timeBudget = timeBudget
        self.languages = languages
        self.level = level
        self.customWords = customWords
        self.minimumTextHeight = minimumTextHeight
        self.segmentation = segmentation
    }

    /// Parses Tesseract's `ces+eng` spelling (also accepts commas and spaces).
    public static func languages(from text: String) -> [String] {
        text.split(whereSeparator: { $0 == "+" || $0 == "," || $0 == " " }).map(String.init)
    }

    /// Throws INVALID_ARGUMENT naming the first option that cannot be used.
    public func validate(installed: [String] = TesseractRuntime.installedLanguages()) throws {
        if languages.isEmpty { throw OCRError.invalid("languages must name at least one language") }
        guard timeBudget.isFinite, timeBudget >= 0 else {
            throw OCRError.invalid("the time budget must be 0 or more seconds")
        }
        var seen: Set<String> = []
        for language in languages {
            guard !language.isEmpty, language.allSatisfy({ $0.isASCII && ($0.isLetter || $0 == "_") }) else {
                throw OCRError.invalid("\"\(language)\" is not a Tesseract language code (like ces or eng)")
            }
            guard installed.contains(language) else {
                throw OCRError.invalid(
                    "language \(language) is not installed (installed: \(installed.joined(separator: ", ")))")
            }
            guard seen.insert(language).inserted else { throw OCRError.invalid("language \(language) is listed twice") }
        }
        guard minimumTextHeight.isFinite, minimumTextHeight >= 0, minimumTextHeight < 1 else {
            throw OCRError.invalid("minimum text height must be a fraction of the image height in [0, 1)")
        }
        if customWords.count > Self.maxCustomWords {
            throw OCRError.invalid("at most \(Self.maxCustomWords) custom words, got \(customWords.count)")
        }
        for word in customWords {
            guard !word.isEmpty, word.utf8.count <= 4 * Self.maxWordLength,
                word.unicodeScalars.count <= Self.maxWordLength,
                !word.unicodeScalars.contains(where: \.properties.isWhitespace),
                !word.utf8.contains(0)
            else {
                throw OCRError.invalid(
                    "custom word \"\(word.prefix(80))\" must be 1–\(Self.maxWordLength) characters without spaces")
            }
        }
    }

    /// The engine this scan needs (engines are pooled by it).
    public var engineConfiguration: EngineConfiguration {
        EngineConfiguration(languages: languages, userWords: customWords)
    }
}
