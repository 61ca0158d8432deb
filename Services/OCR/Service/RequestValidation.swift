import Foundation
import OCRAPI
import OCRCore
import RPC
import Schema
import TextRecognition

/// Requests checked and turned into domain values; anything malformed is INVALID_ARGUMENT naming the field.
enum RequestValidation {
    static func templateReference(_ reference: String) throws -> String {
        guard !reference.isEmpty else { throw RPCError(.invalidArgument, "template: name or id required") }
        return reference
    }

    /// A record's date and where it came from: created_at (GIVEN unless EXIF is said) or, unset, now (UPLOAD).
    /// The range (1970 to a day from now) is checked by the store.
    static func recordDate(_ seconds: Double?, source: OcrV1.DateSource) throws -> (date: Date, source: DateSource) {
        guard let seconds else {
            switch source {
            case .unspecified, .upload: return (Date(), .upload)
            default: throw RPCError(.invalidArgument, "date_source GIVEN or EXIF needs created_at")
            }
        }
        guard seconds.isFinite else { throw RPCError(.invalidArgument, "created_at must be a Unix time") }
        let date = Date(timeIntervalSince1970: seconds)
        switch source {
        case .unspecified, .given: return (date, .given)
        case .exif: return (date, .exif)
        case .upload:
            throw RPCError(.invalidArgument, "date_source UPLOAD takes no created_at (the server's clock dates it)")
        case .unrecognized(let value): throw RPCError(.invalidArgument, "date_source \(value) is not known")
        }
    }

    static func values(_ values: [OcrV1.ValueDefinition]) throws -> [ValueDefinition] {
        try values.enumerated().map { index, value in
            guard let region = value.region else {
                throw RPCError(.invalidArgument, "values[\(index)].region is required")
            }
            guard let level = value.level.domain else {
                throw RPCError(.invalidArgument, "values[\(index)].level is not a known level")
            }
            return ValueDefinition(
                name: value.name, region: NormalizedRect(region), level: level, shape: value.shape, label: value.label)
        }
    }

    /// Scan options with the defaults of empty fields (ces+eng, accurate, segmentation chosen per image).
    static func options(_ options: OcrV1.ScanOptions?) throws -> RecognitionOptions {
        let options = options ?? OcrV1.ScanOptions()
        let level: RecognitionLevel =
            switch options.level {
            case .fast: .fast
            case .accurate, .unspecified: .accurate
            case .unrecognized(let value): throw RPCError(.invalidArgument, "options.level \(value) is not known")
            }
        let segmentation: SegmentationMode? =
            switch options.segmentation {
            case .unspecified: nil
            case .page: .page
            case .block: .block
            case .line: .line
            case .sparse: .sparse
            case .unrecognized(let value):
                throw RPCError(.invalidArgument, "options.segmentation \(value) is not known")
            }
        return RecognitionOptions(
            languages: options.languages.isEmpty ? RecognitionOptions.defaultLanguages : options.languages,
            level: level,
            customWords: options.customWords, minimumTextHeight: options.minimumTextHeight, segmentation: segmentation)
    }
}
