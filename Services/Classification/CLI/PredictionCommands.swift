import ArgumentParser
import ClassificationAPI
import Foundation
import GatewayKit
import RPC
import Schema

/// Photos the service decodes, for shell completion.
let photoExtensions = ["png", "jpg", "jpeg"]

/// `--scaling`: how a photo is fitted to the model's square input.
enum ClassifyScaling: String, CaseIterable, ExpressibleByArgument {
    case fit, fill
    case centerCrop = "center-crop"
}

struct ClassifyImage: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "image", abstract: "Classify photos: the top labels with their confidences, and the catalogue entry of the best.",
        discussion: """
            --json prints protobuf's JSON mapping of the ClassifyResponse for one photo: {"model", "recognised", \
            "labels": [{"label", "confidence"}], "entry"}; for several, a JSON array with one ClassifyResponse per \
            photo, in the order given.
            """)

    @Argument(help: "PNG or JPEG files.", completion: .file(extensions: photoExtensions)) var photos: [String]
    @Option(help: "The model (default: the active classifier).") var model: String?
    @Option(help: "How many labels (default 5).") var top: Int32?
    @Option(help: "How the photo fits the model's input (default: fit).") var scaling: ClassifyScaling?
    @Option(name: .customLong("min-confidence"), help: "Below this the answer is \"nothing recognised\" (default: the model's).") var minConfidence: Double?
    @OptionGroup var global: GlobalOptions

    func validate() throws {
        if photos.isEmpty { throw ValidationError("give at least one photo") }
    }

    var scalingValue: ClassificationV1.Scaling {
        switch scaling {
        case .fill: .fill
        case .centerCrop: .centerCrop
        case .fit: .fit
        case nil: .unspecified
        }
    }

    func run() async throws {
        for photo in photos { try InputFile.check(photo) }
        try await global.withClassification { client in
            var answers: [(String, ClassificationV1.ClassifyResponse)] = []
            for photo in photos {
                var request = ClassificationV1.ClassifyRequest()
                request.image = try readFile(photo)
                request.model = model ?? ""
                request.top = top
                request.minimumConfidence = minConfidence
                request.scaling = scalingValue
                let answer = try await client.classify(request, options: global.callOptions)
                answers.append((photo, answer))
            }
            try global.render(jsonValue: { answersJSON(answers.map(\.1)) }, text: { Self.text(answers) })
        }
    }

    static func text(_ answers: [(String, ClassificationV1.ClassifyResponse)]) {
        for (file, r) in answers {
            if answers.count > 1 { print("\(file):") }
            if !r.recognised { print("nothing recognised") }
            for label in r.labels { print("\(Int((label.confidence * 100).rounded()))% \(label.label)") }
            if let entry = r.entry {
                let local = entry.localName.isEmpty || entry.localName == entry.name ? "" : " (\(entry.localName))"
                print("  \(entry.name)\(local)")
            }
        }
    }
}

struct Detect: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "detect", abstract: "Detect objects in photos: labelled boxes.",
        discussion: """
            --json prints protobuf's JSON mapping of the DetectResponse for one photo: {"model", "detections": \
            [{"label", "confidence", "box", "boxPx"}], "imageWidth", "imageHeight"} (box in fractions of the image, \
            boxPx in pixels); for several, a JSON array with one DetectResponse per photo, in the order given.

            --stream DIR sends DIR's PNG and JPEG files as the frames of a video, in name order; --stream - reads an \
            MJPEG stream (JPEGs one after another, e.g. `ffmpeg -i cam -f mjpeg -`) from standard input. Each answer \
            is a JSON line, a DetectStreamResponse: {"frame", "result": DetectResponse, "dropped", "droppedTotal", \
            "serverMs", "error"}. Frames come as fast as they are read (or at --fps); when they come faster than the \
            model runs, the service answers the newest and drops the stale ones (counted in "dropped"). On a \
            terminal the frames per second are shown on standard error.
            """)

    @Argument(help: "PNG or JPEG files.", completion: .file(extensions: photoExtensions)) var photos: [String] = []
    @Option(help: "The model (default: the active detector).") var model: String?
    @Option(help: "Only this label (repeatable; default: every label).") var only: [String] = []
    @Option(help: "Confidence threshold (default 0.25).") var confidence: Double?
    @Option(help: "NMS IoU threshold (default 0.45).") var iou: Double?
    @Option(name: .customLong("max"), help: "Most detections (default 100).") var maximum: Int32?
    @Option(help: "Frames from a directory (name order) or - for MJPEG on standard input, answered as JSON lines (default: the photos given).",
            completion: .directory) var stream: String?
    @Option(help: "With --stream: send at most this many frames per second (default: as fast as they are read).") var fps: Double?
    @OptionGroup var global: GlobalOptions

    func validate() throws {
        if stream == nil, photos.isEmpty { throw ValidationError("give at least one photo, or --stream DIR|-") }
        if stream != nil, !photos.isEmpty { throw ValidationError("give photos or --stream, not both") }
        if let fps, !(fps.isFinite && fps > 0 && fps <= 1000) { throw InvalidValue("--fps must be above 0 and at most 1000 (got \(fps))") }
        if fps != nil, stream == nil { throw ValidationError("--fps paces --stream; give --stream DIR|-") }
    }

    func run() async throws {
        if let stream {
            let source = try DetectStreaming.Source(stream)
            var template = ClassificationV1.DetectRequest()
            template.model = model ?? ""
            template.labels = only
            template.confidenceThreshold = confidence
            template.iouThreshold = iou
            template.maxDetections = maximum
            try await global.withClassification { client in
                try await DetectStreaming.run(client: client, source: source, template: template, fps: fps, options: global.streamCallOptions)
            }
            return
        }
        for photo in photos { try InputFile.check(photo) }
        try await global.withClassification { client in
            var answers: [(String, ClassificationV1.DetectResponse)] = []
            for photo in photos {
                var request = ClassificationV1.DetectRequest()
                request.image = try readFile(photo)
                request.model = model ?? ""
                request.labels = only
                request.confidenceThreshold = confidence
                request.iouThreshold = iou
                request.maxDetections = maximum
                let answer = try await client.detect(request, options: global.callOptions)
                answers.append((photo, answer))
            }
            try global.render(jsonValue: { answersJSON(answers.map(\.1)) }, text: { Self.text(answers) })
        }
    }

    static func text(_ answers: [(String, ClassificationV1.DetectResponse)]) {
        for (file, r) in answers {
            if answers.count > 1 { print("\(file):") }
            if r.detections.isEmpty { print("nothing detected") }
            for d in r.detections {
                let b = d.boxPx ?? ClassificationV1.Box()
                let percent = Int((d.confidence * 100).rounded())
                print("\(percent)% \(d.label) at \(Int(b.x.rounded())),\(Int(b.y.rounded())) \(Int(b.width.rounded()))×\(Int(b.height.rounded()))")
            }
        }
    }
}

/// What `--json` prints for the answers of `image` and `detect`: the one photo's response, or for several a
/// JSON array of them in the order the photos were given (the responses do not name their photo).
func answersJSON(_ answers: [some ProtoJSONMessage]) -> JSONValue {
    answers.count == 1 ? answers[0].outputJSON : .array(answers.map(\.outputJSON))
}
