import Base
import Storage
import TextRecognition

/// A failure of the ocr domain: its category (the status a caller gets) and a message written for the user who
/// sent the request. The same shape as every service's domain error.
public struct OCRError: CategorizedError, Equatable, CustomStringConvertible {
    public let category: ErrorCategory
    public let message: String

    public init(_ category: ErrorCategory, _ message: String) {
        self.category = category
        self.message = message
    }

    static func invalid(_ message: String) -> OCRError { OCRError(.invalidArgument, message) }

    /// No text on the image: the user should take another photo.
    static let noText = OCRError(
        .notFound, "no text found in the image; try a sharper photo taken closer, straight on and in even light")

    /// The category of a wrapper error (undecodable bytes, too many pixels, a missing language).
    public init(_ error: ImageError) {
        switch error {
        case .cannotDecode: self.init(.invalidArgument, "cannot decode image")
        case .damaged: self.init(.invalidArgument, error.description)
        case .tooManyPixels, .tooManyPages: self.init(.resourceExhausted, error.description)
        case .processing: self.init(.internal, error.description)
        }
    }

    init(_ error: EngineError) {
        switch error {
        case .languageUnavailable: self.init(.invalidArgument, error.description)
        case .tesseract: self.init(.internal, error.description)
        }
    }

    /// `error` as an OCRError when it is one of the wrapper's; StorageError and others pass through unchanged
    /// (they carry their own category).
    static func mapping(_ error: any Error) -> any Error {
        switch error {
        case let error as ImageError: OCRError(error)
        case let error as EngineError: OCRError(error)
        default: error
        }
    }
}
