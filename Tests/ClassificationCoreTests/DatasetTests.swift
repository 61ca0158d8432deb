import Foundation
import StorageTestSupport
import Testing

@testable import ClassificationCore

@Suite struct DatasetTests {
    static let red = TestPNG.encode(TestPNG.solid(width: 8, height: 6, colour: (200, 0, 0)))
    static let red2 = TestPNG.encode(TestPNG.solid(width: 8, height: 6, colour: (190, 0, 0)))
    static let blue = TestPNG.encode(TestPNG.solid(width: 8, height: 6, colour: (0, 0, 200)))
    static let blue2 = TestPNG.encode(TestPNG.solid(width: 8, height: 6, colour: (0, 0, 190)))

    func message(_ body: () throws -> Dataset) -> String? {
        do {
            _ = try body()
            return nil
        } catch let error as ClassificationError {
            #expect(error.category == .invalidArgument)
            return error.message
        } catch {
            Issue.record("unexpected error \(error)")
            return nil
        }
    }

    @Test func aValidFolderLayoutWithDuplicatesStoredOnce() throws {
        let dataset = try DatasetBuilder.classification(files: [
            ("red/a.png", Self.red), ("red/b.png", Self.red2), ("red/copy.png", Self.red),
            ("blue/a.png", Self.blue), ("blue/b.PNG", Self.blue2), ("blue/notes.txt", Array("x".utf8)),
        ])
        #expect(dataset.labels == ["blue", "red"])
        #expect(dataset.countsPerLabel == ["blue": 2, "red": 2])
        #expect(dataset.images.count == 4)
        #expect(dataset.samples.allSatisfy { $0.width == 8 && $0.height == 6 })
    }

    @Test func badClassificationDatasetsNameTheProblem() {
        #expect(
            message { try DatasetBuilder.classification(files: [("red/a.png", Self.red), ("red/b.png", Self.red2)]) }?
                .contains("at least 2 labels") == true)
        #expect(
            message {
                try DatasetBuilder.classification(files: [
                    ("red/a.png", Self.red), ("red/b.png", Self.red2), ("blue/a.png", Self.blue),
                ])
            }?
            .contains("label blue has 1 image") == true)
        #expect(
            message {
                try DatasetBuilder.classification(files: [
                    ("red/a.png", Self.red), ("red/b.png", Self.red2), ("blue/a.png", Self.blue),
                    ("blue/bad.jpg", [0xFF, 0xD8, 0xFF, 0, 1]),
                ])
            }?
            .contains("blue/bad.jpg: not a decodable image") == true)
        #expect(
            message {
                try DatasetBuilder.classification(files: [
                    ("red/a.png", Self.red), ("red/b.png", Self.red2), ("blue/a.png", Self.red),
                    ("blue/b.png", Self.blue),
                ])
            }?
            .contains("another label") == true)
        #expect(
            message { try DatasetBuilder.classification(files: [("a.png", Self.red)]) }?
                .contains("a.png: an image must be inside a folder") == true)
    }

    @Test func thePixelLimitIsCheckedBeforeDecoding() {
        // A header claiming 100000 × 100000 with no pixel data: refused by size, not by a failed decode.
        let huge = TestPNG.encode(width: 100_000, height: 100_000, raw: [0, 0, 0, 0])
        do {
            _ = try RGBImage.decode(huge, name: "huge.png")
            Issue.record("decoded a 10-gigapixel header")
        } catch let error as ClassificationError {
            #expect(error.message.contains("exceeds the limit"), "\(error.message)")
        } catch { Issue.record("\(error)") }
    }

    func annotations(_ json: String) -> [UInt8] { Array(json.utf8) }
    var images: [String: [UInt8]] { ["a.png": Self.red, "b.png": Self.red2, "c.png": Self.blue] }

    @Test func aValidDetectionDataset() throws {
        let json = """
            [{"image": "a.png", "annotations": [{"label": "dot", "coordinates": {"x": 4, "y": 3, "width": 2, "height": 2}}]},
             {"image": "b.png", "annotations": [{"label": "dot", "coordinates": {"x": 1, "y": 1, "width": 2, "height": 2}},
                                                {"label": "bar", "coordinates": {"x": 4, "y": 3, "width": 8, "height": 6}}]},
             {"image": "c.png", "annotations": [{"label": "bar", "coordinates": {"x": 4.2, "y": 3, "width": 8, "height": 6}}]}]
            """
        let dataset = try DatasetBuilder.detection(annotations: annotations(json), images: images)
        #expect(dataset.labels == ["bar", "dot"])
        #expect(dataset.samples[0].objects == [Dataset.Object(label: 1, box: Box(x: 3, y: 2, width: 2, height: 2))])
        // Half a pixel of rounding past the edge is clipped, not refused.
        #expect(dataset.samples[2].objects[0].box.maxX == 8)
    }

    @Test func badDetectionDatasetsNameImageAndField() {
        func check(_ json: String, _ expected: String) {
            let got = message { try DatasetBuilder.detection(annotations: annotations(json), images: images) }
            #expect(got?.contains(expected) == true, "\(got ?? "no error") does not contain \(expected)")
        }
        check("[{\"image\": \"a.png\",", "malformed JSON")
        check("{}", "top level must be an array")
        check(#"[{"image": "z.png", "annotations": []}]"#, "z.png: named in annotations.json but not uploaded")
        check(
            #"[{"image": "a.png", "annotations": [{"label": "dot", "coordinates": {"x": 7, "y": 3, "width": 4, "height": 2}}]}]"#,
            "a.png.annotations[0].coordinates: box")
        check(
            #"[{"image": "a.png", "annotations": [{"label": "dot", "coordinates": {"x": "4", "y": 3, "width": 4, "height": 2}}]}]"#,
            "a.png.annotations[0].coordinates.x: missing or not a number")
        check(
            #"[{"image": "a.png", "annotations": [{"coordinates": {"x": 4, "y": 3, "width": 4, "height": 2}}]}]"#,
            "a.png.annotations[0].label")
        check(
            #"[{"image": "a.png", "annotations": [{"label": "dot", "coordinates": {"x": 4, "y": 3, "width": 2, "height": 2}}]}]"#,
            "label dot appears in 1 image")
    }
}

@Suite struct StoreTests {
    @Test func datasetsAndModelsPersistWholeOrNotAtAll() throws {
        let store = try ClassificationStore.inMemory(using: .testBackend)
        let dataset = try DatasetBuilder.classification(files: [
            ("red/a.png", DatasetTests.red), ("red/b.png", DatasetTests.red2),
            ("blue/a.png", DatasetTests.blue), ("blue/b.png", DatasetTests.blue2),
        ])
        try store.saveDataset(dataset, name: "colours")
        try store.saveDataset(dataset, name: "again")  // the same images: stored once
        #expect(throws: ClassificationError(.alreadyExists, "dataset colours already exists")) {
            try store.saveDataset(dataset, name: "colours")
        }
        let loaded = try store.dataset(named: "colours")
        #expect(loaded.labels == dataset.labels && loaded.samples == dataset.samples && loaded.images == dataset.images)
        #expect(try store.datasets().map(\.images) == [4, 4])
        try store.deleteDataset(named: "again")
        #expect(try store.dataset(named: "colours").images.count == 4)
        try store.deleteDataset(named: "colours")
        #expect(try store.database.read { try $0.queryOne("SELECT COUNT(*) FROM images")?.int(0) } == 0)
        #expect(throws: ClassificationError.self) { try store.dataset(named: "colours") }

        let header = ModelHeader(
            kind: .classifier, algorithm: "features", labels: ["a", "b"], inputWidth: 8, inputHeight: 8)
        let file = ModelFile(header: header, tensors: [NamedArray(name: "x", shape: [1], values: [1])])
        try store.saveModel(file, name: "m1")
        try store.saveModel(file, name: "m2")
        #expect(try store.models().map(\.active) == [false, false])  // stored models serve no app (DeploymentTests)
        #expect(try store.model(named: "m1") == file)
    }
}
