import ClassificationAPI
import ClassificationCore
import Foundation
import RPC
import TestSupport
import Testing
import Torch

/// Dataset uploads check each image as it arrives: a bad one ends the upload at once, naming it, or under
/// `skip_bad` is left out and named in the summary; files that are no image by name are named, never dropped silently.
@Suite struct UploadCheckTests {
    static func header(_ name: String, skipBad: Bool = false) -> ClassificationV1.UploadDatasetRequest {
        var header = ClassificationV1.DatasetUploadHeader()
        header.name = name
        header.kind = .classification
        header.skipBad = skipBad
        return ClassificationV1.UploadDatasetRequest(header: header, chunk: nil)
    }

    static func file(_ path: String, _ bytes: [UInt8]) -> ClassificationV1.UploadDatasetRequest {
        ClassificationV1.UploadDatasetRequest(
            header: nil, chunk: ClassificationV1.FileChunk(path: path, data: bytes, last: true))
    }

    /// A JPEG of a noisy picture (so it is tens of kilobytes) cut to a tenth of its length.
    static func truncatedJPEG() throws -> [UInt8] {
        var random = SystemRandomNumberGenerator()
        let image = RGBImage(
            width: 200, height: 150, pixels: (0..<200 * 150 * 3).map { _ in UInt8.random(in: 0...255, using: &random) })
        let jpeg = try image.jpeg(quality: 90)
        return Array(jpeg.prefix(jpeg.count / 10))
    }

    /// The upload fails while the client still has files to send: the call ends with the bad file's name long
    /// before the client would have finished (it waits a minute after the bad file, and is cancelled instead).
    @Test func aBadImageEndsTheUploadAsItArrives() async throws {
        let service = try ClassificationServiceTests()
        let started = ContinuousClock.now
        let (code, message) = await ClassificationServiceTests.failure {
            _ = try await service.client.uploadDataset { writer in
                try await writer.send(Self.header("cut"))
                try await writer.send(Self.file("red/a.jpg", try ClassificationServiceTests.photo((200, 0, 0))))
                try await writer.send(Self.file("red/cut.jpg", try Self.truncatedJPEG()))
                try await Task.sleep(for: TestTime.scaled(.seconds(60)))  // the other 19,998 files
            }
        }
        #expect(code == .invalidArgument, "\(message)")
        #expect(message.contains("red/cut.jpg") && message.contains("truncated"), "\(message)")
        #expect(
            ContinuousClock.now - started < TestTime.scaled(.seconds(30)),
            "the refusal came only after the stream ended")
        #expect(try service.store.datasets().isEmpty)
    }

    @Test func skipBadLeavesBadImagesOutAndNamesThem() async throws {
        let service = try ClassificationServiceTests()
        let summary = try await service.client.uploadDataset { writer in
            try await writer.send(Self.header("phones", skipBad: true))
            try await writer.send(Self.file("red/a.jpg", try ClassificationServiceTests.photo((200, 0, 0))))
            try await writer.send(
                Self.file(
                    "red/b.heic",
                    try RGBImage(width: 32, height: 32, pixels: [UInt8](repeating: 190, count: 32 * 32 * 3)).heic()))
            try await writer.send(Self.file("red/cut.jpg", try Self.truncatedJPEG()))
            try await writer.send(
                Self.file(
                    "blue/a.webp",
                    try RGBImage(width: 16, height: 16, pixels: (0..<256).flatMap { _ in [0, 0, 200] as [UInt8] })
                        .webp()))
            try await writer.send(Self.file("blue/b.jpg", try ClassificationServiceTests.photo((0, 0, 180))))
            try await writer.send(Self.file("blue/notes.txt", Array("taken at noon".utf8)))
            try await writer.send(Self.file("blue/.DS_Store", [0, 1, 2]))
        }
        #expect(summary.images == 4, "\(summary)")
        #expect(summary.skipped.map(\.path) == ["red/cut.jpg", "blue/notes.txt"], "\(summary.skipped)")
        #expect(summary.skipped.first?.reason.contains("truncated") == true, "\(summary.skipped)")
        #expect(summary.skipped.last?.reason.contains("not an image") == true, "\(summary.skipped)")

        // Without --skip-bad the same files are refused, naming the bad one.
        let (code, message) = await ClassificationServiceTests.failure {
            _ = try await service.client.uploadDataset { writer in
                try await writer.send(Self.header("refused"))
                try await writer.send(Self.file("red/cut.jpg", try Self.truncatedJPEG()))
            }
        }
        #expect(code == .invalidArgument && message.contains("red/cut.jpg"), "\(message)")
    }

    /// Feedback takes a phone's HEIC like any photo, and refuses a cut JPEG naming the problem.
    @Test func feedbackTakesHEICAndRefusesACutJPEG() async throws {
        let service = try ClassificationServiceTests()
        // Feedback names a label some classifier knows.
        let module = try ScriptModule.compile(source: ClassificationServiceTests.pickyModule)
        _ = try await service.client.importModel { writer in
            try await writer.send(
                ClassificationV1.ImportModelRequest(
                    name: "colours", format: .torchscript, data: module, kind: .classifier,
                    labels: ["red", "green", "blue"],
                    inputWidth: 8, inputHeight: 8))
        }
        let heic = try RGBImage(width: 24, height: 24, pixels: (0..<576).flatMap { _ in [0, 0, 200] as [UInt8] }).heic()
        let stored = try await service.client.feedback(
            ClassificationV1.FeedbackRequest(image: heic, label: "blue", consent: true))
        #expect(stored.stored)
        let (code, message) = await ClassificationServiceTests.failure {
            _ = try await service.client.feedback(
                ClassificationV1.FeedbackRequest(image: try Self.truncatedJPEG(), label: "blue", consent: true))
        }
        #expect(code == .invalidArgument && message.contains("truncated"), "\(message)")
    }
}

/// The upload header's annotation format: checked with the kind before any file is read, and a YOLO upload's text
/// files kept for its parser rather than decoded as images.
@Suite struct UploadAnnotationFormatTests {
    static func header(
        _ kind: ClassificationV1.DatasetKind, _ format: ClassificationV1.AnnotationFormat,
        annotations: String = "", skipBad: Bool = false
    ) -> ClassificationV1.UploadDatasetRequest {
        var header = ClassificationV1.DatasetUploadHeader()
        header.name = "scenes"
        header.kind = kind
        header.annotationFormat = format
        header.annotations = Array(annotations.utf8)
        header.skipBad = skipBad
        return ClassificationV1.UploadDatasetRequest(header: header, chunk: nil)
    }

    @Test func theFormatMustFitTheKindAndWhatWasSent() async throws {
        let service = try ClassificationServiceTests()
        let refusals: [(ClassificationV1.UploadDatasetRequest, String)] = [
            (
                Self.header(.classification, .yolo),
                "header.annotation_format: a classification dataset is Create ML's folder layout"
            ),
            (
                Self.header(.detection, .yolo, annotations: "[]"),
                "header.annotations: YOLO's labels and class names are files of the upload"
            ),
            (Self.header(.detection, .coco), "header.annotations: a detection dataset in COCO's format needs its JSON"),
            (
                Self.header(.detection, .createml),
                "header.annotations: a detection dataset in Create ML's format needs its JSON"
            ),
            (
                Self.header(.detection, .unrecognized(9), annotations: "[]"),
                "header.annotation_format: 9 is no format this server knows"
            ),
        ]
        for (header, expected) in refusals {
            let (code, message) = await ClassificationServiceTests.failure {
                _ = try await service.client.uploadDataset { writer in try await writer.send(header) }
            }
            #expect(code == .invalidArgument && message.contains(expected), "\(message)")
        }
    }

    /// YOLO's files through the RPC, the format unspecified (no JSON: YOLO's): a bad image under skip_bad is left out
    /// with its label file, a stray file is named, and the rest makes the dataset.
    @Test func aYOLOUploadKeepsItsTextFilesAndSkipsABadImageWithItsLabels() async throws {
        let service = try ClassificationServiceTests()
        @Sendable func file(_ path: String, _ bytes: [UInt8]) -> ClassificationV1.UploadDatasetRequest {
            UploadCheckTests.file(path, bytes)
        }
        let summary = try await service.client.uploadDataset { writer in
            try await writer.send(Self.header(.detection, .unspecified, skipBad: true))
            try await writer.send(file("data.yaml", Array("names:\n  0: dot\n".utf8)))
            for name in ["a", "b"] {
                try await writer.send(
                    file("images/\(name).jpg", try ClassificationServiceTests.photo((200, 0, 0), side: 32)))
                try await writer.send(file("labels/\(name).txt", Array("0 0.5 0.5 0.25 0.25\n".utf8)))
            }
            try await writer.send(file("images/cut.jpg", try UploadCheckTests.truncatedJPEG()))
            try await writer.send(file("labels/cut.txt", Array("0 0.5 0.5 0.25 0.25\n".utf8)))
            try await writer.send(file("notes.md", Array("scenes from the zoo".utf8)))
        }
        #expect(summary.kind == .detection && summary.images == 2, "\(summary)")
        #expect(summary.labels.map { "\($0.label) \($0.images) \($0.objects)" } == ["dot 2 2"], "\(summary.labels)")
        #expect(summary.skipped.map(\.path) == ["images/cut.jpg", "notes.md"], "\(summary.skipped)")
    }
}
