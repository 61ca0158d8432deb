import Base
import Foundation
import TextRecognition

/// Recognises text in image bytes: decode (with the pixel limit), prepare per level, recognise with a pooled
/// engine, filter and flatten into observations.
///
/// The work is synchronous and CPU-bound (a page takes seconds): `recognize(_:options:engine:)` is what the
/// service runs on its lane for heavy work with an engine it checked out of `engines`; `recognize(_:options:)`
/// does both in the caller's task, for tests and tools.
public struct TextRecognizer: Sendable {
    public let engines: EnginePool
    public let decoder: ImageDecoder

    public init(engines: EnginePool = EnginePool(), limits: DecodeLimits = DecodeLimits()) {
        self.engines = engines
        self.decoder = ImageDecoder(limits: limits)
    }

    /// Checks out an engine for `options`, recognises, and returns the engine.
    public func recognize(_ data: Data, options: RecognitionOptions = RecognitionOptions()) async throws
        -> RecognitionResult
    {
        try options.validate()
        let engine: TesseractEngine
        do { engine = try await engines.checkout(options.engineConfiguration) } catch { throw OCRError.mapping(error) }
        defer { engines.checkin(engine) }
        return try recognize(data, options: options, engine: engine)
    }

    /// Checks out an engine for `options` on the calling thread (which may block: call it on the lane for heavy
    /// work), recognises, and returns the engine. Holding an engine only while recognising on a thread, never
    /// while queued for one, keeps every engine busy.
    public func recognizeBlocking(_ data: Data, options: RecognitionOptions) throws -> RecognitionResult {
        try options.validate()
        let engine: TesseractEngine
        do { engine = try engines.checkoutBlocking(options.engineConfiguration) } catch { throw OCRError.mapping(error) }
        defer { engines.checkin(engine) }
        return try recognize(data, options: options, engine: engine)
    }

    /// Recognises `data` with `engine` (which must be of `options.engineConfiguration`). Throws INVALID_ARGUMENT
    /// for bytes that are no image, RESOURCE_EXHAUSTED over the pixel limit, NOT_FOUND when no text was found.
    public func recognize(_ data: Data, options: RecognitionOptions, engine: TesseractEngine) throws
        -> RecognitionResult
    {
        precondition(
            engine.configuration == options.engineConfiguration,
            "an engine of \(engine.configuration.languageString) lent for \(options.engineConfiguration.languageString)")
        do {
            let clock = ContinuousClock()
            var timings = RecognitionTimings()
            var start = clock.now
            let decoded = try decoder.decode(data)
            timings.decode = (clock.now - start).seconds
            var pages: [PageResult] = []
            for (index, image) in decoded.pages.enumerated() {
                start = clock.now
                let prepared = try Preprocessor.prepare(image, options: options.level.preprocessing, engine: engine)
                timings.preprocess += (clock.now - start).seconds
                start = clock.now
                let page = try engine.recognize(prepared.image, segmentation: options.segmentation)
                timings.recognize += (clock.now - start).seconds
                pages.append(
                    Self.pageResult(
                        page, prepared: prepared, minimumTextHeight: options.minimumTextHeight,
                        customWords: CustomWordCorrector(options.customWords), index: index))
            }
            guard pages.contains(where: { !$0.observations.isEmpty }) else { throw OCRError.noText }
            return RecognitionResult(pages: pages, timings: timings)
        } catch {
            throw OCRError.mapping(error)
        }
    }

    /// Flattens Tesseract's hierarchy into observations, leaving out words lower than `minimumTextHeight` of the
    /// image (and lines and blocks left without words), whose text and boxes are then made of the words kept, and
    /// replacing look-alikes of custom words by them.
    static func pageResult(
        _ page: RecognizedPage, prepared: PreparedImage, minimumTextHeight: Double,
        customWords: CustomWordCorrector = CustomWordCorrector([]), index: Int
    ) -> PageResult {
        let width = prepared.uprightWidth, height = prepared.uprightHeight
        let minimumHeight = minimumTextHeight * Double(page.height)
        func observation(_ level: ObservationLevel, _ element: RecognizedText) -> Observation {
            let s = prepared.scale
            let box = s == 1 ? element.box : PixelRect(
                x: Int((Double(element.box.x) / s).rounded()), y: Int((Double(element.box.y) / s).rounded()),
                width: Int((Double(element.box.width) / s).rounded()),
                height: Int((Double(element.box.height) / s).rounded()))
            return Observation(
                level: level, text: element.text, confidence: element.confidence, box: box,
                normalizedBox: NormalizedRect(box, imageWidth: width, imageHeight: height), page: index)
        }
        var observations: [Observation] = []
        var blockTexts: [String] = []
        let marks = detachedMarks(page)
        for var block in page.blocks {
            let lineCount = block.lines.count
            block.lines.removeAll { marks.contains($0.line.box) }
            var lines: [(RecognizedText, [RecognizedText])] = []
            var droppedAny = block.lines.count != lineCount
            for line in block.lines {
                var words = line.words.filter { Double($0.box.height) >= minimumHeight }
                var changed = words.count != line.words.count
                if !customWords.isEmpty {
                    for index in words.indices {
                        if let corrected = customWords.correct(words[index].text) {
                            words[index].text = corrected
                            changed = true
                        }
                    }
                }
                droppedAny = droppedAny || changed
                guard !words.isEmpty else { continue }
                lines.append((changed ? merged(words) : line.line, words))
            }
            guard !lines.isEmpty else { continue }
            let blockElement = droppedAny ? merged(lines.map(\.0), separator: "\n") : block.block
            observations.append(observation(.block, blockElement))
            for (line, words) in lines {
                observations.append(observation(.line, line))
                observations.append(contentsOf: words.map { observation(.word, $0) })
            }
            blockTexts.append(lines.map(\.0.text).joined(separator: "\n"))
        }
        return PageResult(
            width: width, height: height, orientationDegrees: prepared.quarterTurns * 90,
            deskewDegrees: prepared.deskewDegrees, inverted: prepared.inverted,
            text: blockTexts.joined(separator: "\n\n"), observations: observations)
    }

    /// Boxes of lines that are only accents torn off the line below: Tesseract sometimes takes the carons and
    /// acutes of a Czech line (`ř`, `š`, `í`) for a line of their own and reads them as `viv`. Such a line is less
    /// than 40 % as high as a line it sits on top of (overlapping it horizontally, at most half that line's
    /// height above it) and holds nothing but letters and marks that accents look like (v, w, i, l, apostrophes…).
    static func detachedMarks(_ page: RecognizedPage) -> Set<PixelRect> {
        let lines = page.blocks.flatMap(\.lines).map(\.line)
        let lookalikes = Set("vwyiljVWYIJ!'`^~ˇ´°.,:;-_*\"|")
        var marks: Set<PixelRect> = []
        for small in lines where !small.text.isEmpty && small.text.allSatisfy({ lookalikes.contains($0) || $0 == " " }) {
            let s = small.box
            for large in lines where Double(s.height) < 0.4 * Double(large.box.height) {
                let l = large.box
                let overlapsHorizontally = s.x < l.x + l.width && l.x < s.x + s.width
                let gap = l.y - (s.y + s.height)
                if overlapsHorizontally, gap <= l.height / 2, s.y < l.y + l.height / 3 {
                    marks.insert(s)
                    break
                }
            }
        }
        return marks
    }

    /// One element covering `parts`: their texts joined, the union of their boxes, their mean confidence.
    static func merged(_ parts: [RecognizedText], separator: String = " ") -> RecognizedText {
        let left = parts.map(\.box.x).min() ?? 0, top = parts.map(\.box.y).min() ?? 0
        let right = parts.map { $0.box.x + $0.box.width }.max() ?? 0
        let bottom = parts.map { $0.box.y + $0.box.height }.max() ?? 0
        return RecognizedText(
            text: parts.map(\.text).joined(separator: separator),
            confidence: parts.map(\.confidence).reduce(0, +) / Double(max(1, parts.count)),
            box: PixelRect(x: left, y: top, width: right - left, height: bottom - top))
    }
}

