import Storage
import TextRecognition

/// A failure of the ocr domain with the status category a caller sees. The Service layer maps `code` onto RPC
/// status codes (Core does not import RPC); messages are written for the user who sent the request.
public struct OCRError: Error, Equatable, Sendable, CustomStringConvertible {
    public enum Code: String, Sendable {
        case invalidArgument = "INVALID_ARGUMENT"
        case notFound = "NOT_FOUND"
        case alreadyExists = "ALREADY_EXISTS"
        case resourceExhausted = "RESOURCE_EXHAUSTED"
        case failedPrecondition = "FAILED_PRECONDITION"
        case `internal` = "INTERNAL"
    }

    public let code: Code
    public let message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "\(code.rawValue): \(message)" }

    static func invalid(_ message: String) -> OCRError { OCRError(.invalidArgument, message) }

    /// No text on the image: the user should take another photo.
    static let noText = OCRError(
        .notFound, "no text found in the image; try a sharper photo taken closer, straight on and in even light")

    /// The category of a wrapper error (undecodable bytes, too many pixels, a missing language).
    init(_ error: ImageError) {
        switch error {
        case .cannotDecode: self.init(.invalidArgument, "cannot decode image")
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
    /// (ServiceKit maps storage's busy and locked once for every service).
    static func mapping(_ error: any Error) -> any Error {
        switch error {
        case let error as ImageError: OCRError(error)
        case let error as EngineError: OCRError(error)
        default: error
        }
    }
}
