import Foundation
import TextRecognition

/// A picture of what was recognised, as the seed app's preview drew it: the photo (its first page, turned
/// upright as the boxes are) with every word's box and, for a template, each value's box captioned
/// `name: text` — green when certain, red when uncertain. Encoded as PNG, the photo's size.
public enum Annotator {
    static let wordColor = AnnotationMark.RGB(40, 110, 255)
    static let valueColor = AnnotationMark.RGB(0, 170, 60)
    static let uncertainColor = AnnotationMark.RGB(230, 30, 30)
    /// An annotated PNG over this is halved (the response's frame is at most 16 MiB).
    static let maxBytes = 12 << 20

    public static func annotate(
        _ data: Data, result: RecognitionResult, values: [(value: RecordValue, observation: Observation?)] = [],
        decoder: ImageDecoder
    ) throws -> Data {
        do {
            guard var image = try decoder.decode(data).pages.first else {
                throw OCRError.invalid("the image has no pages")
            }
            let turns = (result.pages.first?.orientationDegrees ?? 0) / 90
            if turns != 0 { image = try image.rotated(quarterTurns: turns) }
            var marks = result.observations.filter { $0.level == .word && $0.page == 0 }.map {
                AnnotationMark(box: $0.box, color: wordColor)
            }
            for (value, observation) in values {
                guard let observation, observation.page == 0 else { continue }
                marks.append(
                    AnnotationMark(
                        box: observation.box, color: value.isUncertain ? uncertainColor : valueColor, width: 3,
                        caption: "\(value.name): \(value.text)\(value.isUncertain ? " (?)" : "")"))
            }
            var annotated = try image.annotated(marks)
            var png = try annotated.encoded(as: .png)
            // A response is one frame: a huge photo's RGB copy is halved until it fits comfortably.
            while png.count > maxBytes, annotated.width > 64 {
                annotated = try annotated.scaled(by: 0.5)
                png = try annotated.encoded(as: .png)
            }
            return png
        } catch {
            throw OCRError.mapping(error)
        }
    }
}
