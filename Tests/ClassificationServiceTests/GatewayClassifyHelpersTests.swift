import ClassificationAPI
import ClassificationCore
import Foundation
import Testing

@testable import ClassificationCLI

/// The gateway's pieces of issue 26 that need no service: cutting an MJPEG stream into frames for `detect --stream -`
/// and drawing `model show --plot`.
@Suite struct GatewayClassifyHelpersTests {
    static func frame(_ shade: UInt8) throws -> [UInt8] {
        try RGBImage(
            width: 32, height: 24, pixels: (0..<32 * 24 * 3).map { UInt8(truncatingIfNeeded: Int(shade) + $0 % 97) }
        ).jpeg(quality: 85)
    }

    /// Frames come back whole however the stream is cut into reads, with other bytes between them (a multipart
    /// boundary) skipped.
    @Test func mjpegIsCutIntoItsFrames() throws {
        let frames = try [10, 90, 200].map { try Self.frame(UInt8($0)) }
        let boundary = Array("\r\n--frame\r\nContent-Type: image/jpeg\r\n\r\n".utf8)
        let stream = frames.flatMap { boundary + $0 }
        for chunkSize in [1, 7, 1000, stream.count] {
            var splitter = MJPEGSplitter()
            var found: [[UInt8]] = []
            for start in stride(from: 0, to: stream.count, by: chunkSize) {
                found += try splitter.feed(Array(stream[start..<min(stream.count, start + chunkSize)]))
            }
            try splitter.finish()
            #expect(found == frames, "chunks of \(chunkSize)")
        }
        for frame in frames { #expect(try RGBImage.decode(frame).width == 32) }
    }

    /// A thumbnail's own end marker inside an APP1 segment does not end the frame; a stream cut inside a frame is
    /// an error at its end.
    @Test func aThumbnailDoesNotEndTheFrameAndACutFrameIsAnError() throws {
        let frame = try Self.frame(50), thumbnail = try Self.frame(150)
        let payload = Array("Exif\0\0".utf8) + thumbnail
        let app1: [UInt8] = [0xFF, 0xE1, UInt8((payload.count + 2) >> 8), UInt8((payload.count + 2) & 0xFF)] + payload
        let withThumbnail = Array(frame[0..<2]) + app1 + Array(frame[2...])
        var splitter = MJPEGSplitter()
        #expect(try splitter.feed(withThumbnail + frame) == [withThumbnail, frame])
        #expect(try RGBImage.decode(withThumbnail).height == 24)
        var cut = MJPEGSplitter()
        #expect(try cut.feed(frame + Array(frame.prefix(frame.count / 2))) == [frame])
        #expect(throws: MJPEGSplitter.Malformed.self) { try cut.finish() }
    }

    /// The plot is a PNG of 800×400 that any decoder reads, with the three curves in their colours.
    @Test func thePlotIsAPNGWithItsCurves() throws {
        var history: [ClassificationV1.TrainingEpoch] = []
        for e in 1...10 {
            let first = e <= 5
            let validation: Double? = first ? 0.4 + Double(e) / 20 : nil
            history.append(
                ClassificationV1.TrainingEpoch(
                    pass: first ? 1 : 2, epoch: Int32(first ? e : e - 5), loss: 1 / Double(e),
                    trainingAccuracy: 0.5 + Double(e) / 25, validationAccuracy: validation))
        }
        let png = TrainingCurvePlot.png(history)
        #expect(Array(png.prefix(8)) == [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A])
        let image = try RGBImage.decode(png)
        #expect(image.width == 800 && image.height == 400)
        var colours = Set<[UInt8]>()
        for i in stride(from: 0, to: image.pixels.count, by: 3) { colours.insert(Array(image.pixels[i..<i + 3])) }
        let curves: [(UInt8, UInt8, UInt8)] = [
            TrainingCurvePlot.loss, TrainingCurvePlot.training, TrainingCurvePlot.validation,
        ]
        for c in curves {
            let colour: [UInt8] = [c.0, c.1, c.2]
            #expect(colours.contains(colour))
        }
        #expect(png.count < 60_000, "deflated: \(png.count) bytes")
    }
}

/// `dataset create --from DIR` takes a folder with `images/` and `labels/` as YOLO's and sends the files YOLO's
/// layout names — images under images/, label files under labels/, the YAML at the top, classes.txt — by their paths
/// below DIR; other files stay behind (named on standard error).
@Suite struct DatasetCreateYOLOFilesTests {
    @Test func aYOLOFolderIsRecognisedAndItsFilesChosen() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("yolo-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        let files = [
            "images/train/a.jpg", "images/val/b.PNG", "labels/train/a.txt", "labels/val/b.txt", "labels/classes.txt",
            "data.yaml", "README.md", "images/notes.txt", "nested/extra.yaml", ".cache/x.jpg", "labels/train.cache",
        ]
        for path in files {
            let url = root.appendingPathComponent(path)
            try FileManager.default.createDirectory(
                at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
            try Data("x".utf8).write(to: url)
        }
        #expect(DatasetCreate.looksLikeYOLO(root))
        #expect(
            try DatasetCreate.yoloFiles(root).map(\.path)
                == [
                    "data.yaml", "images/train/a.jpg", "images/val/b.PNG", "labels/classes.txt", "labels/train/a.txt",
                    "labels/val/b.txt",
                ])
        // Label folders named otherwise are a classifier's dataset.
        try FileManager.default.moveItem(
            at: root.appendingPathComponent("labels"), to: root.appendingPathComponent("boxes"))
        #expect(!DatasetCreate.looksLikeYOLO(root))
    }

    /// Issue 41: `evaluate` prints each label's operating point, and "-" for one that no threshold makes precise.
    @Test func evaluatePrintsEachLabelsOperatingPoint() {
        var four = ClassificationV1.ClassScores()
        four.label = "four"
        four.operatingPoint = ClassificationV1.OperatingPoint(
            confidence: 0.4, precision: 0.828, recall: 0.96, truePositives: 24, falsePositives: 5, missed: 1)
        var three = ClassificationV1.ClassScores()
        three.label = "three"
        var response = ClassificationV1.EvaluateResponse()
        response.perClass = [four, three]
        response.operatingPrecision = 0.8
        #expect(operatingPointTitle(response).hasPrefix("best recall at precision ≥ 0.80 (I/U 50%)"))
        #expect(
            operatingPointRows(response) == [
                ["four", "0.400", "0.828", "0.960", "24", "5", "1"], ["three", "-", "-", "-", "-", "-", "-"],
            ])
    }
}
