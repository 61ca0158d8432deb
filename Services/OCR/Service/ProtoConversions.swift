import Foundation
import OCRAPI
import OCRCore
import RPC
import Schema
import TextRecognition

extension OcrV1.NormalizedBox {
    init(_ rect: NormalizedRect) { self.init(x: rect.x, y: rect.y, width: rect.width, height: rect.height) }
}

extension NormalizedRect {
    init(_ box: OcrV1.NormalizedBox) { self.init(x: box.x, y: box.y, width: box.width, height: box.height) }
}

extension OcrV1.PixelBox {
    init(_ rect: PixelRect) {
        self.init(
            x: Int32(clamping: rect.x), y: Int32(clamping: rect.y), width: Int32(clamping: rect.width),
            height: Int32(clamping: rect.height))
    }
}

extension OcrV1.RecognitionEngine {
    init(_ engine: RecognitionEngine) {
        switch engine {
        case .tesseract: self = .tesseract
        case .ppocr: self = .ppocr
        }
    }
}

extension OcrV1.ObservationLevel {
    init(_ level: ObservationLevel) {
        switch level {
        case .block: self = .block
        case .line: self = .line
        case .word: self = .word
        }
    }

    /// The domain level; unspecified means a word (the default of a value definition).
    var domain: ObservationLevel? {
        switch self {
        case .block: .block
        case .line: .line
        case .word, .unspecified: .word
        case .unrecognized: nil
        }
    }
}

extension OcrV1.ValueDefinition {
    init(_ value: ValueDefinition) {
        self.init(
            name: value.name, region: OcrV1.NormalizedBox(value.region), level: OcrV1.ObservationLevel(value.level),
            shape: value.shape, label: value.label)
    }
}

extension OcrV1.Template {
    init(_ template: Template) {
        self.init(
            id: template.id, name: template.name, description: template.description,
            createdAt: template.createdAt.timeIntervalSince1970, values: template.values.map(OcrV1.ValueDefinition.init)
        )
    }
}

extension OcrV1.RecordValue {
    init(_ value: RecordValue) {
        self.init(
            name: value.name, text: value.text, confidence: value.confidence, uncertainty: value.uncertainty,
            rawText: value.raw, unit: value.unit)
    }
}

extension RecordValue {
    init(_ value: OcrV1.RecordValue) {
        self.init(
            name: value.name, text: value.text, confidence: value.confidence, uncertainty: value.uncertainty,
            raw: value.rawText, unit: value.unit)
    }
}

extension OcrV1.Record {
    init(_ record: Record) {
        self.init(
            id: record.id, templateID: record.templateID, createdAt: record.createdAt.timeIntervalSince1970,
            values: record.values.map(OcrV1.RecordValue.init), dateSource: OcrV1.DateSource(record.dateSource))
    }
}

extension OcrV1.DateSource {
    init(_ source: DateSource) {
        switch source {
        case .given: self = .given
        case .exif: self = .exif
        case .upload: self = .upload
        }
    }
}

extension OcrV1.Observation {
    /// With `neighbourhood`, the shape and label a template value picked here would learn.
    init(_ observation: Observation, neighbourhood: ValueNeighbourhood? = nil) {
        self.init(
            level: OcrV1.ObservationLevel(observation.level), text: observation.text,
            confidence: observation.confidence, box: OcrV1.NormalizedBox(observation.normalizedBox),
            boxPx: OcrV1.PixelBox(observation.box), page: UInt32(observation.page),
            shape: neighbourhood?.shape ?? "", label: neighbourhood?.label ?? "",
            engine: OcrV1.RecognitionEngine(observation.engine), doubt: observation.doubt ?? "")
    }

    /// Observations learn their neighbourhood on photos of up to this many observations (a display, a label): on a
    /// page every word against every other would cost more than it tells.
    static let maxObservationsWithNeighbourhood = 1000

    static func list(_ observations: [Observation]) -> [OcrV1.Observation] {
        guard observations.count <= maxObservationsWithNeighbourhood else { return observations.map { Self($0) } }
        return observations.map { observation in
            observation.level == .block
                ? Self(observation)
                : Self(observation, neighbourhood: ValueNeighbourhood(of: observation, among: observations))
        }
    }
}

extension OcrV1.Segmentation {
    init(_ segmentation: SegmentationMode) {
        switch segmentation {
        case .page: self = .page
        case .block: self = .block
        case .line: self = .line
        case .sparse: self = .sparse
        }
    }
}

extension OcrV1.ScanResponse {
    init(_ result: RecognitionResult) {
        self.init(
            text: result.text, observations: OcrV1.Observation.list(result.observations),
            pages: result.pages.map {
                OcrV1.Page(
                    width: UInt32($0.width), height: UInt32($0.height),
                    orientationDegrees: UInt32($0.orientationDegrees),
                    deskewDegrees: $0.deskewDegrees, inverted: $0.inverted, text: $0.text,
                    segmentation: OcrV1.Segmentation($0.segmentation), prepared: $0.prepared,
                    cutShort: $0.cutShort)
            },
            orientationDegrees: UInt32(result.orientationDegrees),
            timings: OcrV1.Timings(
                decodeSeconds: result.timings.decode, preprocessSeconds: result.timings.preprocess,
                recognizeSeconds: result.timings.recognize, totalSeconds: result.timings.total))
    }
}
