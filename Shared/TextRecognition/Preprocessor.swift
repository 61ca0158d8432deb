import Foundation

/// Which corrections to apply before recognition.
public struct PreprocessingOptions: Sendable, Hashable {
    /// Turn pages lying on their side or upside down upright (Tesseract's orientation detection).
    public var detectOrientation: Bool
    /// Rotate slightly skewed text lines level.
    public var deskew: Bool
    /// Binarise grey and colour images with a local threshold (uneven light, shadows).
    public var binarize: Bool
    /// Invert an image that is mostly dark (white text on a dark display or sign).
    public var invertDarkBackground: Bool
    /// Enlarge small text (twice, while the image stays under `maxUpscaledPixels`): Tesseract's LSTM misreads
    /// letters whose lowercase is under about 20 pixels high (phototest's `quick` reads `guick` at its size).
    public var upscaleSmallText: Bool

    public init(
        detectOrientation: Bool, deskew: Bool, binarize: Bool, invertDarkBackground: Bool = true,
        upscaleSmallText: Bool = false
    ) {
        self.detectOrientation = detectOrientation
        self.deskew = deskew
        self.binarize = binarize
        self.invertDarkBackground = invertDarkBackground
        self.upscaleSmallText = upscaleSmallText
    }

    /// Only the inversion of dark images: costs a threshold and a pixel count.
    public static let minimal = PreprocessingOptions(detectOrientation: false, deskew: false, binarize: false)
    /// Everything.
    public static let full = PreprocessingOptions(
        detectOrientation: true, deskew: true, binarize: true, upscaleSmallText: true)
    /// Everything but the binarisation: small text enlarged from its grey edges and left for Tesseract's own
    /// threshold, which keeps accents a local threshold breaks (rendered Czech at 13–20 px: 0.70 % CER against
    /// 1.48 % binarised).
    public static let enlarged = PreprocessingOptions(
        detectOrientation: true, deskew: true, binarize: false, upscaleSmallText: true)
}

/// An image ready for recognition and what was done to it.
public struct PreparedImage: Sendable {
    public var image: Image
    /// Clockwise quarter turns applied to make the text upright (0–3).
    public var quarterTurns: Int
    /// The skew corrected, in degrees (0 when none was).
    public var deskewDegrees: Double
    public var inverted: Bool
    public var binarized: Bool
    /// How much `image` was enlarged (1 when it was not): divide its coordinates by this for the upright image's.
    public var scale: Double

    public init(
        image: Image, quarterTurns: Int, deskewDegrees: Double, inverted: Bool, binarized: Bool, scale: Double
    ) {
        self.image = image
        self.quarterTurns = quarterTurns
        self.deskewDegrees = deskewDegrees
        self.inverted = inverted
        self.binarized = binarized
        self.scale = scale
    }

    /// Width and height of the upright image before any enlarging, which results are reported in.
    public var uprightWidth: Int { Int((Double(image.width) / scale).rounded()) }
    public var uprightHeight: Int { Int((Double(image.height) / scale).rounded()) }
}

/// Corrections that make a photo or scan easier for Tesseract, each cheap next to recognition.
public enum Preprocessor {
    /// Skews below this are left alone: rotating costs sharpness for no gain.
    static let minimumSkewDegrees = 0.2
    /// Leptonica's skew confidence below which its angle is noise.
    static let minimumSkewConfidence = 2.5
    /// Tesseract's orientation confidence below which a turn is not trusted.
    static let minimumOrientationConfidence = 1.5
    /// Text whose components are lower than this (pixels, about the lowercase height) is enlarged: a binary page
    /// (a fax or a scan's G4 TIFF, or such a page stored as grey: under `binaryMidTones` of its pixels between black
    /// and white), whose stair-stepped edges the interpolation smooths, up to 20 px; a grey or colour one only under
    /// 12 px, since its anti-aliased edges already carry the detail. Measured on rendered
    /// Czech (Services/OCR/README.md): the 36-page set (6–11 px) reads better enlarged, while the large clean
    /// pages (12–14 px) read 1.58 % and 0.79 % enlarged against 0 % as they are, the `tesseract` program's figure;
    /// the binary phototest pages (12–20 px) lose enlarged accuracy without it (1.4 % instead of under 1 %).
    static let smallTextHeight = (binary: 20.0, grey: 12.0)
    /// A page with fewer mid-tone pixels than this is binary (rendered Czech pages: 4–16 %; photos: most).
    static let binaryMidTones = 0.005
    /// Enlarging stops short of this many pixels: on a large page it would cost more than it gains.
    static let maxUpscaledPixels = 12_000_000

    public static func prepare(
        _ image: Image, options: PreprocessingOptions, engine: TesseractEngine
    ) throws -> PreparedImage {
        var prepared = PreparedImage(
            image: image, quarterTurns: 0, deskewDegrees: 0, inverted: false, binarized: false, scale: 1)
        // Inversion first: orientation detection and the skew search both expect dark ink.
        if options.invertDarkBackground, try prepared.image.darkFraction() > 0.5 {
            prepared.image = try prepared.image.inverted()
            prepared.inverted = true
        }
        // Enlarging comes before binarising: interpolating the photo's grey edges keeps the strokes and accents
        // that enlarging a binary image turns into stairs (rendered Czech: 1.92 % CER binarised first, see
        // Services/OCR/README.md).
        if options.upscaleSmallText, prepared.image.pixelCount * 4 <= maxUpscaledPixels,
            let height = try prepared.image.medianComponentHeight(),
            height
                < (try prepared.image.midToneFraction() < binaryMidTones
                    ? smallTextHeight.binary : smallTextHeight.grey)
        {
            prepared.image = try prepared.image.grayscale().scaled(by: 2)
            prepared.scale = 2
        }
        if options.binarize, prepared.image.depth > 1 {
            prepared.image = try prepared.image.adaptivelyBinarised()
            prepared.binarized = true
        }
        if options.detectOrientation, let estimate = try engine.detectOrientation(prepared.image),
            estimate.quarterTurnsToUpright != 0, estimate.confidence >= minimumOrientationConfidence
        {
            prepared.image = try prepared.image.rotated(quarterTurns: estimate.quarterTurnsToUpright)
            prepared.quarterTurns = estimate.quarterTurnsToUpright
        }
        if options.deskew, let skew = try prepared.image.skew(), abs(skew.degrees) >= minimumSkewDegrees,
            skew.confidence >= minimumSkewConfidence
        {
            // Leptonica's angle is the rotation that levels the lines (positive: clockwise).
            prepared.image = try prepared.image.rotated(degrees: skew.degrees)
            prepared.deskewDegrees = skew.degrees
        }
        return prepared
    }
}
