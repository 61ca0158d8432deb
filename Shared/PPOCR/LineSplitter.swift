import OpenCVDNN

/// Cuts a line too long for the recogniser's 320 columns into pieces at its quietest columns (least contrast: a
/// gap between characters), so no character is cut in two.
enum LineSplitter {
    /// `count` pieces of about equal width, each cut moved to the quietest column within an eighth of a piece; and
    /// for each cut whether it fell in a gap at least a third of the line's height wide (a space between words).
    static func pieces(_ pixels: RGBPixels, box: TextBox, count: Int) -> (
        pieces: [(x: Int, width: Int)], spaces: [Bool]
    ) {
        guard count > 1 else { return ([(box.x, box.width)], []) }
        // Each column's contrast: the range of its luminance.
        var contrast = [Int](repeating: 0, count: box.width)
        pixels.bytes.withUnsafeBufferPointer { rgb in
            for column in 0..<box.width {
                var low = 255, high = 0
                let x = box.x + column
                for y in box.y..<(box.y + box.height) {
                    let i = (y * pixels.width + x) * 3
                    let luminance = (Int(rgb[i]) * 299 + Int(rgb[i + 1]) * 587 + Int(rgb[i + 2]) * 114) / 1000
                    low = min(low, luminance)
                    high = max(high, luminance)
                }
                contrast[column] = high - low
            }
        }
        let quiet = (contrast.max() ?? 0) / 4
        let pieceWidth = Double(box.width) / Double(count)
        let reach = max(1, Int(pieceWidth / 8))
        var cuts: [Int] = []
        var spaces: [Bool] = []
        for index in 1..<count {
            let target = Int(Double(index) * pieceWidth)
            let range = max((cuts.last ?? 0) + 1, target - reach)...min(box.width - 2, target + reach)
            guard !range.isEmpty else { continue }
            let cut = range.min { (contrast[$0], abs($0 - target)) < (contrast[$1], abs($1 - target)) }!
            var left = cut, right = cut
            while left > 0, contrast[left - 1] <= quiet { left -= 1 }
            while right < box.width - 1, contrast[right + 1] <= quiet { right += 1 }
            cuts.append(cut)
            spaces.append(contrast[cut] <= quiet && right - left + 1 >= box.height / 3)
        }
        var pieces: [(x: Int, width: Int)] = []
        var start = 0
        for cut in cuts + [box.width] {
            pieces.append((box.x + start, cut - start))
            start = cut
        }
        return (pieces, spaces)
    }
}
