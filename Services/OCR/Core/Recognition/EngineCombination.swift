import PPOCR
import TextRecognition

/// Tesseract's reading of a page and PP-OCR's, combined region by region: where their lines overlap, the engine
/// that read them with the higher mean confidence (per character) keeps the region; a line only one engine found
/// is kept as it is. PP-OCR is asked only where Tesseract found little (`TextRecognizer.fewWords`): displays,
/// labels, photos. On pages of text Tesseract is kept as measured (Czech pages, its CER; Services/OCR/README.md).
enum EngineCombination {
    /// One block of a page: its observation, and its lines each with their words.
    struct Group {
        var block: Observation
        var lines: [(line: Observation, words: [Observation])]
    }

    /// Lines overlap when their intersection covers at least this much of the smaller one.
    static let overlap = 0.5

    static func combine(
        _ page: PageResult, lines: [PPOCRLine], minimumTextHeight: Double, customWords: CustomWordCorrector, index: Int
    ) -> PageResult {
        let tesseract = groups(page.observations)
        let ppocr = lines.compactMap {
            group($0, page: page, minimumTextHeight: minimumTextHeight, customWords: customWords, index: index)
        }
        guard !ppocr.isEmpty else { return page }
        // Clusters of overlapping lines across the engines (a Tesseract line "Napětí 11.87 V" and PP-OCR's
        // "Napětí" and "11.87 V" are one region).
        let tesseractLines = tesseract.flatMap(\.lines)
        let ppocrLines = ppocr.flatMap(\.lines)
        var cluster = Array(0..<(tesseractLines.count + ppocrLines.count))
        func root(_ i: Int) -> Int {
            var i = i
            while cluster[i] != i { i = cluster[i] }
            return i
        }
        for (t, tLine) in tesseractLines.enumerated() {
            for (p, pLine) in ppocrLines.enumerated() where overlaps(tLine.line.box, pLine.line.box) {
                cluster[root(tesseractLines.count + p)] = root(t)
            }
        }
        func confidence(_ lines: [(line: Observation, words: [Observation])]) -> Double {
            let words = lines.flatMap(\.words)
            let characters = words.map { Double($0.text.count) }.reduce(0, +)
            return characters > 0 ? words.map { $0.confidence * Double($0.text.count) }.reduce(0, +) / characters : 0
        }
        var ppocrWins: [Int: Bool] = [:]
        for key in Set((0..<cluster.count).map(root)) {
            let t = tesseractLines.indices.filter { root($0) == key }.map { tesseractLines[$0] }
            let p = ppocrLines.indices.filter { root(tesseractLines.count + $0) == key }.map { ppocrLines[$0] }
            ppocrWins[key] = !p.isEmpty && (t.isEmpty || confidence(p) >= confidence(t))
        }
        var kept: [Group] = []
        var offset = 0
        for var group in tesseract {
            let count = group.lines.count
            group.lines = group.lines.enumerated().filter { !ppocrWins[root(offset + $0.offset)]! }.map(\.element)
            offset += count
            guard !group.lines.isEmpty else { continue }
            if group.lines.count != count { group.block = merged(group.block, group.lines.map(\.line)) }
            kept.append(group)
        }
        for (p, group) in ppocr.enumerated() where ppocrWins[root(tesseractLines.count + p)]! { kept.append(group) }
        kept = readingOrder(kept)
        var result = page
        result.observations = kept.flatMap { group in [group.block] + group.lines.flatMap { [$0.line] + $0.words } }
        result.text = kept.map { $0.lines.map(\.line.text).joined(separator: "\n") }.joined(separator: "\n\n")
        return result
    }

    /// Observations (block, its lines, each followed by its words) grouped back into blocks.
    static func groups(_ observations: [Observation]) -> [Group] {
        var groups: [Group] = []
        for observation in observations {
            switch observation.level {
            case .block: groups.append(Group(block: observation, lines: []))
            case .line: groups[groups.count - 1].lines.append((observation, []))
            case .word:
                let last = groups.count - 1
                groups[last].lines[groups[last].lines.count - 1].words.append(observation)
            }
        }
        return groups
    }

    /// A PP-OCR line as a block of one line, its words lower than `minimumTextHeight` of the page left out and
    /// look-alikes of custom words replaced.
    static func group(
        _ line: PPOCRLine, page: PageResult, minimumTextHeight: Double, customWords: CustomWordCorrector, index: Int
    ) -> Group? {
        func observation(
            _ level: ObservationLevel, _ text: String, _ confidence: Double, _ box: TextBox, doubt: String?
        ) -> Observation {
            let rect = PixelRect(x: box.x, y: box.y, width: box.width, height: box.height)
            return Observation(
                level: level, text: text, confidence: confidence, box: rect,
                normalizedBox: NormalizedRect(rect, imageWidth: page.width, imageHeight: page.height), page: index,
                engine: .ppocr, doubt: doubt)
        }
        guard Double(line.box.height) >= minimumTextHeight * Double(page.height) else { return nil }
        let words = line.words.map { word in
            observation(
                .word, customWords.correct(word.text) ?? word.text, word.confidence, word.box, doubt: word.doubt)
        }
        guard !words.isEmpty else { return nil }
        let text = words.map(\.text).joined(separator: " ")
        let confidence =
            words.map { $0.confidence * Double($0.text.count) }.reduce(0, +)
            / Double(max(1, words.map(\.text.count).reduce(0, +)))
        // A template value may be a line (`Napětí 239.8 V`): its words' doubts go with it.
        let doubt = Observation.doubt(of: words)
        let lineObservation = observation(.line, text, confidence, line.box, doubt: doubt)
        return Group(
            block: observation(.block, text, confidence, line.box, doubt: doubt), lines: [(lineObservation, words)])
    }

    static func overlaps(_ a: PixelRect, _ b: PixelRect) -> Bool {
        let width = min(a.x + a.width, b.x + b.width) - max(a.x, b.x)
        let height = min(a.y + a.height, b.y + b.height) - max(a.y, b.y)
        guard width > 0, height > 0 else { return false }
        let smaller = Double(min(a.width * a.height, b.width * b.height))
        return smaller > 0 && Double(width * height) >= overlap * smaller
    }

    /// A block's observation remade from the lines left in it.
    static func merged(_ block: Observation, _ lines: [Observation]) -> Observation {
        let merged = TextRecognizer.merged(
            lines.map { RecognizedText(text: $0.text, confidence: $0.confidence, box: $0.box) }, separator: "\n")
        var result = block
        result.text = merged.text
        result.confidence = merged.confidence
        result.doubt = Observation.doubt(of: lines)
        result.box = merged.box
        let scaleX = block.box.width > 0 ? block.normalizedBox.width / Double(block.box.width) : 0
        let scaleY = block.box.height > 0 ? block.normalizedBox.height / Double(block.box.height) : 0
        result.normalizedBox = NormalizedRect(
            x: Double(merged.box.x) * scaleX, y: Double(merged.box.y) * scaleY,
            width: Double(merged.box.width) * scaleX, height: Double(merged.box.height) * scaleY)
        return result
    }

    /// Top to bottom; blocks whose vertical centres lie within half the lower one's height of each other (a row),
    /// left to right.
    static func readingOrder(_ groups: [Group]) -> [Group] {
        var sorted = groups.sorted { ($0.block.box.y, $0.block.box.x) < ($1.block.box.y, $1.block.box.x) }
        guard sorted.count > 1 else { return sorted }
        func centre(_ group: Group) -> Double { Double(group.block.box.y) + Double(group.block.box.height) / 2 }
        for i in 0..<(sorted.count - 1) {
            var j = i
            while j >= 0,
                abs(centre(sorted[j + 1]) - centre(sorted[j])) < Double(
                    min(sorted[j].block.box.height, sorted[j + 1].block.box.height)) / 2,
                sorted[j + 1].block.box.x < sorted[j].block.box.x
            {
                sorted.swapAt(j, j + 1)
                j -= 1
            }
        }
        return sorted
    }
}
