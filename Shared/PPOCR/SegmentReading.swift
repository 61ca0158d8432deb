import OpenCVDNN
import SevenSegment

/// Segment displays' values, read by the seven-segment reader and merged into PP-OCR's lines. PP-OCR was trained on
/// print: its detector often finds no text where a display's digits are separate strokes, and what it reads there
/// is unreliable (a point lost, a leading `1` dropped). The reader looks for its own lines (`SegmentRegions`); one
/// looks like segments when its digits are made of two strokes or more on average (print's are one each), every
/// glyph of the value is read with confidence, and the value is all the region was cut into (a fragment of a value,
/// or a label read as digits, is not). Its value then replaces the number PP-OCR read there, or is a line of its own where PP-OCR
/// read none (a value of two digits at least: a lone "8" is as often a frame's corner); labels and units stay as
/// PP-OCR read them.
enum SegmentReading {
    /// Below this, a line's digits are taken for print.
    static let minimumStrokesPerDigit = 1.8
    /// The reader's least glyph confidence for its value to be used.
    static let minimumConfidence = 0.8
    /// Lines are cut at this height at most.
    static let cutHeight = 96

    static func merge(_ lines: [PPOCRLine], in pixels: RGBPixels, reader: SevenSegmentReader) throws -> [PPOCRLine] {
        var lines = lines
        // Every region's reading first: the finder's polarities and dilations give overlapping candidates for one
        // line (a radius that joins a point to its digit, one that tears a `1` off), and the one the reader is
        // surest of is taken, the value with more digits before a fragment of it, not the first found.
        var candidates: [(box: TextBox, reading: SevenSegmentReading)] = []
        for region in SegmentRegions.find(rgb: pixels.bytes, width: pixels.width, height: pixels.height) {
            let box = TextBox(x: region.x, y: region.y, width: region.width, height: region.height, score: 1)
            guard box.width >= 4, box.height >= 8 else { continue }
            let grey = GreyPixels(rgb: pixels.bytes, width: pixels.width, height: pixels.height,
                                  crop: (box.x, box.y, box.width, box.height), maximumHeight: cutHeight)
            guard let reading = try reader.read(grey) else { continue }
            candidates.append((box, reading))
        }
        // A region's value is refused when an overlapping region reads more digits of segments there, sure or not:
        // it is then a fragment of a value the reader could not read whole (`15` of 15.7 under glare).
        candidates = candidates.filter { candidate in
            accepted(candidate.reading) && !candidates.contains { other in
                other.reading.digits > candidate.reading.digits && other.reading.strokesPerDigit >= minimumStrokesPerDigit
                    && overlap(other.box, candidate.box) > 0.5
            }
        }
        candidates.sort { ($0.reading.digits, $0.reading.confidence) > ($1.reading.digits, $1.reading.confidence) }
        var taken: [TextBox] = []
        for (box, reading) in candidates {
            guard !taken.contains(where: { overlap($0, box) > 0.5 }) else { continue }
            taken.append(box)
            let word = PPOCRWord(text: reading.text, confidence: reading.confidence, box: box)
            // The PP-OCR line this region overlaps most, if any.
            let best = lines.indices.map { ($0, overlap(lines[$0].box, box)) }.filter { $0.1 > 0.3 }.max { $0.1 < $1.1 }
            guard let index = best?.0 else {
                lines.append(PPOCRLine(text: reading.text, confidence: reading.confidence, box: box, words: [word]))
                continue
            }
            lines[index] = replacing(lines[index], with: word)
        }
        // PP-OCR's lines keep their order (a template's neighbourhoods and the text read are PP-OCR's); the reader's
        // own lines follow.
        return lines
    }

    static func accepted(_ reading: SevenSegmentReading) -> Bool {
        reading.strokesPerDigit >= minimumStrokesPerDigit && reading.confidence >= minimumConfidence
            && reading.digits >= 2
            && reading.text.filter { $0 != "." }.count == reading.glyphs
    }

    /// The line with the numbers PP-OCR read inside the region (adjacent words: a number it split at a gap between
    /// segments is one value) replaced by the reader's, what is around them kept (`°C` of `25.3°C`); the value
    /// added when PP-OCR read no number there.
    static func replacing(_ line: PPOCRLine, with word: PPOCRWord) -> PPOCRLine {
        var line = line
        let numeric = line.words.indices.filter {
            line.words[$0].text.contains(where: \.isNumber) && overlap(line.words[$0].box, word.box) > 0.3
        }
        if numeric.isEmpty {
            line.words.append(word)
            line.words.sort { $0.box.x < $1.box.x }
        } else {
            guard numeric.last! - numeric.first! == numeric.count - 1 else { return line }
            // A reading with fewer digits than PP-OCR's is a part of the value the region missed.
            let digits = { (text: String) in text.filter(\.isNumber).count }
            guard digits(word.text) >= numeric.map({ digits(line.words[$0].text) }).reduce(0, +) else { return line }
            let first = line.words[numeric.first!], last = line.words[numeric.last!]
            let (prefix, suffix) = surrounding(numeric.map { line.words[$0].text }.joined())
            let right = last.box.x + last.box.width
            line.words.replaceSubrange(numeric.first!...numeric.last!, with: [PPOCRWord(
                text: prefix + word.text + suffix, confidence: word.confidence,
                box: TextBox(x: first.box.x, y: first.box.y, width: right - first.box.x, height: first.box.height, score: first.box.score))])
        }
        line.text = line.words.map(\.text).joined(separator: " ")
        line.confidence = line.words.map(\.confidence).reduce(0, +) / Double(line.words.count)
        return line
    }

    /// The share of the smaller box that the two boxes have in common.
    static func overlap(_ a: TextBox, _ b: TextBox) -> Double {
        let width = min(a.x + a.width, b.x + b.width) - max(a.x, b.x), height = min(a.y + a.height, b.y + b.height) - max(a.y, b.y)
        guard width > 0, height > 0 else { return 0 }
        return Double(width * height) / Double(max(1, min(a.width * a.height, b.width * b.height)))
    }

    /// What is around the number in a word: `°C` of `25.3°C`, `(` of `(12`.
    static func surrounding(_ text: String) -> (prefix: String, suffix: String) {
        let characters = Array(text)
        guard let first = characters.firstIndex(where: { $0.isNumber || $0 == "-" || $0 == "−" }),
              let last = characters.lastIndex(where: \.isNumber) else { return ("", "") }
        return (String(characters[..<first]), String(characters[(last + 1)...]))
    }
}
