import Foundation
import TextRecognition

/// How large a photo is read, and how light. Tesseract's work grows with the pixels while its accuracy needs text
/// only about 30 px high, so a phone photo whose text is far larger is read smaller: a 12 MP JPEG took 7.7 s (debug,
/// loaded machine), the same photo at 3 MP 2.1 s, the text as legible in both (issue 40).
///
/// A JPEG is first decoded at 1/8 (libjpeg's DCT scaling: a few milliseconds, no full-size pixels allocated), its
/// text's height measured there (the median dark component, `Image.medianComponentHeight`), and then decoded at
/// the largest reduction (2, 4 or 8, or the preview itself) that keeps that text `textHeight` high and the photo
/// `minimumPixels` large; another format's single large page is decoded whole and scaled down by the same rule.
/// A page whose lightest pixels are dim (a photo in a dark room) has its levels stretched before anything else.
/// Results are reported in the file's own pixels (`scale` maps them back).
enum PhotoSizing {
    /// A photo of at most this many pixels is read as it is.
    static let largePhoto = 4_000_000
    /// Text is kept at least this high (the median dark component, in pixels).
    static let textHeight = 32.0
    /// A photo is never brought under this many pixels: a dim 12 MP photo read at 0.75 MP lost its display's
    /// values, at 3 MP not (`PhonePhotoTests`).
    static let minimumPixels = 1_500_000
    /// A non-JPEG page is scaled only when that saves at least this much of each side.
    static let worthScaling = 0.75

    struct Sized {
        var pages: [Image]
        /// The pages' pixels per pixel of the file (1: full size; 0.5: half of each side).
        var scale: Double
    }

    static func decode(_ data: Data, decoder: ImageDecoder) throws -> Sized {
        let preview = try decoder.decode(data, jpegReduction: 8)
        var sized: Sized
        if preview.format == .jpeg, let page = preview.pages.first {
            let pixels = page.pixelCount * preview.reduction * preview.reduction
            let reduction =
                pixels <= largePhoto
                ? 1 : try jpegReduction(pixels: pixels, preview: page, previewReduction: preview.reduction)
            sized =
                reduction == preview.reduction
                ? Sized(pages: preview.pages, scale: 1 / Double(reduction))
                : Sized(pages: try decoder.decode(data, jpegReduction: reduction).pages, scale: 1 / Double(reduction))
        } else if preview.pages.count == 1, let page = preview.pages.first, page.pixelCount > largePhoto,
            let height = try page.medianComponentHeight()
        {
            let factor = self.factor(pixels: page.pixelCount, textHeight: height)
            sized =
                factor <= worthScaling
                ? Sized(pages: [try page.scaled(by: factor)], scale: factor) : Sized(pages: preview.pages, scale: 1)
        } else {
            sized = Sized(pages: preview.pages, scale: 1)
        }
        sized.pages = try sized.pages.map { try brightened($0) }
        return sized
    }

    /// The largest JPEG reduction that keeps the text (measured on the 1/`previewReduction` preview) and the photo
    /// large enough.
    static func jpegReduction(pixels: Int, preview: Image, previewReduction: Int) throws -> Int {
        guard let previewHeight = try preview.medianComponentHeight() else { return 1 }
        let height = previewHeight * Double(previewReduction)
        return [8, 4, 2].first { r in
            height / Double(r) >= textHeight && pixels / (r * r) >= minimumPixels
        } ?? 1
    }

    /// The scale (at most 1) that brings text `textHeight` high without going under `minimumPixels`.
    static func factor(pixels: Int, textHeight height: Double) -> Double {
        min(1, max(textHeight / height, (Double(minimumPixels) / Double(pixels)).squareRoot()))
    }

    /// A page whose lightest pixels are under this grey level is a dark photo.
    static let dimHighlights = 128

    /// `page` with its levels stretched (the darkest 0.5 % to black, the lightest 0.5 % to white) when it is dim, as
    /// is.
    static func brightened(_ page: Image) throws -> Image {
        let high = try page.greyPercentile(0.995)
        guard high < dimHighlights else { return page }
        let low = try page.greyPercentile(0.005)
        guard high - low >= 8 else { return page }  // nothing but one shade: nothing to stretch
        return try page.stretched(low: low, high: high)
    }
}
