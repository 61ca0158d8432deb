import Base
import Foundation
import TLS

/// Why the PP-OCR models could not be used: absent, damaged, or refused by OpenCV. The OCR service then reads with
/// Tesseract alone.
public struct PPOCRError: CategorizedError, CustomStringConvertible {
    public let category: ErrorCategory
    public let message: String

    public init(_ category: ErrorCategory, _ message: String) {
        self.category = category
        self.message = message
    }
}

/// The PP-OCR networks as compose installs them (`compose/compose ppocr`, Services/OCR/tools/make_ppocr.py): a
/// folder with `ppocr.json` naming each file and its SHA-256, which are checked here, once per process.
public struct PPOCRModels: Sendable {
    public static let manifestName = "ppocr.json"
    public static let installHint = "install it with compose/compose ppocr"

    /// Detection network for pictures at least as wide as high (input 1 × 3 × 736 × 992) and for portrait ones.
    public let landscapeDetector: [UInt8]
    public let portraitDetector: [UInt8]
    /// Recognition network (input 1 × 3 × 48 × 320, output 1 × 40 × (characters + 2)).
    public let recognizer: [UInt8]
    /// The recognition network's characters (class i + 1), with Czech diacritics among them.
    public let characters: [String]

    static let files = ["det-landscape.onnx", "det-portrait.onnx", "rec.onnx", "characters.txt"]

    /// Reads and checks the folder: FAILED_PRECONDITION when it holds no manifest, DATA_LOSS when a file is missing
    /// or not the one the manifest names.
    public static func load(directory: String) throws -> PPOCRModels {
        let folder = URL(fileURLWithPath: directory)
        guard let manifestData = FileManager.default.contents(atPath: folder.appendingPathComponent(manifestName).path)
        else {
            throw PPOCRError(
                .failedPrecondition, "PP-OCR is not installed in \(directory) (no \(manifestName)); \(installHint)")
        }
        struct Manifest: Decodable { var files: [String: String] }
        let manifest: Manifest
        do { manifest = try JSONDecoder().decode(Manifest.self, from: manifestData) } catch {
            throw PPOCRError(.dataLoss, "\(directory)/\(manifestName) is not a PP-OCR manifest; \(installHint)")
        }
        var contents: [String: [UInt8]] = [:]
        for name in files {
            guard let expected = manifest.files[name] else {
                throw PPOCRError(.dataLoss, "\(directory)/\(manifestName) names no \(name); \(installHint)")
            }
            guard let data = FileManager.default.contents(atPath: folder.appendingPathComponent(name).path) else {
                throw PPOCRError(.dataLoss, "\(directory)/\(name) is missing; \(installHint)")
            }
            let bytes = [UInt8](data)
            guard SHA256.hex(bytes) == expected else {
                throw PPOCRError(.dataLoss, "\(directory)/\(name) does not match its checksum; \(installHint)")
            }
            contents[name] = bytes
        }
        let characters = String(decoding: contents["characters.txt"]!, as: UTF8.self)
            .split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        return PPOCRModels(
            landscapeDetector: contents["det-landscape.onnx"]!, portraitDetector: contents["det-portrait.onnx"]!,
            recognizer: contents["rec.onnx"]!,
            characters: characters.last == "" ? Array(characters.dropLast()) : characters)
    }
}
