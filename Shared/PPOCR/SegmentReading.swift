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
    /// The least for a value where PP-OCR read no number: given flagged (under the templates' 0.85 anyway), not
    /// dropped, as Live Text shows a person what it could make out.
    static let unsureConfidence = 0.65
    /// Lines are cut at this height at most.
    static let cutHeight = 96

    /// The confidence a doubted value is given: under any threshold a template trusts (`RecordPolicy`'s 0.85), over
    /// `PPOCREngine.minimumConfidence`, so the value is kept and flagged rather than stored as if right or lost.
    static let doubtfulConfidence = 0.6

    static func merge(
        _ lines: [PPOCRLine], in pixels: RGBPixels, reader: SevenSegmentReader,
        recognize: ((TextBox) throws -> PPOCRLine?)? = nil
    ) throws -> [PPOCRLine] {
        var lines = lines
        // Every region's reading first: the finder's polarities and dilations give overlapping candidates for one
        // line (a radius that joins a point to its digit, one that tears a `1` off), and the one the reader is
        // surest of is taken, the value with more digits before a fragment of it, not the first found.
        var all: [(box: TextBox, reading: SevenSegmentReading)] = []
        for region in SegmentRegions.find(rgb: pixels.bytes, width: pixels.width, height: pixels.height) {
            let box = TextBox(x: region.x, y: region.y, width: region.width, height: region.height, score: 1)
            guard let reading = try read(box, in: pixels, reader: reader) else { continue }
            all.append((box, reading))
        }
        // A region's value is refused when an overlapping region reads more digits of segments there, sure or not:
        // it is then a fragment of a value the reader could not read whole (`15` of 15.7 under glare).
        var candidates = all.filter { candidate in
            accepted(candidate.reading, minimum: unsureConfidence)
                && !all.contains { other in
                    other.reading.digits > candidate.reading.digits
                        && other.reading.strokesPerDigit >= minimumStrokesPerDigit
                        && overlap(other.box, candidate.box) > 0.5
                }
        }
        candidates.sort { ($0.reading.digits, $0.reading.confidence) > ($1.reading.digits, $1.reading.confidence) }
        var taken: [TextBox] = []
        for (box, reading) in candidates {
            guard !taken.contains(where: { overlap($0, box) > 0.5 }) else { continue }
            // An unsure value stands only where PP-OCR read no number, flagged.
            let unsure = reading.confidence < minimumConfidence
            if unsure,
                lines.contains(where: {
                    $0.words.contains { $0.text.contains(where: \.isNumber) && overlap($0.box, box) > 0.3 }
                })
            {
                continue
            }
            let doubt =
                unsure
                ? "read unsure (a glyph at \((reading.confidence * 100).rounded() / 100))"
                : try doubt(about: reading, at: box, among: all, lines: lines, in: pixels, reader: reader)
            // A doubted value over a word PP-OCR surely read as letters is a label whose accents and joins look like
            // segments (`88` in Napětí, which put a flagged 88 into the line and lost it to Tesseract's `Napeti`).
            // Its region is taken all the same, as before: only the value is left out of the line.
            if doubt != nil, isOverLetters(box, lines) {
                taken.append(box)
                continue
            }
            taken.append(box)
            let word = PPOCRWord(
                text: reading.text,
                confidence: doubt == nil ? reading.confidence : min(reading.confidence, doubtfulConfidence),
                box: box, doubt: doubt)
            // The PP-OCR line this region overlaps most, if any.
            let best = lines.indices.map { ($0, overlap(lines[$0].box, box)) }.filter { $0.1 > 0.3 }.max { $0.1 < $1.1 }
            guard let index = best?.0 else {
                lines.append(PPOCRLine(text: reading.text, confidence: word.confidence, box: box, words: [word]))
                continue
            }
            lines[index] = replacing(lines[index], with: word)
        }
        if let recognize {
            let found = try recognizedInRegions(
                all, lines: lines, taken: taken, width: pixels.width, recognize: recognize)
            lines += found
            taken += found.map(\.box)
        }
        // What the reader reads over each of PP-OCR's numbers that no value of its own replaced: the regions over it
        // and its box widened by its height.
        var readingsOver: [Int: [SevenSegmentReading]] = [:]
        for (index, word) in lines.flatMap(\.words).enumerated()
        where word.doubt == nil && word.text.contains(where: \.isNumber)
            && !taken.contains(where: { overlap($0, word.box) > 0.5 })
        {
            let box = word.box, x0 = max(0, box.x - box.height), x1 = min(pixels.width, box.x + box.width + box.height)
            let wide = try read(
                TextBox(x: x0, y: box.y, width: x1 - x0, height: box.height, score: 1), in: pixels, reader: reader)
            readingsOver[index] = all.filter { overlap($0.box, box) > 0.5 }.map(\.reading) + (wide.map { [$0] } ?? [])
        }
        // A segment display: the reader read a value of segments somewhere in the picture, or segments under one of
        // PP-OCR's numbers (a display whose heavy or blurred segments touch gives the reader little more).
        let segmentDisplay = isSegmentDisplay(all.map(\.reading), underNumbers: Array(readingsOver.values.joined()))
        // PP-OCR's own numbers that are no number (`7.9.5`, `60.`: a point read in a gap between segments, or a
        // digit lost after it), or where the reader reads a longer value over them or in their box widened by its
        // height (`8` and `2` of 82, `17.3` of 147.3: PP-OCR drops digits of segments): a part of a value.
        var index = -1
        var readingsByBox: [TextBox: [SevenSegmentReading]] = [:]
        lines = lines.map { line in
            let split = splitNumbers(line)
            return doubting(line) { word in
                index += 1
                guard let readings = readingsOver[index] else { return nil }
                readingsByBox[word.box, default: []] += readings
                let digits = word.text.filter(\.isNumber)
                if isMalformedNumber(word.text) { return "\(word.text) is no well-formed number" }
                if let longer = readings.first(where: { isLonger($0, than: digits) }) {
                    return "PP-OCR read a part of the segment value \(longer.text)"
                }
                if let neighbours = split[word.box.x] {
                    return "PP-OCR read \(neighbours) there, a value split at a gap between segments"
                }
                // Segments the reader read otherwise, sure or not (a part of PP-OCR's number too: it does not confirm
                // the rest, `45` under `1.45` of 61.45): PP-OCR's reading of segments is the less reliable.
                if let other = readings.first(where: {
                    $0.strokesPerDigit >= minimumStrokesPerDigit && $0.text.filter(\.isNumber) != digits
                }) {
                    return "the segment reader read \(other.text) there"
                }
                return segmentDisplay ? unconfirmed(word.text, readings: readings) : nil
            }
        }
        // A number PP-OCR split at gaps between segments is given whole, flagged, on a segment display or where the
        // reader read digits across its parts (clean segments whose strokes join look like print to it: `99` over
        // `6.9 9`).
        lines = lines.map { line in
            joiningSplitNumbers(line) { parts in
                segmentDisplay || spansParts(parts.flatMap { readingsByBox[$0.box] ?? [] }, parts.map(\.text))
            }
        }
        // PP-OCR's lines keep their order (a template's neighbourhoods and the text read are PP-OCR's); the reader's
        // own lines follow.
        return lines
    }

    /// The line with each number PP-OCR split at gaps between segments given as one word, its parts joined (`6.9 9`
    /// → `6.99`, `1 4.57` → `14.57`, `8 2` → `82`: Tests/SevenSegmentHeldOut clean-3, turned-glare-2, Tests/
    /// SevenSegmentPhotos perspective-1) where they make one well-formed number, and a malformed number mended
    /// (`mended`: `3b3` → `363`, `1.4.5` → `14.5`), where `isValue` takes it for one value. Both are held at
    /// `doubtfulConfidence` with the reason: a person sees the number to check rather than its pieces.
    static func joiningSplitNumbers(_ line: PPOCRLine, where isValue: ([PPOCRWord]) -> Bool = { _ in true })
        -> PPOCRLine
    {
        var line = line
        // From the right, so the indices of the groups still to join stay put; a group whose words are not side by
        // side in the line is left as read.
        for group in splitGroups(line).sorted(by: { $0.min()! > $1.min()! })
        where Set(group) == Set(group.min()!...group.max()!) {
            let parts = group.map { line.words[$0] }
            let text = parts.map(\.text).joined()
            guard !isMalformedNumber(text), isValue(parts) else { continue }
            let first = parts.first!.box, last = parts.last!.box
            let top = parts.map(\.box.y).min()!, bottom = parts.map { $0.box.y + $0.box.height }.max()!
            line.words.replaceSubrange(
                group.min()!...group.max()!,
                with: [
                    PPOCRWord(
                        text: text, confidence: min(doubtfulConfidence, parts.map(\.confidence).min()!),
                        box: TextBox(
                            x: first.x, y: top, width: last.x + last.width - first.x, height: bottom - top,
                            score: first.score),
                        doubt: "PP-OCR read \(parts.map(\.text).joined(separator: " ")) there, a value split at gaps "
                            + "between segments, read together")
                ])
        }
        for index in line.words.indices {
            let text = line.words[index].text
            guard text.contains(where: \.isNumber), isMalformedNumber(text), isValue([line.words[index]]),
                let (mended, reason) = mended(text)
            else { continue }
            line.words[index].text = mended
            line.words[index].confidence = min(line.words[index].confidence, doubtfulConfidence)
            line.words[index].doubt = "PP-OCR read \(text) there: \(reason)"
        }
        line.text = line.words.map(\.text).joined(separator: " ")
        line.confidence = line.words.map(\.confidence).reduce(0, +) / Double(max(1, line.words.count))
        return line
    }

    /// PP-OCR's recogniser on the reader's regions that look like segments where PP-OCR's detector found no text and
    /// the reader gave no value: a number read there is a line of its own, flagged unless the reader read the same
    /// digits and point there surely, two digits at least. PP-OCR's detector misses segment digits whose strokes stand apart (a dim or
    /// turned thermometer's whole reading), while its recogniser, given the line, reads them as well as print.
    static func recognizedInRegions(
        _ all: [(box: TextBox, reading: SevenSegmentReading)], lines: [PPOCRLine], taken: [TextBox], width: Int,
        recognize: (TextBox) throws -> PPOCRLine?
    ) throws -> [PPOCRLine] {
        var found: [PPOCRLine] = []
        let regions = all.filter { $0.reading.strokesPerDigit >= minimumStrokesPerDigit && $0.reading.digits >= 1 }
            .sorted { $0.box.width * $0.box.height > $1.box.width * $1.box.height }
        func number(_ box: TextBox) throws -> PPOCRWord? {
            guard let line = try recognize(box), line.words.count == 1, let word = line.words.first,
                isPlainNumber(word.text)
            else { return nil }
            return word
        }
        for (region, _) in regions where region.height >= 8 {
            var box = region
            guard !taken.contains(where: { overlap($0, box) > 0.3 }),
                !found.contains(where: { overlap($0.box, box) > 0.3 }),
                !lines.contains(where: { overlap($0.box, box) > 0.3 }),
                var word = try number(box)
            else { continue }
            // A lone digit may be one of a value's digits standing apart, each a region of its own: the row widened by
            // its height on either side is read, and a longer number there holding the digit taken.
            if word.text.filter(\.isNumber).count == 1 {
                let x0 = max(0, box.x - box.height), x1 = min(width, box.x + box.width + box.height)
                let wide = TextBox(x: x0, y: box.y, width: x1 - x0, height: box.height, score: box.score)
                if !found.contains(where: { overlap($0.box, wide) > 0.3 }), let longer = try number(wide),
                    longer.text.filter(\.isNumber).count > 1,
                    longer.text.contains(word.text.filter(\.isNumber))
                {
                    (word, box) = (longer, wide)
                }
            }
            // A lone digit is as often a fragment of a value whose digits stand apart (angled-3's `3` of 37.7).
            let confirmed = all.contains {
                overlap($0.box, box) > 0.5 && $0.reading.digits >= 2
                    && $0.reading.strokesPerDigit >= minimumStrokesPerDigit
                    && $0.reading.confidence >= minimumConfidence && numeral($0.reading.text) == numeral(word.text)
            }
            let sure = confirmed && word.confidence >= minimumConfidence
            let value = PPOCRWord(
                text: word.text, confidence: sure ? word.confidence : min(word.confidence, doubtfulConfidence),
                box: box,
                doubt: sure
                    ? nil
                    : "PP-OCR read it where its detector found no text, in a region the segment reader found, and "
                        + "the segment reader did not read it alike")
            found.append(PPOCRLine(text: value.text, confidence: value.confidence, box: box, words: [value]))
        }
        return found
    }

    /// A number and nothing else but a unit after it: a sign, digits, at most one point with digits after it
    /// (`-12.0`, `9.8°C`, `67%`).
    static func isPlainNumber(_ text: String) -> Bool {
        var rest = Substring(text)
        if let first = rest.first, first == "-" || first == "−" { rest = rest.dropFirst() }
        let digits = rest.prefix { $0.isNumber || $0 == "." || $0 == "," }
        let unit = rest.dropFirst(digits.count)
        return digits.first?.isNumber == true && !isMalformedNumber(String(digits))
            && !unit.contains { $0.isNumber || $0 == "." }
    }

    /// Whether PP-OCR read a word of two letters or more, and no digit, over most of `box` with confidence 0.9 and more.
    static func isOverLetters(_ box: TextBox, _ lines: [PPOCRLine]) -> Bool {
        lines.contains { line in
            line.words.contains { word in
                word.confidence >= 0.9 && word.text.count >= 2 && word.text.allSatisfy(\.isLetter)
                    && overlap(word.box, box) > 0.5
            }
        }
    }

    /// The reader's value in `box` (cut at `cutHeight` rows at most), nil when it reads no digit.
    static func read(_ box: TextBox, in pixels: RGBPixels, reader: SevenSegmentReader) throws -> SevenSegmentReading? {
        guard box.width >= 4, box.height >= 8 else { return nil }
        let grey = GreyPixels(
            rgb: pixels.bytes, width: pixels.width, height: pixels.height,
            crop: (box.x, box.y, box.width, box.height), maximumHeight: cutHeight)
        return try reader.read(grey)
    }

    /// Why a value the reader chose may be wrong, or nil: another region over it reads other digits there (`60` where
    /// `01` was chosen: the region stopped short of the value); the region widened by its height on both sides reads
    /// more digits or other ones (its ink goes on past the region); PP-OCR read digits there that the value lacks,
    /// or the same digits with another decimal point (a point one of them lost).
    static func doubt(
        about reading: SevenSegmentReading, at box: TextBox, among all: [(box: TextBox, reading: SevenSegmentReading)],
        lines: [PPOCRLine], in pixels: RGBPixels, reader: SevenSegmentReader
    ) throws -> String? {
        if let other = disagreeing(with: reading, at: box, among: all) {
            return "another reading of the segments there is \(other)"
        }
        let grow = box.height
        let x0 = max(0, box.x - grow), x1 = min(pixels.width, box.x + box.width + grow)
        if x1 - x0 > box.width,
            let wide = try read(
                TextBox(x: x0, y: box.y, width: x1 - x0, height: box.height, score: 1), in: pixels, reader: reader),
            hasLeadingDigits(wide, before: reading)
        {
            return "the segments go on before the value's region (\(wide.text) there)"
        }
        for line in lines {
            for word in line.words where overlap(word.box, box) > 0.3 {
                if let reason = ppocrDisagrees(word.text, with: reading.text) { return reason }
            }
        }
        return nil
    }

    /// An overlapping region's reading of two digits or more, each glyph one digit's strokes at most (not a whole
    /// panel cut as one line), that is no part of the value: the two regions saw different digits there.
    static func disagreeing(
        with reading: SevenSegmentReading, at box: TextBox, among all: [(box: TextBox, reading: SevenSegmentReading)]
    ) -> String? {
        let digits = reading.text.filter(\.isNumber)
        return all.first { other in
            other.reading.digits >= 2 && other.reading.strokesPerDigit <= 7 && overlap(other.box, box) > 0.5
                && !digits.contains(other.reading.text.filter(\.isNumber))
        }?.reading.text
    }

    /// PP-OCR's numbers on a line that stand beside another number, closer than their height (`6.9 9` of 6.99,
    /// `7 2.5 4` of 72.54: PP-OCR splits segment digits at the gaps between segments), by their left edge, with the
    /// numbers read together.
    static func splitNumbers(_ line: PPOCRLine) -> [Int: String] {
        var split: [Int: String] = [:]
        for group in splitGroups(line) {
            let words = group.map { line.words[$0] }
            for word in words { split[word.box.x] = words.map(\.text).joined(separator: " ") }
        }
        return split
    }

    /// A malformed number PP-OCR read on segments made well-formed, and why, or nil: a `b` between digits is a 6
    /// without its top stroke (`3b3` → 363); of several points, read in gaps between segments, the last is kept
    /// (`1.4.5` → 14.5, `7.9.5` → 79.5: a display's point stands among the last digits).
    static func mended(_ text: String) -> (text: String, reason: String)? {
        if text.contains("b") {
            let six = text.replacingOccurrences(of: "b", with: "6")
            if !isMalformedNumber(six) { return (six, "a 6 without its top stroke looks like a b") }
        }
        guard let last = text.lastIndex(of: "."), text.filter({ $0 == "." }).count > 1 else { return nil }
        let kept = String(text[..<last].filter { $0 != "." }) + text[last...]
        return isMalformedNumber(kept) ? nil : (kept, "points read in gaps between segments, the last kept")
    }

    /// Whether one of the reader's `readings` over PP-OCR's split `parts` holds digits of two parts or more: two
    /// digits or more, in order in the parts read together and in no part alone (`99` over `6.9 9`).
    static func spansParts(_ readings: [SevenSegmentReading], _ parts: [String]) -> Bool {
        let joined = parts.joined().filter(\.isNumber)
        return readings.contains { reading in
            let digits = reading.text.filter(\.isNumber)
            return digits.count >= 2 && isSubsequence(digits, of: joined)
                && !parts.contains { isSubsequence(digits, of: $0.filter(\.isNumber)) }
        }
    }

    /// The indices of `line`'s words that are numbers standing beside another number, closer than their height, in
    /// groups of two or more, each from left to right.
    static func splitGroups(_ line: PPOCRLine) -> [[Int]] {
        let numbers = line.words.indices.filter { line.words[$0].text.contains(where: \.isNumber) }
            .sorted { line.words[$0].box.x < line.words[$1].box.x }
        var groups: [[Int]] = []
        for index in numbers {
            let word = line.words[index]
            if let last = groups.last?.last.map({ line.words[$0] }),
                word.box.x - (last.box.x + last.box.width) < max(last.box.height, 4)
            {
                groups[groups.count - 1].append(index)
            } else {
                groups.append([index])
            }
        }
        return groups.filter { $0.count > 1 }
    }

    /// Whether the wider region's reading holds the value's digits after others: digits before the region (a
    /// leading digit lost is what makes 9.8 of 239.8). Digits after it are as often a unit's letters read as digits.
    static func hasLeadingDigits(_ wide: SevenSegmentReading, before reading: SevenSegmentReading) -> Bool {
        let digits = reading.text.filter(\.isNumber), theirs = wide.text.filter(\.isNumber)
        guard let range = theirs.range(of: digits) else { return false }
        return range.lowerBound > theirs.startIndex
    }

    /// Why PP-OCR's word over the value casts doubt on it, or nil: digits the value lacks, or the same digits with
    /// a decimal point the value has not.
    static func ppocrDisagrees(_ word: String, with value: String) -> String? {
        let theirs = word.filter(\.isNumber), digits = value.filter(\.isNumber)
        guard !theirs.isEmpty else { return nil }
        if !isSubsequence(theirs, of: digits) { return "PP-OCR read \(word) there" }
        if theirs == digits, word.contains("."), !value.contains(".") {
            return "PP-OCR read a decimal point there (\(word))"
        }
        return nil
    }

    /// Whether the reader's `reading` looks like segments or is sure (a glyph at 0.8 and more each), and holds
    /// PP-OCR's `digits` in order with more besides: PP-OCR's number is then a part of it.
    static func isLonger(_ reading: SevenSegmentReading, than digits: String) -> Bool {
        (reading.strokesPerDigit >= minimumStrokesPerDigit || reading.confidence >= minimumConfidence)
            && reading.digits > digits.count && isSubsequence(digits, of: reading.text.filter(\.isNumber))
    }

    /// The line with `doubt`'s words held at `doubtfulConfidence`, each with its reason.
    static func doubting(_ line: PPOCRLine, _ doubt: (PPOCRWord) throws -> String?) rethrows -> PPOCRLine {
        var line = line
        var changed = false
        for index in line.words.indices {
            guard let reason = try doubt(line.words[index]) else { continue }
            line.words[index].doubt = reason
            line.words[index].confidence = min(line.words[index].confidence, doubtfulConfidence)
            changed = true
        }
        if changed { line.confidence = line.words.map(\.confidence).reduce(0, +) / Double(line.words.count) }
        return line
    }

    /// A number with two decimal points, or one at its end (`7.9.5`, `60.`), or a letter between its digits (`3b3`:
    /// a 6 without its top stroke read as a `b`), units and signs around it left aside.
    static func isMalformedNumber(_ text: String) -> Bool {
        let number = text.drop { !$0.isNumber }.reversed().drop { !$0.isNumber && $0 != "." && $0 != "," }.reversed()
        let points = number.filter { $0 == "." || $0 == "," }.count
        return points > 1 || (number.last.map { $0 == "." || $0 == "," } ?? false) || number.contains(where: \.isLetter)
    }

    /// Whether the picture shows a segment display: the reader read a value of segments (two digits or more, of two
    /// strokes or more each on average) in one of its regions, or segments under one of PP-OCR's numbers (a
    /// display whose heavy or blurred segments touch gives the reader little more), sure or not.
    static func isSegmentDisplay(_ regions: [SevenSegmentReading], underNumbers: [SevenSegmentReading]) -> Bool {
        regions.contains { $0.digits >= 2 && $0.strokesPerDigit >= minimumStrokesPerDigit }
            || underNumbers.contains { $0.strokesPerDigit >= minimumStrokesPerDigit }
    }

    /// Why PP-OCR's number on a segment display is in doubt, or nil where the reader read it alike, point and all,
    /// as segments: where heavy or blurred segments touch they look like print to the stroke count, the reader reads
    /// nothing or reads print, and PP-OCR drops a point (`243` of 24.3), adds one (`7.9` of 79) or takes a 5 for a 6
    /// (`152` of 162) at 0.9 and more (Tests/SevenSegmentHeldOut's turned-4, noisy-2, turned-glare-1).
    static func unconfirmed(_ word: String, readings: [SevenSegmentReading]) -> String? {
        if readings.contains(where: {
            $0.strokesPerDigit >= minimumStrokesPerDigit && numeral($0.text) == numeral(word)
        }) {
            return nil
        }
        guard let other = readings.first else {
            return "a number on a segment display that the segment reader could not read"
        }
        return numeral(other.text) == numeral(word)
            ? "a number on a segment display whose strokes look like print to the segment reader"
            : "a number on a segment display that the segment reader read as \(other.text)"
    }

    /// A word's digits and decimal point, units and signs around them left aside (`25.3` of `25.3°C`, `-0.5`'s `0.5`).
    static func numeral(_ text: String) -> String {
        String(text.filter { $0.isNumber || $0 == "." || $0 == "," }.map { $0 == "," ? "." : $0 })
    }

    /// Whether `part`'s characters appear in `whole` in order (`17` in `147`).
    static func isSubsequence(_ part: String, of whole: String) -> Bool {
        var rest = Substring(whole)
        for character in part {
            guard let index = rest.firstIndex(of: character) else { return false }
            rest = rest[rest.index(after: index)...]
        }
        return true
    }

    static func accepted(_ reading: SevenSegmentReading, minimum: Double = minimumConfidence) -> Bool {
        reading.strokesPerDigit >= minimumStrokesPerDigit && reading.confidence >= minimum
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
            line.words.replaceSubrange(
                numeric.first!...numeric.last!,
                with: [
                    PPOCRWord(
                        text: prefix + word.text + suffix, confidence: word.confidence,
                        box: TextBox(
                            x: first.box.x, y: first.box.y, width: right - first.box.x, height: first.box.height,
                            score: first.box.score),
                        doubt: word.doubt)
                ])
        }
        line.text = line.words.map(\.text).joined(separator: " ")
        line.confidence = line.words.map(\.confidence).reduce(0, +) / Double(line.words.count)
        return line
    }

    /// The share of the smaller box that the two boxes have in common.
    static func overlap(_ a: TextBox, _ b: TextBox) -> Double {
        let width = min(a.x + a.width, b.x + b.width) - max(a.x, b.x),
            height = min(a.y + a.height, b.y + b.height) - max(a.y, b.y)
        guard width > 0, height > 0 else { return 0 }
        return Double(width * height) / Double(max(1, min(a.width * a.height, b.width * b.height)))
    }

    /// What is around the number in a word: `°C` of `25.3°C`, `(` of `(12`.
    static func surrounding(_ text: String) -> (prefix: String, suffix: String) {
        let characters = Array(text)
        guard let first = characters.firstIndex(where: { $0.isNumber || $0 == "-" || $0 == "−" }),
            let last = characters.lastIndex(where: \.isNumber)
        else { return ("", "") }
        return (String(characters[..<first]), String(characters[(last + 1)...]))
    }
}
