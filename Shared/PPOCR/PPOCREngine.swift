import Base
import Foundation
import OpenCVDNN
import SevenSegment
import Synchronization

/// A word PP-OCR read: its text, the mean probability of its characters, its box in the image's pixels.
public struct PPOCRWord: Sendable, Hashable {
    public var text: String
    public var confidence: Double
    public var box: TextBox
    /// Why the word is in doubt (its confidence then held under any threshold a template trusts): `SegmentReading`.
    public var doubt: String?

    public init(text: String, confidence: Double, box: TextBox, doubt: String? = nil) {
        self.text = text
        self.confidence = confidence
        self.box = box
        self.doubt = doubt
    }
}

/// A line PP-OCR read, with its words (split at spaces, each boxed by the columns its characters were read at).
public struct PPOCRLine: Sendable, Hashable {
    public var text: String
    /// The mean probability of the line's characters (0–1).
    public var confidence: Double
    public var box: TextBox
    public var words: [PPOCRWord]

    public init(text: String, confidence: Double, box: TextBox, words: [PPOCRWord]) {
        self.text = text
        self.confidence = confidence
        self.box = box
        self.words = words
    }
}

/// PP-OCR's detection and recognition networks, run through OpenCV's DNN module: one engine per thread that reads
/// (each has its own networks, so lanes never wait on each other's forward passes); `PPOCRPool` lends them out.
public final class PPOCREngine: Sendable {
    static let detectionNormalisation = ImageNormalisation(bgr: true, mean: 0.5, std: 0.5)
    static let canvas = (long: 992, short: 736)
    static let lineHeight = 48, lineWidth = 320, steps = 40
    /// Lines read with less mean confidence are dropped (RapidOCR's text_score).
    public static let minimumConfidence = 0.5

    private let landscape: ONNXNetwork
    private let portraitBytes: [UInt8]
    /// Made on the first portrait picture: a phone held upright is rarer than a display photographed across.
    private let portrait = Mutex<ONNXNetwork?>(nil)
    private let recognizer: ONNXNetwork
    public let decoder: CTCDecoder
    public let postprocessor = DBPostprocessor()
    /// Reads the lines that look like a segment display (`SegmentReading`); nil without the model.
    private let segments: SevenSegmentReader?

    public init(models: PPOCRModels, segments: SevenSegmentModel? = nil) throws {
        self.segments = try segments.map { try SevenSegmentReader(model: $0) }
        do {
            landscape = try ONNXNetwork(bytes: models.landscapeDetector)
            recognizer = try ONNXNetwork(bytes: models.recognizer)
        } catch let error as DNNError {
            throw PPOCRError(.failedPrecondition, "OpenCV refused a PP-OCR network: \(error.message)")
        }
        portraitBytes = models.portraitDetector
        decoder = CTCDecoder(characters: models.characters)
    }

    /// The lines of text in `pixels`, in reading order, those read with confidence under `minimumConfidence` left out.
    /// A line turned from level is read levelled (`TurnedBox`, `Levelling`), its words' boxes given back in `pixels`.
    public func read(_ pixels: RGBPixels) throws -> [PPOCRLine] {
        do {
            var lines = try detectTurned(pixels).compactMap { box, turned -> PPOCRLine? in
                guard let turned, turned.length >= 8, turned.thickness >= 4 else {
                    return try recognize(pixels, box: box)
                }
                let levelling = Levelling(turned, width: pixels.width, height: pixels.height)
                let level = levelling.level(pixels)
                return try recognize(
                    level, box: TextBox(x: 0, y: 0, width: level.width, height: level.height, score: box.score)
                )
                .map { levelling.sourceLine($0, box: box) }
            }
            if let segments {
                lines = try SegmentReading.merge(lines, in: pixels, reader: segments) { box in
                    try self.recognize(pixels, box: box)
                }
            }
            return lines.filter { $0.confidence >= Self.minimumConfidence && !$0.text.isEmpty }
        } catch let error as DNNError {
            throw PPOCRError(.internal, "PP-OCR failed: \(error.message)")
        }
    }

    /// Boxes of text: the picture scaled to fit the detector's canvas (landscape or portrait), padded.
    public func detect(_ pixels: RGBPixels) throws -> [TextBox] { try detectTurned(pixels).map(\.box) }

    /// Boxes of text, each with its line's turned box where it is turned (`DBPostprocessor.turnedBoxes`).
    func detectTurned(_ pixels: RGBPixels) throws -> [(box: TextBox, turned: TurnedBox?)] {
        let wide = pixels.width >= pixels.height
        let canvasWidth = wide ? Self.canvas.long : Self.canvas.short
        let canvasHeight = wide ? Self.canvas.short : Self.canvas.long
        let fit = min(Double(canvasWidth) / Double(pixels.width), Double(canvasHeight) / Double(pixels.height))
        let width = max(1, min(canvasWidth, Int((Double(pixels.width) * fit).rounded())))
        let height = max(1, min(canvasHeight, Int((Double(pixels.height) * fit).rounded())))
        let input = try pixels.networkInput(
            crop: (0, 0, pixels.width, pixels.height), size: (width, height), canvasWidth: canvasWidth,
            canvasHeight: canvasHeight, normalisation: Self.detectionNormalisation)
        let network = wide ? landscape : try portraitNetwork()
        let output = try network.forward(input, shape: [1, 3, canvasHeight, canvasWidth])
        guard output.shape == [1, 1, canvasHeight, canvasWidth] else {
            throw PPOCRError(.internal, "PP-OCR's detector answered \(output.shape)")
        }
        return postprocessor.turnedBoxes(
            map: output.values, width: canvasWidth, height: canvasHeight, validWidth: width, validHeight: height,
            scale: Double(pixels.width) / Double(width), imageWidth: pixels.width, imageHeight: pixels.height)
    }

    private func portraitNetwork() throws -> ONNXNetwork {
        try portrait.withLock { network in
            if let network { return network }
            let made = try ONNXNetwork(bytes: portraitBytes)
            network = made
            return made
        }
    }

    /// The text in `box`: the crop scaled to the recogniser's height 48; a line wider than 320 then (up to a
    /// quarter more is squeezed) is read in pieces cut at its quietest columns.
    func recognize(_ pixels: RGBPixels, box: TextBox) throws -> PPOCRLine? {
        guard box.width > 0, box.height > 0 else { return nil }
        let scale = Double(Self.lineHeight) / Double(box.height)
        let scaledWidth = Double(box.width) * scale
        var pieces: [(x: Int, width: Int)] = [(box.x, box.width)]
        var spaces: [Bool] = []
        if scaledWidth > Double(Self.lineWidth) * 1.25 {
            (pieces, spaces) = LineSplitter.pieces(pixels, box: box, count: Int((scaledWidth / 300).rounded(.up)))
        }
        var characters: [(DecodedCharacter, x: Double)] = []
        var text = ""
        for (index, piece) in pieces.enumerated() {
            let width = max(1, min(Self.lineWidth, Int((Double(piece.width) * scale).rounded())))
            let input = try pixels.networkInput(
                crop: (piece.x, box.y, piece.width, box.height), size: (width, Self.lineHeight),
                canvasWidth: Self.lineWidth, canvasHeight: Self.lineHeight, normalisation: Self.detectionNormalisation)
            let output = try recognizer.forward(input, shape: [1, 3, Self.lineHeight, Self.lineWidth])
            guard output.shape == [1, Self.steps, decoder.classCount] else {
                throw PPOCRError(
                    .internal, "PP-OCR's recogniser answered \(output.shape) for \(decoder.classCount) classes")
            }
            let columnWidth = Double(Self.lineWidth) / Double(Self.steps)
            let pixelsPerColumn = Double(piece.width) / Double(width) * columnWidth
            if index > 0, spaces[index - 1], !text.isEmpty, text.last != " " { text += " " }
            for character in decoder.decode(output.values, steps: Self.steps) {
                // A column past the picture is padding: what is read there is noise.
                guard Double(character.step) * columnWidth < Double(width) + columnWidth else { continue }
                text += character.character
                characters.append((character, Double(piece.x) + (Double(character.step) + 0.5) * pixelsPerColumn))
            }
        }
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        guard !trimmed.isEmpty else { return nil }
        let kept = characters.filter { $0.0.character != " " }
        let confidence = kept.map(\.0.probability).reduce(0, +) / Double(max(1, kept.count))
        return PPOCRLine(
            text: trimmed, confidence: confidence, box: box, words: Self.words(characters, line: box))
    }

    /// Splits a line's characters at spaces; each word spans from its first character's column to its last's,
    /// widened by half a character on either side.
    static func words(_ characters: [(DecodedCharacter, x: Double)], line: TextBox) -> [PPOCRWord] {
        var words: [PPOCRWord] = []
        var current: [(DecodedCharacter, x: Double)] = []
        func flush() {
            defer { current.removeAll() }
            guard let first = current.first, let last = current.last else { return }
            let text = current.map(\.0.character).joined()
            let pitch = current.count > 1 ? (last.x - first.x) / Double(current.count - 1) : Double(line.height) * 0.5
            let left = max(Double(line.x), first.x - pitch / 2)
            let right = min(Double(line.x + line.width), last.x + pitch / 2)
            let confidence = current.map(\.0.probability).reduce(0, +) / Double(current.count)
            words.append(
                PPOCRWord(
                    text: text, confidence: confidence,
                    box: TextBox(
                        x: Int(left.rounded()), y: line.y, width: max(1, Int((right - left).rounded())),
                        height: line.height, score: line.score)))
        }
        for character in characters {
            if character.0.character == " " { flush() } else { current.append(character) }
        }
        flush()
        return words
    }
}
