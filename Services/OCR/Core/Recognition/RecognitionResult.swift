import TextRecognition

/// A rectangle as fractions (0–1) of the image's width and height, origin at the top-left corner (as in
/// image files; Apple Vision's boxes have a bottom-left origin instead).
public struct NormalizedRect: Sendable, Hashable, Codable {
    public var x: Double
    public var y: Double
    public var width: Double
    public var height: Double

    public init(x: Double, y: Double, width: Double, height: Double) {
        self.x = x
        self.y = y
        self.width = width
        self.height = height
    }

    public init(_ rect: PixelRect, imageWidth: Int, imageHeight: Int) {
        let w = Double(max(1, imageWidth)), h = Double(max(1, imageHeight))
        self.init(
            x: Double(rect.x) / w, y: Double(rect.y) / h, width: Double(rect.width) / w, height: Double(rect.height) / h
        )
    }

    public var area: Double { max(0, width) * max(0, height) }
    public var centerX: Double { x + width / 2 }
    public var centerY: Double { y + height / 2 }

    /// The area both rectangles cover.
    public func intersectionArea(_ other: NormalizedRect) -> Double {
        let overlapWidth = min(x + width, other.x + other.width) - max(x, other.x)
        let overlapHeight = min(y + height, other.y + other.height) - max(y, other.y)
        return overlapWidth > 0 && overlapHeight > 0 ? overlapWidth * overlapHeight : 0
    }

    /// Inside the unit square with a positive size.
    public var isValid: Bool {
        [x, y, width, height].allSatisfy(\.isFinite) && width > 0 && height > 0 && x >= 0 && y >= 0
            && x + width <= 1.000_001 && y + height <= 1.000_001
    }
}

/// The granularity of an observation.
public enum ObservationLevel: String, Sendable, CaseIterable, Codable {
    case block, line, word
}

/// The engine that read an observation.
public enum RecognitionEngine: String, Sendable, CaseIterable, Codable {
    /// Tesseract (libtesseract's LSTM): pages, Czech text, and wherever PP-OCR is absent or less sure.
    case tesseract
    /// PaddleOCR's PP-OCR networks through OpenCV (Shared/PPOCR): displays and photos.
    case ppocr
}

/// One piece of recognised text.
public struct Observation: Sendable, Hashable {
    public var level: ObservationLevel
    public var text: String
    /// 0–1 (Tesseract's confidence / 100).
    public var confidence: Double
    /// In pixels of the upright image (after the orientation was applied), top-left origin.
    public var box: PixelRect
    /// The same box as fractions of the upright image's size, top-left origin.
    public var normalizedBox: NormalizedRect
    /// The page of a multi-page image (0 for single images).
    public var page: Int
    public var engine: RecognitionEngine
    /// Why the reading is in doubt, its confidence then held under what a template trusts: the seven-segment
    /// reader's regions or PP-OCR disagree on the digits (`SegmentReading`). A line's or block's are its words'.
    public var doubt: String?

    public init(
        level: ObservationLevel, text: String, confidence: Double, box: PixelRect, normalizedBox: NormalizedRect,
        page: Int = 0, engine: RecognitionEngine = .tesseract, doubt: String? = nil
    ) {
        self.engine = engine
        self.doubt = doubt
        self.level = level
        self.text = text
        self.confidence = confidence
        self.box = box
        self.normalizedBox = normalizedBox
        self.page = page
    }
}

extension Observation {
    /// The doubts of `parts` (words joined into a line or block), in order, each once; nil when none has one.
    static func doubt(of parts: [Observation]) -> String? {
        var reasons: [String] = []
        for reason in parts.compactMap(\.doubt) where !reasons.contains(reason) { reasons.append(reason) }
        return reasons.isEmpty ? nil : reasons.joined(separator: "; ")
    }
}

/// Where the time of a scan went, in seconds.
public struct RecognitionTimings: Sendable, Hashable {
    public var decode: Double = 0
    public var preprocess: Double = 0
    public var recognize: Double = 0
    public var total: Double { decode + preprocess + recognize }
}

/// One page's result.
public struct PageResult: Sendable, Hashable {
    /// Size of the upright image, which boxes are relative to.
    public var width: Int
    public var height: Int
    /// Clockwise degrees the page was turned to make it upright (0, 90, 180, 270).
    public var orientationDegrees: Int
    /// Skew corrected, degrees.
    public var deskewDegrees: Double
    /// The image was inverted (light text on a dark background).
    public var inverted: Bool
    public var text: String
    /// Blocks, then their lines, then their words, in reading order: each block is followed by its lines, each
    /// line by its words.
    public var observations: [Observation]
    /// The segmentation the reading kept (the one asked for, or the one chosen for the image).
    public var segmentation: SegmentationMode = .page
    /// The accurate level's preparation (orientation, deskew, binarisation, enlarging) was kept; false when the
    /// image as it is read with more confidence, or at the fast level.
    public var prepared: Bool = false
    /// The photo's time budget ran out before every reading was tried: the best so far was kept.
    public var cutShort: Bool = false
}

/// A scan's result: the text of all pages and their observations.
public struct RecognitionResult: Sendable, Hashable {
    public var pages: [PageResult]
    public var timings: RecognitionTimings

    /// The pages' text, separated by blank lines.
    public var text: String { pages.map(\.text).filter { !$0.isEmpty }.joined(separator: "\n\n") }
    public var observations: [Observation] { pages.flatMap(\.observations) }
    /// Some page's readings were cut short by the time budget.
    public var cutShort: Bool { pages.contains(where: \.cutShort) }
    /// The first page's orientation.
    public var orientationDegrees: Int { pages.first?.orientationDegrees ?? 0 }
}
