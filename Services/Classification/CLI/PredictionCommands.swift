import ArgumentParser
import ClassificationAPI
import Foundation
import GatewayKit
import RPC
import Schema

/// Photos the service decodes (RGBImage: PNG, JPEG, WebP, HEIF/HEIC), for shell completion and for the files
/// `dataset create --from` sends; ClassificationCore's DatasetBuilder.imageExtensions is the same list.
let photoExtensions = ["png", "jpg", "jpeg", "webp", "heic", "heif"]

/// One photo's answer, or why it has none (a file that cannot be read, a call the service refused).
enum PhotoAnswer<Response: ProtoJSONMessage & Sendable> {
    case answered(Response)
    case failed(any Error)

    /// Asks `call` about each of `photos` in turn; a failure is kept under the photo's name and the next one is
    /// asked, so one bad photo among many costs only its own answer.
    static func each(_ photos: [String], _ call: (String, [UInt8]) async throws -> Response) async -> [(
        String, PhotoAnswer
    )] {
        var answers: [(String, PhotoAnswer)] = []
        for photo in photos {
            do {
                try InputFile.check(photo)
                answers.append((photo, .answered(try await call(photo, try readFile(photo)))))
            } catch {
                answers.append((photo, .failed(error)))
            }
        }
        return answers
    }
}

/// The exit status, Connect code and message of a photo's failure, as the gateway prints a failed command's.
private func failureParts(_ error: any Error) -> (code: Int32, connectCode: String, message: String) {
    switch error {
    case let error as FileError: (error.exitCode, error.connectCode, error.description)
    case let error as RPCError: (GatewayExit.code(for: error), error.code.connectName, error.message)
    default: (GatewayExit.code(for: RPCError(.internalError, "\(error)")), "internal", "\(error)")
    }
}

/// Prints `answers` (`text` for an answered photo, under its name when there are several; a failed one as
/// `error: FILE: message` on standard error) or their JSON, and exits with the first failure's status. A single
/// photo that fails ends the command as any failed command does.
func renderPhotoAnswers<Response>(
    _ answers: [(String, PhotoAnswer<Response>)], global: GlobalOptions,
    text: (String, Response, Bool) -> Void
) throws {
    if answers.count == 1, case .failed(let error) = answers[0].1 { throw error }
    try global.render(
        jsonValue: {
            if answers.count == 1, case .answered(let response) = answers[0].1 { return response.outputJSON }
            return .array(
                answers.map { photo, answer in
                    switch answer {
                    case .answered(let response): return response.outputJSON
                    case .failed(let error):
                        let parts = failureParts(error)
                        return .object([
                            JSONMember("file", .string(photo)), JSONMember("code", .string(parts.connectCode)),
                            JSONMember("message", .string(parts.message)),
                        ])
                    }
                })
        },
        text: {
            for (photo, answer) in answers {
                switch answer {
                case .answered(let response): text(photo, response, answers.count > 1)
                case .failed(let error): writeStandardError("error: \(photo): \(failureParts(error).message)\n")
                }
            }
        })
    for (_, answer) in answers {
        if case .failed(let error) = answer { throw ExitCode(failureParts(error).code) }
    }
}

/// `--scaling`: how a photo is fitted to the model's square input.
enum ClassifyScaling: String, CaseIterable, ExpressibleByArgument {
    case fit, fill
    case centerCrop = "center-crop"
}

struct ClassifyImage: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "image",
        abstract: "Classify photos: the top labels with their confidences, and the catalogue entry of the best.",
        discussion: """
            --json prints protobuf's JSON mapping of the ClassifyResponse for one photo: {"model", "recognised", \
            "labels": [{"label", "confidence"}], "entry"}; for several, a JSON array with one ClassifyResponse per \
            photo, in the order given, and {"file", "code", "message"} in place of a photo that failed. With several \
            photos each is answered or its error printed under its name (standard error), and the command exits with \
            the status of the first that failed.
            """)

    @Argument(help: "PNG, JPEG, WebP or HEIC files.", completion: .file(extensions: photoExtensions)) var photos:
        [String]
    @Option(
        help: "The app to answer for: its classifier and catalogue (default: the only app; with several, name one).")
    var app: String?
    @Option(help: "A model by name instead of the app's (default: the app's).") var model: String?
    @Option(help: "How many labels (default 5).") var top: Int32?
    @Option(help: "How the photo fits the model's input (default: fit).") var scaling: ClassifyScaling?
    @Option(
        name: .customLong("min-confidence"),
        help: "Below this the answer is \"nothing recognised\" (default: the model's).") var minConfidence: Double?
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
        if photos.count == 1 { try InputFile.check(photos[0]) }  // one photo: no connection for a missing file
        try await global.withClassification { client in
            let answers = await PhotoAnswer.each(photos) { _, image in
                var request = ClassificationV1.ClassifyRequest()
                request.image = image
                request.model = model ?? ""
                request.app = app ?? ""
                request.top = top
                request.minimumConfidence = minConfidence
                request.scaling = scalingValue
                return try await client.classify(request, options: global.callOptions)
            }
            try renderPhotoAnswers(answers, global: global, text: Self.text)
        }
    }

    static func text(_ file: String, _ r: ClassificationV1.ClassifyResponse, named: Bool) {
        if named { print("\(file):") }
        if !r.recognised { print("nothing recognised") }
        for label in r.labels { print("\(Int((label.confidence * 100).rounded()))% \(label.label)") }
        if let entry = r.entry {
            let local = entry.localName.isEmpty || entry.localName == entry.name ? "" : " (\(entry.localName))"
            print("  \(entry.name)\(local)")
        }
    }
}

struct Detect: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "detect", abstract: "Detect objects in photos: labelled boxes.",
        discussion: """
            --json prints protobuf's JSON mapping of the DetectResponse for one photo: {"model", "detections": \
            [{"label", "confidence", "box", "boxPx"}], "imageWidth", "imageHeight"} (box in fractions of the image, \
            boxPx in pixels); for several, a JSON array with one DetectResponse per photo, in the order given, and \
            {"file", "code", "message"} in place of a photo that failed (which is also named on standard error; the \
            command exits with the status of the first that failed).

            --stream DIR sends DIR's PNG and JPEG files as the frames of a video, in name order; --stream - reads an \
            MJPEG stream (JPEGs one after another, e.g. `ffmpeg -i cam -f mjpeg -`) from standard input. Each answer \
            is a JSON line, a DetectStreamResponse: {"frame", "result": DetectResponse, "dropped", "droppedTotal", \
            "serverMs", "error"}. Frames come as fast as they are read (or at --fps); when they come faster than the \
            model runs, the service answers the newest and drops the stale ones (counted in "dropped"). On a \
            terminal the frames per second are shown on standard error.
            """)

    @Argument(help: "PNG, JPEG, WebP or HEIC files.", completion: .file(extensions: photoExtensions)) var photos:
        [String] = []
    @Option(help: "The app to answer for: its detector (default: the only app with one; with several, name one).")
    var app: String?
    @Option(help: "A model by name instead of the app's (default: the app's).") var model: String?
    @Option(help: "Only this label (repeatable; default: every label).") var only: [String] = []
    @Option(
        help:
            "Confidence threshold (default: the detector's own, calibrated on its training's held-out images, as `model show` prints it; else 0.25)."
    ) var confidence: Double?
    @Option(help: "NMS IoU threshold (default 0.45).") var iou: Double?
    @Option(name: .customLong("max"), help: "Most detections (default 100).") var maximum: Int32?
    @Option(
        help:
            "Frames from a directory (name order) or - for MJPEG on standard input, answered as JSON lines (default: the photos given).",
        completion: .directory) var stream: String?
    @Option(help: "With --stream: send at most this many frames per second (default: as fast as they are read).")
    var fps: Double?
    @OptionGroup var global: GlobalOptions

    func validate() throws {
        if stream == nil, photos.isEmpty { throw ValidationError("give at least one photo, or --stream DIR|-") }
        if stream != nil, !photos.isEmpty { throw ValidationError("give photos or --stream, not both") }
        if let fps, !(fps.isFinite && fps > 0 && fps <= 1000) {
            throw InvalidValue("--fps must be above 0 and at most 1000 (got \(fps))")
        }
        if fps != nil, stream == nil { throw ValidationError("--fps paces --stream; give --stream DIR|-") }
    }

    func run() async throws {
        if let stream {
            let source = try DetectStreaming.Source(stream)
            var template = ClassificationV1.DetectRequest()
            template.model = model ?? ""
            template.app = app ?? ""
            template.labels = only
            template.confidenceThreshold = confidence
            template.iouThreshold = iou
            template.maxDetections = maximum
            try await global.withClassification { client in
                try await DetectStreaming.run(
                    client: client, source: source, template: template, fps: fps, options: global.streamCallOptions)
            }
            return
        }
        if photos.count == 1 { try InputFile.check(photos[0]) }  // one photo: no connection for a missing file
        try await global.withClassification { client in
            let answers = await PhotoAnswer.each(photos) { _, image in
                var request = ClassificationV1.DetectRequest()
                request.image = image
                request.model = model ?? ""
                request.app = app ?? ""
                request.labels = only
                request.confidenceThreshold = confidence
                request.iouThreshold = iou
                request.maxDetections = maximum
                return try await client.detect(request, options: global.callOptions)
            }
            try renderPhotoAnswers(answers, global: global, text: Self.text)
        }
    }

    static func text(_ file: String, _ r: ClassificationV1.DetectResponse, named: Bool) {
        if named { print("\(file):") }
        if r.detections.isEmpty { print("nothing detected") }
        for d in r.detections {
            let b = d.boxPx ?? ClassificationV1.Box()
            let percent = Int((d.confidence * 100).rounded())
            print(
                "\(percent)% \(d.label) at \(Int(b.x.rounded())),\(Int(b.y.rounded())) \(Int(b.width.rounded()))×\(Int(b.height.rounded()))"
            )
        }
    }
}
