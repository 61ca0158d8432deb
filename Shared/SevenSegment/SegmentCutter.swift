import Foundation

/// Grey pixels (0 black – 255 white), rows top to bottom.
public struct GreyPixels: Sendable {
    public let width: Int
    public let height: Int
    public let bytes: [UInt8]

    public init(width: Int, height: Int, bytes: [UInt8]) {
        precondition(width > 0 && height > 0 && bytes.count == width * height, "grey pixels of the wrong size")
        self.width = width
        self.height = height
        self.bytes = bytes
    }

    /// The luma of 8-bit RGB pixels (width × height × 3), optionally a crop of them, averaged down by a whole
    /// factor to at most `maximumHeight` rows (a phone photo's line need not be cut at full size).
    public init(
        rgb: [UInt8], width: Int, height: Int, crop: (x: Int, y: Int, width: Int, height: Int)? = nil,
        maximumHeight: Int = .max
    ) {
        let area = crop ?? (0, 0, width, height)
        let factor = area.height > maximumHeight ? (area.height + maximumHeight - 1) / max(1, maximumHeight) : 1
        let outWidth = max(1, area.width / factor), outHeight = max(1, area.height / factor)
        var grey = [UInt8](repeating: 0, count: outWidth * outHeight)
        for y in 0..<outHeight {
            for x in 0..<outWidth {
                var sum = 0
                for sy in 0..<factor {
                    for sx in 0..<factor {
                        let i = ((area.y + y * factor + sy) * width + area.x + x * factor + sx) * 3
                        let red = 299 * Int(rgb[i]), green = 587 * Int(rgb[i + 1]), blue = 114 * Int(rgb[i + 2])
                        sum += red + green + blue
                    }
                }
                grey[y * outWidth + x] = UInt8(sum / (1000 * factor * factor))
            }
        }
        self.init(width: outWidth, height: outHeight, bytes: grey)
    }
}

/// One glyph of a segment display as the cutter found it.
public enum SegmentCell: Sendable, Equatable {
    /// A digit or minus sign to classify: its `side` × `side` patch, ink 1 on background 0, its left edge, and how
    /// many separate strokes it is made of (a segment digit's 2–7, a printed digit's 1).
    case glyph(patch: [Float], x: Int, strokes: Int)
    /// A decimal point (a small blob on the baseline), at x.
    case point(x: Int)
}

/// Cuts a line of a segment display into glyphs. A display's digits are made of separate strokes, so connected
/// components do not give glyphs; columns do: the line is un-slanted (the shear that empties the most columns
/// between glyphs), and every run of inked columns is one glyph, a decimal point when it is a small blob on the
/// baseline. The trainer (`sevenseg-train`) cuts its renderings with this same code, so the network sees what the
/// reader will show it.
public enum SegmentCutter {
    /// The network's input side.
    public static let side = 32

    /// The cells left to right, or nil when the picture has no two-tone ink (blank, or no contrast).
    public static func cut(_ picture: GreyPixels) -> [SegmentCell]? {
        guard picture.width >= 4, picture.height >= 8, let flat = flattened(picture) else { return nil }
        let grey = levelled(flat)
        let (w, h) = (grey.width, grey.height)
        let threshold = otsu(grey.bytes)
        // The background is the side of the threshold most of the border is on.
        let inkIsLight = mostOfTheBorderIsDark(grey, threshold: threshold)
        var inkSum = 0.0, inkCount = 0, backSum = 0.0, backCount = 0
        var ink = [Bool](repeating: false, count: w * h)
        for i in 0..<(w * h) {
            let v = grey.bytes[i]
            if (v > threshold) == inkIsLight {
                ink[i] = true
                inkSum += Double(v)
                inkCount += 1
            } else {
                backSum += Double(v)
                backCount += 1
            }
        }
        guard inkCount > 0, backCount > 0 else { return nil }
        let inkLevel = inkSum / Double(inkCount), backLevel = backSum / Double(backCount)
        guard abs(inkLevel - backLevel) >= 24 else { return nil }
        let labels: [Int32]
        (ink, labels) = components(ink, width: w, height: h)

        let shear = bestShear(ink, width: w, height: h)
        let shift = { (x: Int, y: Int) -> Int in x + Int((shear * Double(h - 1 - y)).rounded()) }
        let span = w + Int((abs(shear) * Double(h)).rounded()) + 1
        let offset = shear < 0 ? Int((abs(shear) * Double(h)).rounded()) : 0
        // Per sheared column: ink count, top and bottom row.
        var count = [Int](repeating: 0, count: span), top = [Int](repeating: h, count: span),
            bottom = [Int](repeating: -1, count: span)
        for y in 0..<h {
            for x in 0..<w where ink[y * w + x] {
                let c = shift(x, y) + offset
                guard c >= 0, c < span else { continue }
                count[c] += 1
                top[c] = min(top[c], y)
                bottom[c] = max(bottom[c], y)
            }
        }
        var runs: [(from: Int, to: Int, top: Int, bottom: Int)] = []
        var c = 0
        while c < span {
            guard count[c] > 0 else {
                c += 1
                continue
            }
            var run = (from: c, to: c, top: top[c], bottom: bottom[c])
            while c + 1 < span, count[c + 1] > 0 {
                c += 1
                run.to = c
                run.top = min(run.top, top[c])
                run.bottom = max(run.bottom, bottom[c])
            }
            runs.append(run)
            c += 1
        }
        guard let tallest = runs.map({ $0.bottom - $0.top + 1 }).max(), tallest >= 6 else { return nil }
        let tall = runs.filter { $0.bottom - $0.top + 1 >= tallest / 2 }
        let lineTop = tall.map(\.top).min()!, lineBottom = tall.map(\.bottom).max()!
        let lineHeight = lineBottom - lineTop + 1

        // A decimal point that blur or a tight gap joined to the digit before it: the run's last columns hold ink
        // only near the baseline, where every digit's right edge is a segment reaching above it.
        // The same at a run's first columns: a point set close before the next digit (or leaning on it in a
        // perspective) is joined to that digit, whose left edge reaches above the baseline too.
        var headless: [(from: Int, to: Int, top: Int, bottom: Int)] = []
        for run in runs {
            var c = run.from
            while c < run.to, count[c] == 0 || top[c] * 4 > lineTop * 4 + lineHeight * 3 { c += 1 }
            let head = c - run.from, rest = run.to - c + 1
            if head * 20 >= lineHeight, head * 5 <= lineHeight * 2, rest * 5 >= lineHeight,
                (run.from..<c).contains(where: { count[$0] > 0 })
            {
                let last = (run.from..<c).last { count[$0] > 0 }!
                headless.append(
                    (
                        run.from, last, (run.from...last).map { top[$0] }.min()!,
                        (run.from...last).map { bottom[$0] }.max()!
                    ))
                headless.append(
                    (c, run.to, (c...run.to).map { top[$0] }.min()!, (c...run.to).map { bottom[$0] }.max()!))
            } else {
                headless.append(run)
            }
        }
        var split: [(from: Int, to: Int, top: Int, bottom: Int)] = []
        for run in headless {
            var c = run.to
            while c > run.from, count[c] == 0 || top[c] * 4 > lineTop * 4 + lineHeight * 3 { c -= 1 }
            let tail = run.to - c, rest = c - run.from + 1
            if tail * 20 >= lineHeight, tail * 5 <= lineHeight * 2, rest * 5 >= lineHeight,
                (c + 1...run.to).contains(where: { count[$0] > 0 })
            {
                let first = (c + 1...run.to).first { count[$0] > 0 }!
                split.append(
                    (run.from, c, (run.from...c).map { top[$0] }.min()!, (run.from...c).map { bottom[$0] }.max()!))
                split.append(
                    (first, run.to, (first...run.to).map { top[$0] }.min()!, (first...run.to).map { bottom[$0] }.max()!)
                )
            } else {
                split.append(run)
            }
        }
        // Displays whose horizontal segments stop short of the vertical ones leave a narrow empty column inside a
        // digit: runs that close (under a tenth of the line) join while the digit stays narrower than 0.75 of the
        // line (digits are 0.4–0.65 of it, the gap between two a fifth or more); a point never joins.
        func isPoint(_ run: (from: Int, to: Int, top: Int, bottom: Int)) -> Bool {
            let runHeight = run.bottom - run.top + 1, runWidth = run.to - run.from + 1
            return runHeight * 10 < lineHeight * 3 && runWidth * 2 < lineHeight
                && run.top * 10 > lineTop * 10 + lineHeight * 6
        }
        var joined: [(from: Int, to: Int, top: Int, bottom: Int)] = []
        for run in split {
            if let last = joined.last, !isPoint(last), !isPoint(run), (run.from - last.to - 1) * 10 < lineHeight,
                (run.to - last.from + 1) * 4 <= lineHeight * 3
            {
                joined[joined.count - 1] = (last.from, run.to, min(last.top, run.top), max(last.bottom, run.bottom))
            } else {
                joined.append(run)
            }
        }
        var cells: [SegmentCell] = []
        for run in joined {
            let runHeight = run.bottom - run.top + 1, runWidth = run.to - run.from + 1
            let x = run.from - offset
            if isPoint(run) {
                cells.append(.point(x: x))
            } else if runWidth * 20 >= lineHeight, runHeight * 20 >= lineHeight,
                runHeight * 10 >= lineHeight * 3 || runWidth * 5 >= lineHeight
            {
                // A glyph; a short one (a minus) at least a fifth of the line wide.
                var extents: [Int32: (from: Int, to: Int, top: Int, bottom: Int)] = [:]
                for y in 0..<h {
                    for x in 0..<w where ink[y * w + x] {
                        let c = shift(x, y) + offset
                        guard c >= run.from, c <= run.to else { continue }
                        let label = labels[y * w + x]
                        let e = extents[label] ?? (c, c, y, y)
                        extents[label] = (min(e.from, c), max(e.to, c), min(e.top, y), max(e.bottom, y))
                    }
                }
                // A decimal point whose columns the digit beside it shares (set close, or leaning on it in a
                // perspective): a stroke of its own, small and round, on the baseline; a point before the digit or
                // after it by which side of the digit's middle it sits.
                let dots =
                    extents.count > 1
                    ? extents.values.filter { isDot($0, lineTop: lineTop, lineBottom: lineBottom) } : []
                let middle = (run.from + run.to) / 2
                for dot in dots where dot.to < middle { cells.append(.point(x: dot.from - offset)) }
                cells.append(
                    .glyph(
                        patch: patch(
                            grey, shear: shear, from: run.from - offset, to: run.to - offset, top: lineTop,
                            bottom: lineBottom, ink: inkLevel, back: backLevel),
                        x: x, strokes: extents.count - dots.count))
                for dot in dots where dot.to >= middle { cells.append(.point(x: dot.from - offset)) }
            }
        }
        return cells
    }

    /// Whether at least half of the picture's border pixels are at or under `threshold`: the background is the side
    /// of the threshold most of the border is on, so the ink is light when the border is dark.
    static func mostOfTheBorderIsDark(_ grey: GreyPixels, threshold: UInt8) -> Bool {
        let (w, h) = (grey.width, grey.height)
        var borderDark = 0, border = 0
        for x in 0..<w {
            for y in [0, h - 1] {
                border += 1
                if grey.bytes[y * w + x] <= threshold { borderDark += 1 }
            }
        }
        for y in 0..<h {
            for x in [0, w - 1] {
                border += 1
                if grey.bytes[y * w + x] <= threshold { borderDark += 1 }
            }
        }
        return borderDark * 2 >= border
    }

    /// The picture's ink as light on a black background, its background's own light taken off: the background is
    /// the picture with its strokes closed over (the maximum of minima over a square a seventh of the line high and
    /// more, wider than any segment, of the picture with dark ink inverted: a top-hat). A glare patch or shadow
    /// across the line lifts or darkens the background and its ink alike, so one threshold then holds for the whole
    /// line (Otsu's on the picture itself lost the digits under a glare). The ink's polarity is the side of Otsu's
    /// threshold most of the border is not on; nil without two tones.
    static func flattened(_ grey: GreyPixels) -> GreyPixels? {
        let (w, h) = (grey.width, grey.height)
        let threshold = otsu(grey.bytes)
        let inkIsLight = mostOfTheBorderIsDark(grey, threshold: threshold)
        // Light ink as is; dark ink inverted, so the background is what an opening (minima, then maxima) leaves.
        let values = grey.bytes.map { inkIsLight ? Int($0) : 255 - Int($0) }
        let radius = max(2, h / 7)
        let opened = extreme(
            extreme(values, width: w, height: h, radius: radius, max: false), width: w, height: h,
            radius: radius, max: true)
        let flat = (0..<(w * h)).map { UInt8(max(0, min(255, values[$0] - opened[$0]))) }
        guard flat.contains(where: { $0 >= 24 }) else { return nil }
        return GreyPixels(width: w, height: h, bytes: flat)
    }

    /// The flattened line turned level: the turn in −12°…12° (by 1°) under which its ink's rows, a few per cent
    /// off either end, span the fewest, when that is 4 % fewer than upright. A display photographed turned has its
    /// digits on a slope, each glyph's box then off its neighbours' (slant is a shear the cut undoes; a turn is not).
    static func levelled(_ flat: GreyPixels) -> GreyPixels {
        let (w, h) = (flat.width, flat.height)
        let threshold = otsu(flat.bytes)
        var points: [(x: Double, y: Double)] = []
        for y in 0..<h {
            for x in 0..<w where flat.bytes[y * w + x] > threshold {
                points.append((Double(x) - Double(w) / 2, Double(y) - Double(h) / 2))
            }
        }
        guard points.count >= 20 else { return flat }
        func span(_ degrees: Double) -> Double {
            let (sine, cosine) = (sin(degrees * .pi / 180), cos(degrees * .pi / 180))
            let rows = points.map { $0.y * cosine - $0.x * sine }.sorted()
            return rows[rows.count * 97 / 100] - rows[rows.count * 3 / 100]
        }
        let upright = span(0)
        var best = (degrees: 0.0, span: upright * 0.96)
        for step in 1...12 {
            for degrees in [Double(step), -Double(step)] {
                let s = span(degrees)
                if s < best.span { best = (degrees, s) }
            }
        }
        guard best.degrees != 0 else { return flat }
        // Each pixel of the level picture from the turned one (bilinear), black off its edges.
        let (sine, cosine) = (sin(best.degrees * .pi / 180), cos(best.degrees * .pi / 180))
        var out = [UInt8](repeating: 0, count: w * h)
        for y in 0..<h {
            for x in 0..<w {
                let u = Double(x) - Double(w) / 2, v = Double(y) - Double(h) / 2
                let sx = u * cosine + v * sine + Double(w) / 2, sy = -u * sine + v * cosine + Double(h) / 2
                let x0 = Int(sx.rounded(.down)), y0 = Int(sy.rounded(.down))
                guard x0 >= 0, y0 >= 0, x0 + 1 < w, y0 + 1 < h else { continue }
                let fx = sx - Double(x0), fy = sy - Double(y0)
                let p = { (xx: Int, yy: Int) in Double(flat.bytes[yy * w + xx]) }
                let top = p(x0, y0) * (1 - fx) + p(x0 + 1, y0) * fx
                let bottom = p(x0, y0 + 1) * (1 - fx) + p(x0 + 1, y0 + 1) * fx
                out[y * w + x] = UInt8(max(0, min(255, (top * (1 - fy) + bottom * fy).rounded())))
            }
        }
        return GreyPixels(width: w, height: h, bytes: out)
    }

    /// The minimum (or maximum) over a (2r + 1)² square around each pixel, clamped at the edges, in two passes.
    static func extreme(_ values: [Int], width w: Int, height h: Int, radius r: Int, max isMax: Bool) -> [Int] {
        let pick: (Int, Int) -> Int = isMax ? { Swift.max($0, $1) } : { Swift.min($0, $1) }
        var across = values
        for y in 0..<h {
            for x in 0..<w {
                var v = values[y * w + x]
                for xx in Swift.max(0, x - r)...Swift.min(w - 1, x + r) { v = pick(v, values[y * w + xx]) }
                across[y * w + x] = v
            }
        }
        var out = across
        for y in 0..<h {
            for x in 0..<w {
                var v = across[y * w + x]
                for yy in Swift.max(0, y - r)...Swift.min(h - 1, y + r) { v = pick(v, across[yy * w + x]) }
                out[y * w + x] = v
            }
        }
        return out
    }

    /// Whether a stroke (sheared columns `from`…`to`, rows `top`…`bottom`) is a decimal point: at most 0.22 of the
    /// line each way, round (within 1.4 : 1; a digit's bottom segment is two strokes' width long and more, its side
    /// segments tall), in the line's lowest three tenths and reaching its baseline.
    static func isDot(_ e: (from: Int, to: Int, top: Int, bottom: Int), lineTop: Int, lineBottom: Int) -> Bool {
        let line = lineBottom - lineTop + 1, width = e.to - e.from + 1, height = e.bottom - e.top + 1
        return width * 100 <= line * 22 && height * 100 <= line * 22 && width * 10 <= height * 14
            && height * 10 <= width * 14
            && e.top * 10 >= lineTop * 10 + line * 7 && e.bottom * 100 >= lineBottom * 100 - line * 12
    }

    /// The cell's box (sheared columns `from`…`to`, rows `top`…`bottom`) fitted into `side` × `side` keeping its
    /// shape, centred, ink 1 and background 0, sampled 3 × 3 per pixel.
    static func patch(
        _ grey: GreyPixels, shear: Double, from: Int, to: Int, top: Int, bottom: Int, ink: Double, back: Double
    ) -> [Float] {
        let margin = Double(bottom - top + 1) * 0.08
        let boxLeft = Double(from) - margin, boxTop = Double(top) - margin
        let boxWidth = Double(to - from + 1) + 2 * margin, boxHeight = Double(bottom - top + 1) + 2 * margin
        let inner = Double(side - 2)
        let scale = inner / max(boxWidth, boxHeight)
        let left = (Double(side) - boxWidth * scale) / 2, upper = (Double(side) - boxHeight * scale) / 2
        var out = [Float](repeating: 0, count: side * side)
        let h = grey.height
        for py in 0..<side {
            for px in 0..<side {
                var sum = 0.0
                for sy in 0..<3 {
                    for sx in 0..<3 {
                        let u = (Double(px) + (Double(sx) + 0.5) / 3 - left) / scale + boxLeft
                        let v = (Double(py) + (Double(sy) + 0.5) / 3 - upper) / scale + boxTop
                        // Back from the sheared column to the picture's.
                        let x = Int((u - shear * (Double(h - 1) - v)).rounded(.down)), y = Int(v.rounded(.down))
                        let value =
                            x >= 0 && x < grey.width && y >= 0 && y < h ? Double(grey.bytes[y * grey.width + x]) : back
                        sum += min(1, max(0, (value - back) / (ink - back)))
                    }
                }
                out[py * side + px] = Float(sum / 9)
            }
        }
        return out
    }

    /// The shear (x moved by shear × height above the bottom) in −0.3…0.3 under which the ink covers the fewest
    /// columns (each glyph at its narrowest, the gaps between them open); upright on a tie. (The most empty columns
    /// inside the span would tear a lone `1` into its two segments.)
    static func bestShear(_ ink: [Bool], width w: Int, height h: Int) -> Double {
        var points: [(x: Int, y: Int)] = []
        for y in 0..<h { for x in 0..<w where ink[y * w + x] { points.append((x, y)) } }
        var best = (shear: 0.0, used: Int.max)
        for step in [0, 1, -1, 2, -2, 3, -3, 4, -4, 5, -5, 6, -6] {
            let shear = Double(step) * 0.05
            let offset = Int((0.3 * Double(h)).rounded()) + 1
            var used = [Bool](repeating: false, count: w + 2 * offset + 1)
            for p in points { used[p.x + Int((shear * Double(h - 1 - p.y)).rounded()) + offset] = true }
            let covered = used.filter { $0 }.count
            if covered < best.used { best = (shear, covered) }
        }
        return best.shear
    }

    /// Ink without components of fewer than 3 pixels (noise would otherwise join glyphs' columns), and each ink
    /// pixel's component (4-connected; 0 off the ink).
    static func components(_ ink: [Bool], width w: Int, height h: Int) -> (ink: [Bool], labels: [Int32]) {
        var out = ink
        var labels = [Int32](repeating: 0, count: w * h)
        var next: Int32 = 1
        var stack: [Int] = [], component: [Int] = []
        for start in 0..<(w * h) where ink[start] && labels[start] == 0 {
            stack = [start]
            component = []
            labels[start] = next
            while let i = stack.popLast() {
                component.append(i)
                let x = i % w, y = i / w
                for (dx, dy) in [(1, 0), (-1, 0), (0, 1), (0, -1)] {
                    let nx = x + dx, ny = y + dy
                    guard nx >= 0, nx < w, ny >= 0, ny < h else { continue }
                    let j = ny * w + nx
                    if ink[j] && labels[j] == 0 {
                        labels[j] = next
                        stack.append(j)
                    }
                }
            }
            if component.count < 3 {
                for i in component {
                    out[i] = false
                    labels[i] = 0
                }
            }
            next += 1
        }
        return (out, labels)
    }

    /// Otsu's threshold: the grey level that best splits the histogram in two.
    static func otsu(_ bytes: [UInt8]) -> UInt8 {
        var histogram = [Int](repeating: 0, count: 256)
        for v in bytes { histogram[Int(v)] += 1 }
        let total = Double(bytes.count)
        let sumAll = histogram.enumerated().reduce(0.0) { $0 + Double($1.offset * $1.element) }
        var sumBack = 0.0, weightBack = 0.0, best = (level: 0, variance: -1.0)
        for level in 0..<256 {
            weightBack += Double(histogram[level])
            guard weightBack > 0 else { continue }
            let weightFore = total - weightBack
            guard weightFore > 0 else { break }
            sumBack += Double(level * histogram[level])
            let meanBack = sumBack / weightBack, meanFore = (sumAll - sumBack) / weightFore
            let variance = weightBack * weightFore * (meanBack - meanFore) * (meanBack - meanFore)
            if variance > best.variance { best = (level, variance) }
        }
        return UInt8(best.level)
    }
}
