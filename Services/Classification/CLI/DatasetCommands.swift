import ArgumentParser
import ClassificationAPI
import Foundation
import GatewayKit
import RPC
import Schema

struct DatasetCommands: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "dataset", abstract: "Labelled photos to train and evaluate on: create, list, show, delete.",
        subcommands: [DatasetCreate.self, DatasetList.self, DatasetShow.self, DatasetDelete.self])
}

struct DatasetCreate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "create",
        abstract:
            "Upload a dataset: a folder of label folders or YOLO's folders (--from), or Create ML's or COCO's JSON with its images (--annotations).",
        discussion: """
            --from DIR takes DIR/<label>/*.png|jpg|webp|heic (a classifier's dataset); other files are named on \
            standard error and left out. A detector's dataset comes in one of three formats (--format; by default \
            read from the files): createml, --annotations FILE with Create ML's \
            [{"image", "annotations": [{"label", "coordinates": {"x", "y", "width", "height"}}]}] (x, y the box centre, \
            pixels); coco, --annotations FILE with COCO's {"images": [{"id", "file_name", "width", "height"}], \
            "annotations": [{"image_id", "category_id", "bbox": [x, y, width, height]}], "categories": [{"id", "name"}]} \
            (x, y the top-left corner, pixels), each with the images it names from the file's folder or --images DIR; \
            yolo, --from DIR holding images/ (any depth) and labels/ with one <image's name>.txt per image of \
            "class cx cy w h" lines (normalised to 0-1; no file: no objects) and the class names in a *.yaml at DIR's \
            top (names: [a, b] or {0: a, 1: b}) or a classes.txt (one a line) — a DIR with images/ and labels/ folders \
            is taken as YOLO's unless --format createml says it is label folders. Every format is stored in one \
            convention (pixels, origin top-left) and a box outside its image, a class unknown, an image the \
            annotations name but that is missing are refused naming the file and field. The \
            service decodes each image as it arrives: a truncated or damaged one ends the upload at once, naming the \
            file, and nothing is kept; with --skip-bad such images are left out and named (standard error; "skipped" \
            under --json) and the rest is kept.
            """)

    @Argument(help: "The dataset's name.") var name: String
    @Option(
        name: .customLong("from"),
        help:
            "A folder of label folders of images (a classification dataset), or YOLO's images/ and labels/ (a detection dataset) (default: none, give this or --annotations).",
        completion: .directory) var directory: String?
    @Option(
        help: "Create ML's annotations.json or COCO's JSON (a detection dataset; default: none, give this or --from).",
        completion: .file(extensions: ["json"])) var annotations: String?
    @Option(help: "Where the annotated images are (default: the annotations file's folder).", completion: .directory)
    var images: String?
    @Option(
        help:
            "How a detection dataset is annotated: createml, yolo or coco (default: read from the files given, else createml)."
    )
    var format: DatasetAnnotationFormat?
    @Flag(
        name: .customLong("skip-bad"),
        help:
            "Leave out images that do not decode (truncated, damaged) and name them, instead of refusing the upload (default: refuse)."
    )
    var skipBad = false
    @OptionGroup var global: GlobalOptions

    func validate() throws {
        guard (directory == nil) != (annotations == nil) else {
            throw ValidationError("give --from DIR or --annotations FILE")
        }
        if images != nil, annotations == nil { throw ValidationError("--images goes with --annotations") }
        if format == .yolo, annotations != nil {
            throw ValidationError(
                "--format yolo takes --from DIR (images/, labels/ and data.yaml or classes.txt), not --annotations")
        }
        if format == .coco, directory != nil {
            throw ValidationError("--format coco takes --annotations FILE (COCO's JSON), not --from")
        }
    }

    func run() async throws {
        if let directory { try InputFile.check(directory, directory: true, role: "--from") }
        if let annotations { try InputFile.check(annotations, role: "--annotations") }
        try await global.withClassification { client in
            var header = ClassificationV1.DatasetUploadHeader()
            header.name = name
            header.skipBad = skipBad
            let files: [(path: String, url: URL)]
            if let directory {
                let root = URL(fileURLWithPath: directory)
                if format == .yolo || (format == nil && Self.looksLikeYOLO(root)) {
                    header.kind = .detection
                    header.annotationFormat = .yolo
                    files = try Self.yoloFiles(root)
                } else {
                    header.kind = .classification
                    files = try Self.labelFolders(root)
                }
            } else {
                header.kind = .detection
                let json = try readFile(annotations!)
                header.annotations = json
                let parsed = try? JSONParser.parse(json)
                let coco = format == .coco || (format == nil && parsed?.objectValue != nil)
                header.annotationFormat = coco ? .coco : .createml
                let folder =
                    images.map { URL(fileURLWithPath: $0) }
                    ?? URL(fileURLWithPath: annotations!).deletingLastPathComponent()
                files = coco ? Self.cocoImages(parsed, folder) : try Self.annotatedImages(json, folder)
            }
            header.fileCount = Int64(files.count)
            header.totalBytes = files.reduce(0) {
                $0 + Int64((try? $1.url.resourceValues(forKeys: [.fileSizeKey]).fileSize) ?? 0)
            }
            let showProgress = !global.json
            let head = header
            let summary = try await client.uploadDataset(options: global.longCallOptions) { writer in
                try await writer.send(ClassificationV1.UploadDatasetRequest(header: head, chunk: nil))
                let display = showProgress ? ProgressDisplay() : nil
                // A redrawn bar moves by the percent; a log gets a line per tenth.
                let step = isatty(STDERR_FILENO) == 1 ? 1 : 10
                var sent: Int64 = 0
                var lastPercent = -1
                for file in files {
                    let data = try InputFile.read(file.url.path)
                    let bytes = Array(data)
                    var offset = 0
                    let piece = 1 << 20
                    repeat {
                        let end = min(bytes.count, offset + piece)
                        try await writer.send(
                            ClassificationV1.UploadDatasetRequest(
                                header: nil,
                                chunk: ClassificationV1.FileChunk(
                                    path: file.path, data: Array(bytes[offset..<end]), last: end == bytes.count)))
                        offset = end
                    } while offset < bytes.count
                    sent += Int64(bytes.count)
                    let fraction = head.totalBytes > 0 ? Double(sent) / Double(head.totalBytes) : 1
                    if Int(fraction * 100) / step != lastPercent {
                        lastPercent = Int(fraction * 100) / step
                        display?.update(fraction: fraction, message: "uploading \(file.path)")
                    }
                }
                display?.update(fraction: 1, message: "validating")
                display?.finish()
            }
            // What was left out goes to standard error whatever the output: the results stay on standard output.
            if !global.json {
                for file in summary.skipped { writeStandardError("skipped \(file.path): \(file.reason)\n") }
            }
            try global.render(summary, text: { print(datasetText(summary)) })
        }
    }

    static let imageExtensions = Set(photoExtensions)

    static func labelFolders(_ root: URL) throws -> [(path: String, url: URL)] {
        let manager = FileManager.default
        guard let labels = try? manager.contentsOfDirectory(atPath: root.path) else {
            throw FileError(.unreadable, path: root.path, reason: "not a readable directory", role: "--from")
        }
        var files: [(String, URL)] = []
        for label in labels.sorted() where !label.hasPrefix(".") {
            let folder = root.appendingPathComponent(label)
            guard let names = try? manager.contentsOfDirectory(atPath: folder.path) else { continue }
            for name in names.sorted() where !name.hasPrefix(".") {
                guard imageExtensions.contains((name as NSString).pathExtension.lowercased()) else {
                    // Never silently: a photo in a format the service does not read is named.
                    writeStandardError(
                        "skipped \(label)/\(name): not an image by its name (PNG, JPEG, WebP or HEIC expected)\n")
                    continue
                }
                files.append(("\(label)/\(name)", folder.appendingPathComponent(name)))
            }
        }
        guard !files.isEmpty else {
            throw RPCError(.invalidArgument, "\(root.path): no label folders with PNG, JPEG, WebP or HEIC images")
        }
        return files
    }

    /// A folder in YOLO's layout: `images/` and `labels/` folders side by side.
    static func looksLikeYOLO(_ root: URL) -> Bool {
        var isDirectory: ObjCBool = false
        return ["images", "labels"].allSatisfy {
            FileManager.default.fileExists(atPath: root.appendingPathComponent($0).path, isDirectory: &isDirectory)
                && isDirectory.boolValue
        }
    }

    /// A YOLO dataset's files under `root`, named by their paths below it: images under an `images/` folder, the
    /// `.txt` files under a `labels/` folder, the `*.yaml` at the top and any `classes.txt`; other files are named
    /// on standard error and left out.
    static func yoloFiles(_ root: URL) throws -> [(path: String, url: URL)] {
        guard let walker = FileManager.default.enumerator(at: root, includingPropertiesForKeys: [.isRegularFileKey])
        else {
            throw FileError(.unreadable, path: root.path, reason: "not a readable directory", role: "--from")
        }
        let base = root.standardizedFileURL.resolvingSymlinksInPath().path
        var files: [(String, URL)] = []
        for case let url as URL in walker {
            guard (try? url.resourceValues(forKeys: [.isRegularFileKey]).isRegularFile) == true else { continue }
            let full = url.standardizedFileURL.resolvingSymlinksInPath().path
            guard full.hasPrefix(base + "/") else { continue }
            let path = String(full.dropFirst(base.count + 1))
            let parts = path.split(separator: "/").map(String.init)
            let name = parts.last ?? ""
            if parts.contains(where: { $0.hasPrefix(".") }) { continue }
            let fileExtension = (name as NSString).pathExtension.lowercased()
            let folders = parts.dropLast()
            let wanted =
                (imageExtensions.contains(fileExtension) && folders.contains("images"))
                || (fileExtension == "txt" && (folders.contains("labels") || name == "classes.txt"))
                || (["yaml", "yml"].contains(fileExtension) && folders.isEmpty)
            if wanted {
                files.append((path, url))
            } else {
                writeStandardError(
                    "skipped \(path): not an image under images/, a label file under labels/, a *.yaml at the top or classes.txt\n"
                )
            }
        }
        guard !files.isEmpty else {
            throw RPCError(.invalidArgument, "\(root.path): no YOLO images/ and labels/ files")
        }
        return files.sorted { $0.0 < $1.0 }
    }

    /// The images COCO's JSON lists (`images[].file_name`); those missing are left for the service to name.
    static func cocoImages(_ parsed: JSONValue?, _ folder: URL) -> [(path: String, url: URL)] {
        var seen: Set<String> = []
        var files: [(String, URL)] = []
        for image in parsed?["images"]?.arrayValue ?? [] {
            guard let name = image["file_name"]?.stringValue, !name.isEmpty, seen.insert(name).inserted else {
                continue
            }
            let url = folder.appendingPathComponent(name)
            if FileManager.default.fileExists(atPath: url.path) { files.append((name, url)) }
        }
        return files
    }

    /// The images an annotations file names (those missing are left for the service to name in its answer).
    static func annotatedImages(_ json: [UInt8], _ folder: URL) throws -> [(path: String, url: URL)] {
        let entries = (try? JSONParser.parse(json))?.arrayValue ?? []
        var seen: Set<String> = []
        var files: [(String, URL)] = []
        for entry in entries {
            guard let image = entry["image"]?.stringValue, !image.isEmpty, seen.insert(image).inserted else { continue }
            let url = folder.appendingPathComponent(image)
            if FileManager.default.fileExists(atPath: url.path) { files.append((image, url)) }
        }
        return files
    }
}

/// `--format` of `dataset create`.
enum DatasetAnnotationFormat: String, CaseIterable, ExpressibleByArgument {
    case createml, yolo, coco
}

struct DatasetList: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "list", abstract: "Every dataset with its kind, images and labels.")
    @OptionGroup var global: GlobalOptions

    func run() async throws {
        try await global.withClassification { client in
            let reply = try await client.listDatasets(
                ClassificationV1.ListDatasetsRequest(), options: global.callOptions)
            try global.render(
                reply,
                text: {
                    printTable(
                        ["NAME", "KIND", "IMAGES", "LABELS", "CREATED"],
                        reply.datasets.map {
                            [$0.name, kindName($0.kind), "\($0.images)", "\($0.labels.count)", isoDate($0.createdAt)]
                        })
                })
        }
    }
}

struct DatasetShow: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "show", abstract: "A dataset's counts per label.")
    @Argument(help: "The dataset's name.") var name: String
    @OptionGroup var global: GlobalOptions

    func run() async throws {
        try await global.withClassification { client in
            let d = try await client.getDataset(
                ClassificationV1.GetDatasetRequest(name: name), options: global.callOptions)
            try global.render(d, text: { print(datasetText(d)) })
        }
    }
}

struct DatasetDelete: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "delete", abstract: "Delete a dataset (its images unless another dataset has them).",
        discussion: "--json prints the empty DeleteDatasetResponse: {}.")
    @Argument(help: "The dataset's name.") var name: String
    @OptionGroup var global: GlobalOptions

    func run() async throws {
        try await global.withClassification { client in
            let reply = try await client.deleteDataset(
                ClassificationV1.DeleteDatasetRequest(name: name), options: global.callOptions)
            try global.render(reply, text: { print("deleted dataset \(name)") })
        }
    }
}
