import Foundation
import Testing

@testable import ClassificationCore

/// Detection datasets in YOLO's and COCO's formats besides Create ML's: the same boxes in each convention make the
/// same dataset, and every malformed input names its file and field.
@Suite struct AnnotationFormatTests {
    /// 8×6 images: `a` with a dot and a bar, `b` with a dot, `c` with a bar.
    static let images: [String: [UInt8]] = [
        "a.png": DatasetTests.red, "b.png": DatasetTests.red2, "c.png": DatasetTests.blue,
    ]

    /// The boxes every format below writes, in the service's convention (pixels, top-left corner).
    static let expected: [String: [Dataset.Object]] = [
        "a": [
            Dataset.Object(label: 1, box: Box(x: 1, y: 1, width: 2, height: 2)),
            Dataset.Object(label: 0, box: Box(x: 0, y: 3, width: 8, height: 3)),
        ],
        "b": [Dataset.Object(label: 1, box: Box(x: 4, y: 2, width: 4, height: 2))],
        "c": [Dataset.Object(label: 0, box: Box(x: 2, y: 0, width: 4, height: 6))],
    ]

    static let createML = """
        [{"image": "a.png", "annotations": [{"label": "dot", "coordinates": {"x": 2, "y": 2, "width": 2, "height": 2}},
                                            {"label": "bar", "coordinates": {"x": 4, "y": 4.5, "width": 8, "height": 3}}]},
         {"image": "b.png", "annotations": [{"label": "dot", "coordinates": {"x": 6, "y": 3, "width": 4, "height": 2}}]},
         {"image": "c.png", "annotations": [{"label": "bar", "coordinates": {"x": 4, "y": 3, "width": 4, "height": 6}}]}]
        """

    static let coco = """
        {"images": [{"id": 7, "file_name": "a.png", "width": 8, "height": 6}, {"id": 8, "file_name": "b.png"},
                    {"id": 9, "file_name": "c.png", "width": 8, "height": 6}],
         "annotations": [{"id": 1, "image_id": 7, "category_id": 3, "bbox": [1, 1, 2, 2]},
                         {"id": 2, "image_id": 7, "category_id": 1, "bbox": [0, 3, 8, 3]},
                         {"id": 3, "image_id": 8, "category_id": 3, "bbox": [4, 2, 4, 2], "iscrowd": 0},
                         {"id": 4, "image_id": 9, "category_id": 1, "bbox": [2, 0, 4, 6]}],
         "categories": [{"id": 1, "name": "bar"}, {"id": 3, "name": "dot"}, {"id": 4, "name": "unused"}]}
        """

    /// YOLO's files: labels named by data.yaml's `names` (dot 0, bar 1), boxes as normalised centre and size.
    static func yolo(yaml: String = "names: [dot, bar]\n", extra: [String: String] = [:]) -> [String: [UInt8]] {
        var files: [String: [UInt8]] = [
            "images/train/a.png": DatasetTests.red, "images/train/b.png": DatasetTests.red2,
            "images/val/c.png": DatasetTests.blue,
            "labels/train/a.txt": Array("0 0.25 0.333333 0.25 0.333333\n1 0.5 0.75 1 0.5\n".utf8),
            "labels/train/b.txt": Array("0 0.75 0.5 0.5 0.333333\n\n".utf8),
            "labels/val/c.txt": Array("1 0.5 0.5 0.5 1\n".utf8),
            "data.yaml": Array(yaml.utf8),
        ]
        for (path, text) in extra { files[path] = Array(text.utf8) }
        return files
    }

    static func check(_ dataset: Dataset, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(dataset.kind == .detection && dataset.labels == ["bar", "dot"], sourceLocation: sourceLocation)
        #expect(dataset.countsPerLabel == ["bar": 2, "dot": 2], sourceLocation: sourceLocation)
        for sample in dataset.samples {
            let stem = ((sample.name as NSString).lastPathComponent as NSString).deletingPathExtension
            let want = Self.expected[stem]!
            #expect(sample.objects.count == want.count, "\(sample.name)", sourceLocation: sourceLocation)
            for (got, wanted) in zip(sample.objects, want) {
                #expect(got.label == wanted.label, "\(sample.name)", sourceLocation: sourceLocation)
                #expect(
                    abs(got.box.x - wanted.box.x) < 1e-3 && abs(got.box.y - wanted.box.y) < 1e-3
                        && abs(got.box.width - wanted.box.width) < 1e-3
                        && abs(got.box.height - wanted.box.height) < 1e-3,
                    "\(sample.name): \(got.box) vs \(wanted.box)", sourceLocation: sourceLocation)
            }
        }
        #expect(dataset.samples.count == 3, sourceLocation: sourceLocation)
    }

    @Test func theThreeFormatsMakeTheSameDataset() throws {
        Self.check(
            try DatasetBuilder.detection(format: .createML, annotations: Array(Self.createML.utf8), files: Self.images))
        Self.check(try DatasetBuilder.detection(format: .coco, annotations: Array(Self.coco.utf8), files: Self.images))
        Self.check(try DatasetBuilder.detection(format: .yolo, annotations: [], files: Self.yolo()))
    }

    @Test func theFormatIsReadFromWhatWasSent() {
        #expect(AnnotationFormat.detect(annotations: Array(Self.createML.utf8)) == .createML)
        #expect(AnnotationFormat.detect(annotations: Array("\n  \(Self.coco)".utf8)) == .coco)
        #expect(AnnotationFormat.detect(annotations: []) == .yolo)
        #expect(
            AnnotationFormat.isYOLOTextFile("labels/train/a.txt") && AnnotationFormat.isYOLOTextFile("data.yaml")
                && AnnotationFormat.isYOLOTextFile("labels/classes.txt")
                && !AnnotationFormat.isYOLOTextFile("notes.txt")
                && !AnnotationFormat.isYOLOTextFile("images/a.png"))
    }

    @Test func yoloClassNamesInEveryYAMLSpellingAndClassesTxt() throws {
        let spellings = [
            "path: ../datasets/x\ntrain: images/train\nval: images/val\nnc: 2\nnames: ['dot', \"bar\"]  # two\n",
            "names:\n  - dot\n  - bar\n",
            "names:\n  0: dot\n  1: bar\ntrain: images\n",
            "names: {0: dot, 1: bar}\n",
            "names: [dot,\n  bar]\n",
        ]
        for yaml in spellings {
            Self.check(try DatasetBuilder.detection(format: .yolo, annotations: [], files: Self.yolo(yaml: yaml)))
        }
        var files = Self.yolo()
        files["data.yaml"] = nil
        files["labels/classes.txt"] = Array("dot\nbar\n\n".utf8)
        Self.check(try DatasetBuilder.detection(format: .yolo, annotations: [], files: files))
        // An image without a label file has no objects; other files' boxes are unchanged.
        files["images/train/d.png"] = DatasetTests.blue2
        let dataset = try DatasetBuilder.detection(format: .yolo, annotations: [], files: files)
        #expect(dataset.samples.count == 4 && dataset.samples.first { $0.name == "images/train/d.png" }?.objects == [])
    }

    func message(_ body: () throws -> Dataset) -> String {
        do {
            _ = try body()
            return "no error"
        } catch let error as ClassificationError {
            #expect(error.category == .invalidArgument)
            return error.message
        } catch {
            return "unexpected error \(error)"
        }
    }

    @Test func malformedYOLONamesItsFileAndField() {
        func check(_ files: [String: [UInt8]], _ expected: String, sourceLocation: SourceLocation = #_sourceLocation) {
            let got = message { try DatasetBuilder.detection(format: .yolo, annotations: [], files: files) }
            #expect(got.contains(expected), "\(got) does not contain \(expected)", sourceLocation: sourceLocation)
        }
        func with(_ path: String, _ text: String?) -> [String: [UInt8]] {
            var files = Self.yolo()
            files[path] = text.map { Array($0.utf8) }
            return files
        }
        check(
            with("labels/train/b.txt", "2 0.5 0.5 0.2 0.2\n"),
            "labels/train/b.txt line 1: class 2 is out of range: data.yaml names 2 classes (0–1)")
        check(
            with("labels/train/b.txt", "0 0.5 0.5 0.2\n"),
            "labels/train/b.txt line 1: 5 values expected (class cx cy w h), found 4")
        check(with("labels/train/b.txt", "0 0.5 0.5 0.2 0.2 0.3 0.3\n"), "segmentation polygons")
        check(
            with("labels/train/b.txt", "x 0.5 0.5 0.2 0.2\n"),
            "labels/train/b.txt line 1: class \"x\" is not an integer")
        check(
            with("labels/train/b.txt", "0 0.5 nan 0.2 0.2\n"), "labels/train/b.txt line 1: cy \"nan\" is not a number")
        check(with("labels/train/b.txt", "\n0 0.9 0.5 0.4 0.2\n"), "labels/train/b.txt line 2 (cx cy w h): box")
        check(
            with("labels/train/b.txt", "0 0.5 0.5 0 0.2\n"),
            "labels/train/b.txt line 1 (cx cy w h): width and height must be positive")
        check(
            with("labels/train/z.txt", "0 0.5 0.5 0.2 0.2\n"),
            "labels/train/z.txt: a label file without its image (expected images/train/z.png")
        check(with("data.yaml", nil), "need their class names: a data.yaml with names: or a classes.txt")
        check(with("data.yaml", "nc: 3\nnames: [dot, bar]\n"), "data.yaml: nc is 3 but names: lists 2 classes")
        check(with("data.yaml", "names:\n  0: dot\n  2: bar\n"), "data.yaml: names: indices must be 0…1 (found 0, 2)")
        check(with("data.yaml", "train: images\n"), "data.yaml: no names: (the class names) found")
        check(with("data.yaml", "names: dot bar\n"), "data.yaml line 1: names: must be a list")
        check(with("data.yaml", "names: [dot, dot]\n"), "data.yaml: class dot is named twice")
        check(with("other.yaml", "names: [dot, bar]\n"), "one YAML file names the classes; found 2")
        check(with("classes.txt", "bar\ndot\n"), "data.yaml and classes.txt name different classes")
        check(
            with("a.png", nil).merging(["loose.png": DatasetTests.red]) { a, _ in a },
            "loose.png: a YOLO image must be inside an images/ folder")
        check(["data.yaml": Array("names: [a]".utf8)], "no images: YOLO's images go under an images/ folder")
        check(
            with("labels/train/a.txt", "1 0.5 0.75 1 0.5\n").merging(["labels/val/c.txt": []]) { _, b in b },
            "label bar appears in 1 image")
        // JSON sent with YOLO's files is refused: the labels are files.
        #expect(
            message { try DatasetBuilder.detection(format: .yolo, annotations: Array("[]".utf8), files: Self.yolo()) }
                .contains("send no JSON"))
        // A label file whose image was left out as bad (skip_bad) goes with it.
        var files = Self.yolo()
        files["images/train/b.png"] = nil
        #expect(
            message { try DatasetBuilder.detection(format: .yolo, annotations: [], files: files) }.contains(
                "labels/train/b.txt: a label file without its image"))
        let kept = try? DatasetBuilder.detection(
            format: .yolo, annotations: [],
            files: files.merging([
                "images/train/e.png": DatasetTests.red, "labels/train/e.txt": Array("0 0.5 0.5 0.2 0.2".utf8),
            ]) { a, _ in a },
            skipped: ["images/train/b.png"])
        #expect(kept?.samples.count == 3)
    }

    @Test func malformedCOCONamesItsField() {
        func check(_ json: String, _ expected: String, sourceLocation: SourceLocation = #_sourceLocation) {
            let got = message {
                try DatasetBuilder.detection(format: .coco, annotations: Array(json.utf8), files: Self.images)
            }
            #expect(got.contains(expected), "\(got) does not contain \(expected)", sourceLocation: sourceLocation)
        }
        func replacing(_ old: String, _ new: String) -> String {
            precondition(Self.coco.contains(old), old)
            return Self.coco.replacingOccurrences(of: old, with: new)
        }
        check("{\"images\": [", "COCO annotations: malformed JSON")
        check("[]", "COCO annotations: the top level must be an object with images, annotations and categories")
        check(replacing("\"categories\"", "\"classes\""), "COCO annotations.categories: missing or not an array")
        check(
            replacing("\"image_id\": 8", "\"image_id\": 42"),
            "COCO annotations.annotations[2].image_id: 42 is not the id of any of the images")
        check(
            replacing("\"category_id\": 1, \"bbox\": [2", "\"category_id\": 5, \"bbox\": [2"),
            "annotations[3].category_id: 5 is not the id of any of the categories")
        check(
            replacing("[4, 2, 4, 2]", "[4, 2, 4]"),
            "annotations[2].bbox: missing or not 4 numbers [x, y, width, height]")
        check(
            replacing("[4, 2, 4, 2]", "[4, 2, \"4\", 2]"),
            "annotations[2].bbox: [x, y, width, height] must all be numbers")
        check(
            replacing("[4, 2, 4, 2]", "[6, 2, 4, 2]"),
            "COCO annotations.annotations[2].bbox (b.png): box 6.0…10.0 × 2.0…4.0 lies outside the 8×6 image")
        check(
            replacing("[4, 2, 4, 2]", "[4, 2, -1, 2]"), "annotations[2].bbox (b.png): width and height must be positive"
        )
        check(
            replacing("\"id\": 8, \"file_name\": \"b.png\"", "\"id\": 8, \"file_name\": \"z.png\""),
            "z.png: named in COCO annotations.images[1].file_name but not uploaded")
        check(replacing("\"id\": 8,", "\"id\": 7,"), "COCO annotations.images[1].id: 7 is given to two images")
        check(replacing("\"id\": 8,", "\"id\": \"8\","), "COCO annotations.images[1].id: missing or not an integer")
        check(
            replacing("{\"id\": 4, \"name\": \"unused\"}", "{\"id\": 3, \"name\": \"again\"}"),
            "categories[2].id: 3 is given to two categories")
        check(
            replacing("{\"id\": 4, \"name\": \"unused\"}", "{\"id\": 4}"), "categories[2].name: missing or not a string"
        )
        check(
            replacing("\"file_name\": \"a.png\", \"width\": 8", "\"file_name\": \"a.png\", \"width\": 80"),
            "COCO annotations.images[0] (a.png): declares 80×6 but the image is 8×6")
        check(
            replacing("\"file_name\": \"a.png\", \"width\": 8", "\"file_name\": \"a.png\", \"width\": true"),
            "images[0]: width and height must be positive integers")
    }
}
