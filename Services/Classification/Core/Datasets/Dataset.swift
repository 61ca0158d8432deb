import Base
import Foundation
import TLS

/// A validated dataset: every image decoded once, stored once per content hash, with either one label per image
/// (a classifier's Create ML folder layout) or labelled boxes (a detector's `annotations.json`).
public struct Dataset: Sendable {
    public enum Kind: String, Sendable, Codable { case classification, detection }

    /// One labelled object in pixels of the upright image, origin top-left.
    public struct Object: Sendable, Equatable, Codable {
        public var label: Int
        public var box: Box
    }

    public struct Sample: Sendable, Equatable {
        /// The name the image was uploaded under (`label/file.png`, or the annotation's `image`).
        public var name: String
        /// SHA-256 of the image's bytes, its key in `images`.
        public var hash: String
        public var width: Int
        public var height: Int
        /// The class of a classification sample (index into `labels`).
        public var label: Int
        /// The boxes of a detection sample.
        public var objects: [Object]
    }

    public var kind: Kind
    /// Sorted, so indices are stable for the same data.
    public var labels: [String]
    public var samples: [Sample]
    /// Image bytes by content hash: an image uploaded twice is kept once.
    public var images: [String: [UInt8]]

    /// Samples per label (a detection sample counts once per label it shows).
    public var countsPerLabel: [String: Int] {
        var counts: [String: Int] = [:]
        for sample in samples {
            switch kind {
            case .classification: counts[labels[sample.label], default: 0] += 1
            case .detection: for label in Set(sample.objects.map(\.label)) { counts[labels[label], default: 0] += 1 }
            }
        }
        return counts
    }
}

extension Dataset {
    /// This classification dataset with `other`'s images added (the feedback dataset joining a training set).
    /// `other`'s labels must be among this one's — a label the model has never seen would change what it predicts,
    /// so it is an error naming the labels. A photo in both takes `other`'s label: feedback confirms or corrects.
    public func merging(_ other: Dataset) throws -> Dataset {
        guard kind == .classification, other.kind == .classification else {
            throw ClassificationError.invalid("only classification datasets merge")
        }
        try other.checkLabels(within: labels)
        var merged = self
        let replaced = Set(other.samples.map(\.hash))
        merged.samples.removeAll { replaced.contains($0.hash) }
        for var sample in other.samples {
            sample.label = labels.firstIndex(of: other.labels[sample.label])!
            sample.name = "feedback/" + sample.name
            merged.samples.append(sample)
            merged.images[sample.hash] = other.images[sample.hash]
        }
        return merged
    }

    /// Throws INVALID_ARGUMENT naming the labels of this dataset's samples that `labels` lacks.
    public func checkLabels(within labels: [String]) throws {
        let used = Set(samples.map { self.labels[$0.label] })
        let unknown = used.filter { !labels.contains($0) }.sorted()
        guard unknown.isEmpty else {
            throw ClassificationError.invalid(
                "feedback label\(unknown.count == 1 ? "" : "s") \(unknown.joined(separator: ", ")) \(unknown.count == 1 ? "is" : "are") not among the dataset's labels (\(labels.joined(separator: ", ")))"
            )
        }
    }
}

/// Builds datasets from uploaded files, validating everything before anything is kept: the first problem throws
/// `invalidArgument` naming the image and the field, and no partial dataset exists.
public enum DatasetBuilder {
    /// The names of the images RGBImage decodes: what phones and cameras write (HEIC is the iPhone's default).
    public static let imageExtensions: Set<String> = ["png", "jpg", "jpeg", "webp", "heic", "heif"]
    public static let imageExtensionsText = "PNG, JPEG, WebP or HEIC"

    /// Whether a path names an image by its extension and is not hidden.
    public static func isImageName(_ path: String) -> Bool {
        let name = path.split(separator: "/").last.map(String.init) ?? ""
        return !name.hasPrefix(".") && imageExtensions.contains((name as NSString).pathExtension.lowercased())
    }

    /// A classifier's dataset from `label/name.ext` files (Create ML's folder layout). Files that are not images
    /// by extension and hidden files are left out (the upload names them); an image whose bytes do not decode is
    /// an error. `measured` holds the sizes of images already decoded as they arrived, which are not decoded again.
    public static func classification(
        files: [(path: String, bytes: [UInt8])],
        pixelLimit: Int = RGBImage.defaultPixelLimit,
        measured: [String: (width: Int, height: Int)] = [:]
    ) throws -> Dataset {
        var byLabel: [String: [(name: String, hash: String, width: Int, height: Int)]] = [:]
        var images: [String: [UInt8]] = [:]
        var labelOfHash: [String: (label: String, name: String)] = [:]
        for file in files.sorted(by: { $0.path < $1.path }) {
            let parts = file.path.split(separator: "/").map(String.init)
            guard let fileName = parts.last, !fileName.hasPrefix("."),
                imageExtensions.contains((fileName as NSString).pathExtension.lowercased())
            else { continue }
            guard parts.count >= 2, !parts[parts.count - 2].isEmpty else {
                throw ClassificationError.invalid(
                    "\(file.path): an image must be inside a folder named after its label")
            }
            let label = parts[parts.count - 2]
            let hash = SHA256.hex(file.bytes)
            if let seen = labelOfHash[hash] {
                guard seen.label == label else {
                    throw ClassificationError.invalid(
                        "\(file.path): the same image as \(seen.name) under another label (\(seen.label))")
                }
                continue  // a duplicate under the same label: stored and counted once
            }
            let image: (width: Int, height: Int)
            if let known = measured[file.path] {
                image = known
            } else {
                let decoded = try RGBImage.decode(file.bytes, name: file.path, pixelLimit: pixelLimit)
                image = (decoded.width, decoded.height)
            }
            labelOfHash[hash] = (label, file.path)
            images[hash] = file.bytes
            byLabel[label, default: []].append((file.path, hash, image.width, image.height))
        }
        let labels = byLabel.keys.sorted()
        guard labels.count >= 2 else {
            throw ClassificationError.invalid(
                "a classifier needs at least 2 labels (folders of images); found \(labels.count)\(labels.isEmpty ? "" : ": " + labels.joined(separator: ", "))"
            )
        }
        for label in labels where byLabel[label]!.count < 2 {
            throw ClassificationError.invalid(
                "label \(label) has \(byLabel[label]!.count) image; each label needs at least 2")
        }
        var samples: [Dataset.Sample] = []
        for (index, label) in labels.enumerated() {
            for entry in byLabel[label]! {
                samples.append(
                    Dataset.Sample(
                        name: entry.name, hash: entry.hash, width: entry.width,
                        height: entry.height, label: index, objects: []))
            }
        }
        return Dataset(kind: .classification, labels: labels, samples: samples, images: images)
    }

    /// Reads a classification folder from disk (`root/<label>/*.png|jpg|webp|heic`).
    public static func classification(directory: URL, pixelLimit: Int = RGBImage.defaultPixelLimit) throws -> Dataset {
        let manager = FileManager.default
        guard let labels = try? manager.contentsOfDirectory(atPath: directory.path) else {
            throw ClassificationError.invalid("\(directory.path): not a readable directory")
        }
        var files: [(path: String, bytes: [UInt8])] = []
        for label in labels where !label.hasPrefix(".") {
            let folder = directory.appendingPathComponent(label)
            guard let names = try? manager.contentsOfDirectory(atPath: folder.path) else { continue }
            for name in names {
                let url = folder.appendingPathComponent(name)
                guard isImageName(name) else { continue }
                files.append(("\(label)/\(name)", [UInt8](try Data(contentsOf: url))))
            }
        }
        return try classification(files: files, pixelLimit: pixelLimit)
    }

    /// A detector's dataset from Create ML's `annotations.json` and the images it names (by file name).
    public static func detection(
        annotations json: [UInt8], images files: [String: [UInt8]],
        pixelLimit: Int = RGBImage.defaultPixelLimit, skipped: Set<String> = []
    ) throws -> Dataset {
        try detection(format: .createML, annotations: json, files: files, pixelLimit: pixelLimit, skipped: skipped)
    }

    /// A detector's dataset from annotations in `format` and the uploaded files (the images, and for YOLO its label
    /// files and class names). Each format's boxes are converted to the one convention — pixels of the upright
    /// image, origin top-left — and each must lie inside its image (half a pixel of rounding allowed, then clipped).
    /// Images in `skipped` (left out of the upload as bad under `skip_bad`) are dropped with their boxes; `measured`
    /// holds the sizes of images already decoded as they arrived, which are not decoded again.
    public static func detection(
        format: AnnotationFormat, annotations json: [UInt8], files: [String: [UInt8]],
        pixelLimit: Int = RGBImage.defaultPixelLimit, skipped: Set<String> = [],
        measured: [String: (width: Int, height: Int)] = [:]
    ) throws -> Dataset {
        let annotated: [AnnotatedImage]
        switch format {
        case .createML: annotated = try CreateMLAnnotations.parse(json, files: files, skipped: skipped)
        case .coco: annotated = try COCOAnnotations.parse(json, files: files, skipped: skipped)
        case .yolo:
            guard json.isEmpty else {
                throw ClassificationError.invalid(
                    "annotations: YOLO's labels and class names are files of the upload; send no JSON")
            }
            annotated = try YOLOAnnotations.parse(files: files, skipped: skipped)
        }
        struct Pending {
            var name: String
            var hash: String
            var width: Int
            var height: Int
            var objects: [(String, Box)]
        }
        var pending: [Pending] = []
        var images: [String: [UInt8]] = [:]
        for entry in annotated {
            let bytes = files[entry.file]!
            let size: (width: Int, height: Int)
            if let known = measured[entry.file] {
                size = known
            } else {
                let image = try RGBImage.decode(bytes, name: entry.name, pixelLimit: pixelLimit)
                size = (image.width, image.height)
            }
            if let declared = entry.declaredSize, (declared.width, declared.height) != size,
                (declared.height, declared.width) != size
            {
                throw ClassificationError.invalid(
                    "\(declared.field): declares \(declared.width)×\(declared.height) but the image is \(size.width)×\(size.height)"
                )
            }
            let objects = try entry.boxes.map { source in
                (source.label, try pixelBox(source, width: size.width, height: size.height))
            }
            images[SHA256.hex(bytes)] = bytes
            pending.append(
                Pending(
                    name: entry.name, hash: SHA256.hex(bytes), width: size.width, height: size.height, objects: objects)
            )
        }
        let labels = Set(pending.flatMap { $0.objects.map(\.0) }).sorted()
        guard !labels.isEmpty else {
            throw ClassificationError.invalid(
                "\(format == .createML ? "annotations.json" : format == .coco ? COCOAnnotations.source : "YOLO labels"): no annotated objects"
            )
        }
        var perLabel: [String: Int] = [:]
        for p in pending { for label in Set(p.objects.map(\.0)) { perLabel[label, default: 0] += 1 } }
        for label in labels where perLabel[label]! < 2 {
            throw ClassificationError.invalid(
                "label \(label) appears in \(perLabel[label]!) image; each label needs at least 2")
        }
        let index = Dictionary(uniqueKeysWithValues: labels.enumerated().map { ($1, $0) })
        let samples = pending.map { p in
            Dataset.Sample(
                name: p.name, hash: p.hash, width: p.width, height: p.height, label: -1,
                objects: p.objects.map { Dataset.Object(label: index[$0.0]!, box: $0.1) })
        }
        return Dataset(kind: .detection, labels: labels, samples: samples, images: images)
    }

    /// A format's box in the service's convention, checked against its image: positive size, inside the image
    /// (half a pixel of rounding allowed past an edge, then clipped to it).
    static func pixelBox(_ source: SourceBox, width: Int, height: Int) throws -> Box {
        let box: Box
        switch source.coordinates {
        case .pixels(let pixels): box = pixels
        case .normalised(let centerX, let centerY, let boxWidth, let boxHeight):
            box = Box(
                centerX: centerX * Double(width), centerY: centerY * Double(height),
                width: boxWidth * Double(width), height: boxHeight * Double(height))
        }
        guard box.width > 0, box.height > 0 else {
            throw ClassificationError.invalid("\(source.field): width and height must be positive")
        }
        let slack = 0.5
        guard box.minX >= -slack, box.minY >= -slack, box.maxX <= Double(width) + slack,
            box.maxY <= Double(height) + slack
        else {
            throw ClassificationError.invalid(
                "\(source.field): box \(box.minX)…\(box.maxX) × \(box.minY)…\(box.maxY) lies outside the \(width)×\(height) image"
            )
        }
        return Box(
            x: max(0, box.minX), y: max(0, box.minY),
            width: min(Double(width), box.maxX) - max(0, box.minX),
            height: min(Double(height), box.maxY) - max(0, box.minY))
    }

    /// Reads a detection dataset from disk: the annotations file and the images beside it (or in `imagesDirectory`).
    public static func detection(
        annotationsFile: URL, imagesDirectory: URL? = nil,
        pixelLimit: Int = RGBImage.defaultPixelLimit
    ) throws -> Dataset {
        let json = [UInt8](try Data(contentsOf: annotationsFile))
        let folder = imagesDirectory ?? annotationsFile.deletingLastPathComponent()
        let names = (try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []
        var files: [String: [UInt8]] = [:]
        let wanted = Set(
            ((try? JSONSerialization.jsonObject(with: Data(json))) as? [[String: Any]] ?? [])
                .compactMap { $0["image"] as? String })
        for name in names where wanted.contains(name) {
            files[name] = [UInt8](try Data(contentsOf: folder.appendingPathComponent(name)))
        }
        return try detection(annotations: json, images: files, pixelLimit: pixelLimit)
    }
}
