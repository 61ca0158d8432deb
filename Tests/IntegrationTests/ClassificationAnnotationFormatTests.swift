import Foundation
import Testing

/// Issue 26, annotations in YOLO and COCO besides Create ML's: the same digit-detection scenes written in each
/// format (by this test, from Create ML's annotations) and uploaded through `gateway classify dataset create`, the
/// format read from the files, make the same dataset; malformed files are refused naming the file and field.
@Suite(.serialized) struct ClassificationAnnotationFormatTests {
    static let datasets = ClassificationStackTests.datasets
    static let enabled =
        FileManager.default.fileExists(atPath: datasets.appendingPathComponent("digit-detection").path)
        || ProcessInfo.processInfo.environment["CI"] == "true"
    static let skipMessage: Comment =
        "skipped: ../shared/datasets/digit-detection is missing (set CI=true to require it)"

    /// Width and height from a baseline or progressive JPEG's frame header.
    static func jpegSize(_ bytes: [UInt8]) throws -> (width: Int, height: Int) {
        var index = 2
        while index + 9 < bytes.count {
            guard bytes[index] == 0xFF else {
                index += 1
                continue
            }
            let marker = bytes[index + 1]
            let length = Int(bytes[index + 2]) << 8 | Int(bytes[index + 3])
            if [0xC0, 0xC1, 0xC2].contains(marker) {
                return (
                    Int(bytes[index + 7]) << 8 | Int(bytes[index + 8]),
                    Int(bytes[index + 5]) << 8 | Int(bytes[index + 6])
                )
            }
            index += 2 + length
        }
        throw CocoaError(.fileReadCorruptFile)
    }

    struct Scene {
        var image: String
        var width: Int
        var height: Int
        var boxes: [(label: String, x: Double, y: Double, width: Double, height: Double)]
    }

    /// The first `count` scenes of train-annotations.json, boxes as Create ML writes them (centre, pixels).
    static func scenes(_ count: Int) throws -> [Scene] {
        let root = datasets.appendingPathComponent("digit-detection")
        let entries = try #require(
            try JSONSerialization.jsonObject(
                with: Data(contentsOf: root.appendingPathComponent("train-annotations.json"))) as? [[String: Any]])
        return try entries.prefix(count).map { entry in
            let image = try #require(entry["image"] as? String)
            let size = try jpegSize([UInt8](try Data(contentsOf: root.appendingPathComponent("images/\(image)"))))
            let boxes = try (try #require(entry["annotations"] as? [[String: Any]])).map { annotation in
                let c = try #require(annotation["coordinates"] as? [String: Double])
                return (try #require(annotation["label"] as? String), c["x"]!, c["y"]!, c["width"]!, c["height"]!)
            }
            return Scene(image: image, width: size.width, height: size.height, boxes: boxes)
        }
    }

    static func write(_ object: Any, to url: URL) throws {
        try JSONSerialization.data(withJSONObject: object, options: [.prettyPrinted, .sortedKeys]).write(to: url)
    }

    /// The counts a dataset summary reports: images, and per label images and objects.
    static func counts(_ summary: [String: Any]) -> String {
        let labels = (summary["labels"] as? [[String: Any]] ?? []).map {
            "\($0["label"] ?? "?"): \($0["images"] ?? "?") images \($0["objects"] ?? "?") objects"
        }
        return "\(summary["kind"] ?? "?") \(summary["images"] ?? "?") images; " + labels.joined(separator: "; ")
    }

    @Test(.enabled(if: enabled, skipMessage))
    func theSameScenesInCreateMLYOLOAndCOCOMakeTheSameDataset() async throws {
        try await Stack.with(services: ["classification"]) { stack in
            let up = try await stack.compose("up")
            try #require(up.status == 0, "compose up failed: \(up.output)")
            let scratch = stack.directory.appendingPathComponent("formats")
            let images = Self.datasets.appendingPathComponent("digit-detection/images")
            let scenes = try Self.scenes(12)
            let labels = Set(scenes.flatMap { $0.boxes.map(\.label) }).sorted()
            try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)

            // Create ML: the boxes as they are.
            let createML = scratch.appendingPathComponent("createml.json")
            try Self.write(
                scenes.map { scene in
                    [
                        "image": scene.image,
                        "annotations": scene.boxes.map { b in
                            [
                                "label": b.label,
                                "coordinates": ["x": b.x, "y": b.y, "width": b.width, "height": b.height],
                            ] as [String: Any]
                        },
                    ] as [String: Any]
                }, to: createML)

            // COCO: top-left corners, categories numbered from 1, an image id unlike its index.
            let coco = scratch.appendingPathComponent("coco.json")
            var annotations: [[String: Any]] = []
            for (index, scene) in scenes.enumerated() {
                for b in scene.boxes {
                    annotations.append([
                        "id": annotations.count + 1, "image_id": 100 + index,
                        "category_id": labels.firstIndex(of: b.label)! + 1,
                        "bbox": [b.x - b.width / 2, b.y - b.height / 2, b.width, b.height], "area": b.width * b.height,
                        "iscrowd": 0,
                    ])
                }
            }
            var cocoObject: [String: Any] = [
                "images": scenes.enumerated().map {
                    ["id": 100 + $0, "file_name": $1.image, "width": $1.width, "height": $1.height] as [String: Any]
                },
                "annotations": annotations,
                "categories": labels.enumerated().map {
                    ["id": $0 + 1, "name": $1, "supercategory": "digit"] as [String: Any]
                },
            ]
            try Self.write(cocoObject, to: coco)

            // YOLO: images/ and labels/ side by side, normalised centres and sizes, the names in data.yaml.
            let yolo = scratch.appendingPathComponent("yolo")
            for folder in ["images/train", "labels/train"] {
                try FileManager.default.createDirectory(
                    at: yolo.appendingPathComponent(folder), withIntermediateDirectories: true)
            }
            for scene in scenes {
                try FileManager.default.copyItem(
                    at: images.appendingPathComponent(scene.image),
                    to: yolo.appendingPathComponent("images/train/\(scene.image)"))
                let lines = scene.boxes.map { b in
                    String(
                        format: "%d %.6f %.6f %.6f %.6f", labels.firstIndex(of: b.label)!, b.x / Double(scene.width),
                        b.y / Double(scene.height),
                        b.width / Double(scene.width), b.height / Double(scene.height))
                }
                try (lines.joined(separator: "\n") + "\n").write(
                    to: yolo.appendingPathComponent(
                        "labels/train/\((scene.image as NSString).deletingPathExtension).txt"), atomically: true,
                    encoding: .utf8)
            }
            try
                "path: .\ntrain: images/train\nval: images/train\nnc: \(labels.count)\nnames: [\(labels.joined(separator: ", "))]\n"
                .write(to: yolo.appendingPathComponent("data.yaml"), atomically: true, encoding: .utf8)

            // The format is read from the files: an array is Create ML's, an object COCO's, images/ and labels/ YOLO's.
            let uploads: [(String, [String])] = [
                ("from-createml", ["--annotations", createML.path, "--images", images.path]),
                ("from-coco", ["--annotations", coco.path, "--images", images.path]),
                ("from-yolo", ["--from", yolo.path]),
                ("from-yolo-named", ["--from", yolo.path, "--format", "yolo"]),
            ]
            var summaries: [String] = []
            for (name, arguments) in uploads {
                let created = try await stack.gateway(["classify", "dataset", "create", name] + arguments + ["--json"])
                ClassificationStackTests.status(created, 0, "dataset create \(name)")
                summaries.append(Self.counts(try jsonObject(created)))
            }
            #expect(summaries[0].hasPrefix("DATASET_KIND_DETECTION 12 images; four: "), "\(summaries[0])")
            #expect(Set(summaries).count == 1, "\(summaries)")

            // Malformed inputs: INVALID_ARGUMENT (exit 3) naming the file and the field, nothing kept.
            let badLabel = yolo.appendingPathComponent(
                "labels/train/\((scenes[1].image as NSString).deletingPathExtension).txt")
            try "5 0.5 0.5 0.1 0.1\n".write(to: badLabel, atomically: true, encoding: .utf8)
            let outOfRange = try await stack.gateway(["classify", "dataset", "create", "bad-yolo", "--from", yolo.path])
            ClassificationStackTests.status(outOfRange, 3, "a YOLO class out of range")
            #expect(
                outOfRange.output.contains(
                    "labels/train/\((scenes[1].image as NSString).deletingPathExtension).txt line 1: class 5 is out of range"
                ),
                "\(outOfRange.output)")
            annotations[0]["image_id"] = 999
            cocoObject["annotations"] = annotations
            let badCOCO = scratch.appendingPathComponent("bad-coco.json")
            try Self.write(cocoObject, to: badCOCO)
            let unknownImage = try await stack.gateway([
                "classify", "dataset", "create", "bad-coco", "--annotations", badCOCO.path, "--images", images.path,
            ])
            ClassificationStackTests.status(unknownImage, 3, "a COCO annotation of an unknown image")
            #expect(
                unknownImage.output.contains(
                    "COCO annotations.annotations[0].image_id: 999 is not the id of any of the images"),
                "\(unknownImage.output)")
            let wrongFormat = try await stack.gateway([
                "classify", "dataset", "create", "bad-format", "--annotations", coco.path, "--images", images.path,
                "--format", "createml",
            ])
            ClassificationStackTests.status(wrongFormat, 3, "COCO's JSON read as Create ML's")
            #expect(
                wrongFormat.output.contains("annotations.json: the top level must be an array"), "\(wrongFormat.output)"
            )
            let listed = try jsonObject(try await stack.gateway(["classify", "dataset", "list", "--json"]))
            #expect(
                (listed["datasets"] as? [[String: Any]])?.compactMap { $0["name"] as? String }.sorted()
                    == ["from-coco", "from-createml", "from-yolo", "from-yolo-named"])
        }
    }
}
