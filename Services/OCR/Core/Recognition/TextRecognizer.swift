import Base
import Foundation
import OpenCVDNN
import PPOCR
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
    /// PP-OCR's engines, when its models are installed: displays and photos are read by both engines
    /// (`EngineCombination`); without them Tesseract reads alone.
    public let ppocr: PPOCRPool?

    public init(engines: EnginePool = EnginePool(), limits: DecodeLimits = DecodeLimits(), ppocr: PPOCRPool? = nil) {
        self.engines = engines
        self.decoder = ImageDecoder(limits: limits)
        self.ppocr = ppocr
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
        do { engine = try engines.checkoutBlocking(options.engineConfiguration) } catch {
            throw OCRError.mapping(error)
        }
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
            "an engine of \(engine.configuration.languageString) lent for \(options.engineConfiguration.languageString)"
        )
        do {
            let clock = ContinuousClock()
            var timings = RecognitionTimings()
            var start = clock.now
            // At the size the text needs (a phone photo is read smaller), dim photos brightened (`PhotoSizing`).
            let sized = try PhotoSizing.decode(data, decoder: decoder)
            timings.decode = (clock.now - start).seconds
            var pages: [PageResult] = []
            for (index, image) in sized.pages.enumerated() {
                let reading = try Self.bestReading(image, options: options, engine: engine, timings: &timings)
                // Boxes and sizes in the file's own pixels (within a pixel: a reduced JPEG's sides are rounded up).
                var prepared = reading.prepared
                prepared.scale *= sized.scale
                var page = Self.pageResult(
                    reading.page, prepared: prepared, minimumTextHeight: options.minimumTextHeight,
                    customWords: CustomWordCorrector(options.customWords), index: index)
                // A display or a photo (Tesseract found little), upright as decoded: PP-OCR reads it too. A failure
                // of PP-OCR leaves Tesseract's reading (every observation says which engine read it).
                // A phone photo decoded reduced is upright as decoded too: its page is the image's size in the file's
                // pixels (before, only a photo read at its own size was, so no JPEG over 4 MP ever reached PP-OCR).
                let upright =
                    abs(Double(image.width) / sized.scale - Double(page.width)) <= 1 / sized.scale
                    && abs(Double(image.height) / sized.scale - Double(page.height)) <= 1 / sized.scale
                if let ppocr, reading.page.words.count < Self.fewWords, reading.prepared.quarterTurns == 0, upright {
                    start = clock.now
                    if let lines = try? ppocr.withEngine({ engine in
                        try engine.read(
                            RGBPixels(width: image.width, height: image.height, bytes: try image.rgbBytes())
                        )
                        .map { $0.scaled(by: 1 / sized.scale, within: (page.width, page.height)) }
                    }) {
                        page = EngineCombination.combine(
                            page, lines: lines, minimumTextHeight: options.minimumTextHeight,
                            customWords: CustomWordCorrector(options.customWords), index: index)
                    }
                    timings.recognize += (clock.now - start).seconds
                }
                page.segmentation = reading.segmentation
                page.prepared = reading.preparation != .minimal
                page.cutShort = reading.cutShort
                pages.append(page)
            }
            guard pages.contains(where: { !$0.observations.isEmpty }) else { throw OCRError.noText }
            return RecognitionResult(pages: pages, timings: timings)
        } catch {
            throw OCRError.mapping(error)
        }
    }

    /// One way of reading an image and what it found.
    struct Reading {
        var preparation: PreprocessingOptions
        var prepared: PreparedImage
        var segmentation: SegmentationMode
        var page: RecognizedPage
        /// Further readings were not tried: the time budget ran out.
        var cutShort = false

        /// Mean word confidence, each word weighted by its characters (0 when nothing was read): how sure the
        /// reading is of what it found.
        var meanConfidence: Double {
            let words = page.words
            let characters = words.map { Double($0.text.count) }.reduce(0, +)
            guard characters > 0 else { return 0 }
            return words.map { $0.confidence * Double($0.text.count) }.reduce(0, +) / characters
        }

        /// Characters of words read with at least half confidence: how much a reading found.
        var confidentCharacters: Int { characters(readWith: 0.5) }

        func characters(readWith confidence: Double) -> Int {
            page.words.filter { $0.confidence >= confidence }.map { $0.text.count }.reduce(0, +)
        }

        /// Whether this reading is better than `other` of another preparation: one that surely read clearly more
        /// (`clearlyMore`) wins, else the one surer of what it read. By confidence alone, the binarised reading of
        /// a device's photo (dark labels on its light body, light digits on its black display) won with the labels
        /// only, 3 words at 0.94, over the plain reading of labels and values at 0.85–0.90: a local threshold
        /// turns the display into a black block whose digits Tesseract takes for a picture (issue 40,
        /// `LightOnDarkTests`).
        func isBetter(than other: Reading) -> Bool {
            let mine = characters(readWith: TextRecognizer.sureWord),
                theirs = other.characters(readWith: TextRecognizer.sureWord)
            if Double(mine) >= clearlyMore.factor * Double(theirs) + clearlyMore.extra { return true }
            if Double(theirs) >= clearlyMore.factor * Double(mine) + clearlyMore.extra { return false }
            return meanConfidence > other.meanConfidence
        }

        /// A quarter more characters and a few: what one reading must find beyond another's to count as more.
        let clearlyMore = (factor: 1.25, extra: 2.0)
    }

    /// A word read at least this surely counts towards what a reading found when preparations are compared: a
    /// phone photo's large display digits read right score 0.6–0.8 (`PhonePhotoTests`).
    static let sureWord = 0.5

    /// Page segmentation that found fewer words than this is "little": a display or a label, not a page, and
    /// sparse segmentation is tried too.
    static let fewWords = 30
    /// A prepared reading at least this sure of itself is kept without reading the image as it is.
    static let sureConfidence = 0.9

    /// The reading kept for `image`. For each preparation the level tries (accurate: the full one, then the image
    /// as it is), the segmentation asked for, or when none was, page segmentation and, when it found little,
    /// sparse as well, keeping the one that found more confidently read characters. Between preparations one that
    /// surely read clearly more wins, else the higher mean confidence (`Reading.isBetter`); the image as it is is
    /// read when the prepared reading is not sure or found little (a display).
    /// Measured on `Tests/DisplayPhotos` (Services/OCR/README.md).
    /// `preparations` replaces the level's (the tests measure each choice alone).
    static func bestReading(
        _ image: Image, options: RecognitionOptions, engine: TesseractEngine, timings: inout RecognitionTimings,
        preparations: [PreprocessingOptions]? = nil
    ) throws -> Reading {
        let clock = ContinuousClock()
        let started = clock.now
        var best: Reading?
        var plain: Reading?
        // Once the budget is spent, no further reading starts as long as one found something.
        var spent: Bool {
            (clock.now - started).seconds >= options.timeBudget && (best?.confidentCharacters ?? 0) > 0
        }
        for preparation in preparations ?? options.level.preprocessing {
            if spent {
                best!.cutShort = true
                return best!
            }
            // A page of text the preparation read surely is kept; a display (little text) is always read both ways:
            // binarising seven-segment digits breaks their strokes while Tesseract is still sure of what it read.
            if let kept = best, kept.meanConfidence >= sureConfidence, kept.page.words.count >= fewWords { break }
            var start = clock.now
            let prepared = try Preprocessor.prepare(image, options: preparation, engine: engine)
            timings.preprocess += (clock.now - start).seconds
            var reading: Reading?
            for segmentation in options.segmentation.map({ [$0] }) ?? [.page, .sparse] {
                if let found = reading, found.page.words.count >= fewWords { break }
                if let found = reading, found.confidentCharacters > 0,
                    (clock.now - started).seconds >= options.timeBudget
                {
                    best = best.map { found.isBetter(than: $0) ? found : $0 } ?? found
                    best!.cutShort = true
                    return best!
                }
                start = clock.now
                // Once something was read, a reading that runs past the budget is stopped there, not waited for.
                let remaining =
                    (best?.confidentCharacters ?? 0) > 0
                    ? max(.milliseconds(1), .seconds(options.timeBudget) - (clock.now - started)) : nil
                let page = try engine.recognize(prepared.image, segmentation: segmentation, within: remaining)
                timings.recognize += (clock.now - start).seconds
                guard let page else {
                    if let found = reading, found.isBetter(than: best!) { best = found }
                    best!.cutShort = true
                    return best!
                }
                let candidate = Reading(
                    preparation: preparation, prepared: prepared, segmentation: segmentation, page: page)
                if reading == nil || candidate.confidentCharacters > reading!.confidentCharacters {
                    reading = candidate
                }
            }
            guard let reading else { continue }
            if best == nil || reading.isBetter(than: best!) { best = reading }
            if preparation == .minimal { plain = reading }
        }
        // Light text on a dark part of a photo that is not dark as a whole (a device's display): the plain reading
        // with what the inverted image adds where it found nothing, kept when it surely reads clearly more.
        if spent {
            best!.cutShort = true
            return best!
        }
        if let plain, options.segmentation != .page, !plain.prepared.inverted,
            (lightOnDarkPart).contains(try image.darkFraction())
        {
            let start = clock.now
            let remaining =
                best!.confidentCharacters > 0
                ? max(.milliseconds(1), .seconds(options.timeBudget) - (clock.now - started)) : nil
            guard let inverted = try engine.recognize(try image.inverted(), segmentation: .sparse, within: remaining)
            else {
                timings.recognize += (clock.now - start).seconds
                best!.cutShort = true
                return best!
            }
            timings.recognize += (clock.now - start).seconds
            // Each way round: the values read better inverted, the labels plain.
            var plainFirst = plain, invertedFirst = plain
            plainFirst.page = Self.adding(inverted, to: plain.page)
            invertedFirst.page = Self.adding(plain.page, to: inverted)
            let merged = invertedFirst.isBetter(than: plainFirst) ? invertedFirst : plainFirst
            if merged.isBetter(than: best!) { best = merged }
        }
        return best!
    }

    /// Dark fractions of a photo with a dark part in it: a display's panel in a device's photo (the charger
    /// renderings of `DevicePhoto`: 0.3–0.45). Pages (under 0.15) are not read inverted.
    static let lightOnDarkPart = 0.15...0.5

    /// `page` with the lines of `other` (read from the same pixels) whose boxes touch none of `page`'s words, in
    /// blocks of their own.
    static func adding(_ other: RecognizedPage, to page: RecognizedPage) -> RecognizedPage {
        let taken = page.words.map(\.box)
        func touches(_ a: PixelRect, _ b: PixelRect) -> Bool {
            a.x < b.x + b.width && b.x < a.x + a.width && a.y < b.y + b.height && b.y < a.y + a.height
        }
        var result = page
        for block in other.blocks {
            let lines = block.lines.filter { line in
                !line.words.isEmpty && !taken.contains { touches($0, line.line.box) }
            }
            guard !lines.isEmpty else { continue }
            result.blocks.append(RecognizedBlock(block: merged(lines.map(\.line), separator: "\n"), lines: lines))
        }
        return result
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
            let box =
                s == 1
                ? element.box
                : PixelRect(
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
        for small in lines where !small.text.isEmpty && small.text.allSatisfy({ lookalikes.contains($0) || $0 == " " })
        {
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

extension PPOCRLine {
    /// The line with its and its words' boxes in another image's pixels (`factor` times these), kept inside `size`.
    func scaled(by factor: Double, within size: (width: Int, height: Int)) -> PPOCRLine {
        guard factor != 1 else { return self }
        func scaled(_ box: TextBox) -> TextBox {
            let x = min(size.width - 1, Int((Double(box.x) * factor).rounded())),
                y = min(size.height - 1, Int((Double(box.y) * factor).rounded()))
            return TextBox(
                x: x, y: y, width: max(1, min(size.width - x, Int((Double(box.width) * factor).rounded()))),
                height: max(1, min(size.height - y, Int((Double(box.height) * factor).rounded()))), score: box.score)
        }
        var line = self
        line.box = scaled(box)
        line.words = words.map {
            PPOCRWord(text: $0.text, confidence: $0.confidence, box: scaled($0.box), doubt: $0.doubt)
        }
        return line
    }
}
