import ArgumentParser
import ClassificationAPI
import Foundation
import GatewayKit
import JobsAPI
import RPC
import Schema

/// `gateway classify …`: datasets, training, evaluation, predictions, models, the catalogue and feedback of the
/// classification service.
public struct ClassificationCommands: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "classify",
        abstract: "Train image classifiers and object detectors from labelled photos, evaluate them, and classify or detect.",
        discussion: "Bad input exits with the status code of INVALID_ARGUMENT (3), unknown datasets or models with NOT_FOUND (5), and so on.",
        subcommands: [
            DatasetCommands.self, Train.self, Evaluate.self, ClassifyImage.self, Detect.self, ModelCommands.self,
            CatalogueCommands.self, Feedback.self, JobsCommands<ClassificationCommands>.self,
        ])

    public init() {}
}

extension ClassificationCommands: JobsCommandService {
    public static let serviceName = "classification"
}

extension GlobalOptions {
    func withClassification(_ body: (ClassificationV1.Classification.Client) async throws -> Void) async throws {
        try await withClient(for: "classification", ClassificationV1.Classification.Client.init(wrapping:), body)
    }

    /// Uploads and trainings carry or wait for much more than a quick call: at least five minutes.
    var longCallOptions: CallOptions { CallOptions(timeout: .milliseconds(Int64(max(timeout, 300) * 1000))) }
}

func readFile(_ path: String) throws -> [UInt8] {
    guard let data = FileManager.default.contents(atPath: path) else { throw RPCError(.invalidArgument, "cannot read \(path)") }
    return Array(data)
}

func percent(_ value: Double) -> String { String(format: "%.1f%%", value * 100) }

// MARK: Datasets

struct DatasetCommands: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "dataset", abstract: "Labelled photos to train and evaluate on: create, list, show, delete.",
        subcommands: [DatasetCreate.self, DatasetList.self, DatasetShow.self, DatasetDelete.self])
}

struct DatasetCreate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "create",
        abstract: "Upload a dataset: a folder of label folders (--from) or Create ML's annotations.json with its images (--annotations).",
        discussion: """
            --from DIR takes DIR/<label>/*.png|jpg (a classifier's dataset). --annotations FILE takes Create ML's \
            [{"image", "annotations": [{"label", "coordinates": {"x", "y", "width", "height"}}]}] (box centre and size \
            in pixels) and the images it names from the file's folder or --images DIR (a detector's dataset). The \
            service validates everything and keeps nothing when anything is wrong.
            """)

    @Argument(help: "The dataset's name.") var name: String
    @Option(name: .customLong("from"), help: "A folder of label folders of images.") var directory: String?
    @Option(help: "Create ML's annotations.json (a detection dataset).") var annotations: String?
    @Option(help: "Where the annotated images are (default: the annotations file's folder).") var images: String?
    @OptionGroup var global: GlobalOptions

    func validate() throws {
        guard (directory == nil) != (annotations == nil) else { throw ValidationError("give --from DIR or --annotations FILE") }
        if images != nil, annotations == nil { throw ValidationError("--images goes with --annotations") }
    }

    func run() async throws {
        try await global.withClassification { client in
            var header = ClassificationV1.DatasetUploadHeader()
            header.name = name
            let files: [(path: String, url: URL)]
            if let directory {
                header.kind = .classification
                files = try Self.labelFolders(URL(fileURLWithPath: directory))
            } else {
                header.kind = .detection
                let json = try readFile(annotations!)
                header.annotations = json
                let folder = images.map { URL(fileURLWithPath: $0) } ?? URL(fileURLWithPath: annotations!).deletingLastPathComponent()
                files = try Self.annotatedImages(json, folder)
            }
            header.fileCount = Int64(files.count)
            header.totalBytes = files.reduce(0) { $0 + Int64((try? $1.url.resourceValues(forKeys: [.fileSizeKey]).fileSize) ?? 0) }
            let showProgress = !global.json
            let head = header
            let summary = try await client.uploadDataset(options: global.longCallOptions) { writer in
                try await writer.send(ClassificationV1.UploadDatasetRequest(header: head, chunk: nil))
                let display = showProgress ? ProgressDisplay() : nil
                // A redrawn bar moves by the percent; a log gets a line per tenth.
                let step = isatty(STDOUT_FILENO) == 1 ? 1 : 10
                var sent: Int64 = 0
                var lastPercent = -1
                for file in files {
                    guard let data = FileManager.default.contents(atPath: file.url.path) else {
                        throw RPCError(.invalidArgument, "cannot read \(file.url.path)")
                    }
                    let bytes = Array(data)
                    var offset = 0
                    let piece = 1 << 20
                    repeat {
                        let end = min(bytes.count, offset + piece)
                        try await writer.send(ClassificationV1.UploadDatasetRequest(
                            header: nil, chunk: ClassificationV1.FileChunk(path: file.path, data: Array(bytes[offset..<end]), last: end == bytes.count)))
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
            try global.render(json: { datasetJSON(summary) }, text: { print(datasetText(summary)) })
        }
    }

    static let imageExtensions: Set<String> = ["png", "jpg", "jpeg"]

    static func labelFolders(_ root: URL) throws -> [(path: String, url: URL)] {
        let manager = FileManager.default
        guard let labels = try? manager.contentsOfDirectory(atPath: root.path) else {
            throw RPCError(.invalidArgument, "\(root.path): not a readable directory")
        }
        var files: [(String, URL)] = []
        for label in labels.sorted() where !label.hasPrefix(".") {
            let folder = root.appendingPathComponent(label)
            guard let names = try? manager.contentsOfDirectory(atPath: folder.path) else { continue }
            for name in names.sorted() where !name.hasPrefix(".") && imageExtensions.contains((name as NSString).pathExtension.lowercased()) {
                files.append(("\(label)/\(name)", folder.appendingPathComponent(name)))
            }
        }
        guard !files.isEmpty else { throw RPCError(.invalidArgument, "\(root.path): no label folders with PNG or JPEG images") }
        return files
    }

    /// The images an annotations file names (those missing are left for the service to name in its answer).
    static func annotatedImages(_ json: [UInt8], _ folder: URL) throws -> [(path: String, url: URL)] {
        let entries = (try? JSONSerialization.jsonObject(with: Data(json))) as? [Any] ?? []
        var seen: Set<String> = []
        var files: [(String, URL)] = []
        for case let entry as [String: Any] in entries {
            guard let image = entry["image"] as? String, !image.isEmpty, seen.insert(image).inserted else { continue }
            let url = folder.appendingPathComponent(image)
            if FileManager.default.fileExists(atPath: url.path) { files.append((image, url)) }
        }
        return files
    }
}

func kindName(_ kind: ClassificationV1.DatasetKind) -> String { kind == .detection ? "detection" : "classification" }

func datasetJSON(_ d: ClassificationV1.DatasetSummary) -> [String: Any] {
    [
        "name": d.name, "kind": kindName(d.kind), "images": d.images, "duplicates": d.duplicates, "created_at": isoDate(d.createdAt),
        "labels": Dictionary(uniqueKeysWithValues: d.labels.map { ($0.label, d.kind == .detection ? ["images": $0.images, "objects": $0.objects] as [String: Any] : ["images": $0.images]) }),
    ]
}

func datasetText(_ d: ClassificationV1.DatasetSummary) -> String {
    var lines = ["\(d.name): \(kindName(d.kind)), \(d.images) images, \(d.labels.count) labels"
        + (d.duplicates > 0 ? " (\(d.duplicates) duplicates stored once)" : "")]
    for label in d.labels {
        lines.append("  \(label.label): \(label.images) images" + (d.kind == .detection ? ", \(label.objects) objects" : ""))
    }
    return lines.joined(separator: "\n")
}

struct DatasetList: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "list", abstract: "Every dataset with its kind, images and labels.")
    @OptionGroup var global: GlobalOptions

    func run() async throws {
        try await global.withClassification { client in
            let reply = try await client.listDatasets(ClassificationV1.ListDatasetsRequest(), options: global.callOptions)
            try global.render(json: { ["datasets": reply.datasets.map(datasetJSON)] }, text: {
                printTable(["NAME", "KIND", "IMAGES", "LABELS", "CREATED"], reply.datasets.map {
                    [$0.name, kindName($0.kind), "\($0.images)", "\($0.labels.count)", isoDate($0.createdAt)]
                })
            })
        }
    }
}

struct DatasetShow: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "show", abstract: "A dataset's counts per label.")
    @Argument var name: String
    @OptionGroup var global: GlobalOptions

    func run() async throws {
        try await global.withClassification { client in
            let d = try await client.getDataset(ClassificationV1.GetDatasetRequest(name: name), options: global.callOptions)
            try global.render(json: { datasetJSON(d) }, text: { print(datasetText(d)) })
        }
    }
}

struct DatasetDelete: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "delete", abstract: "Delete a dataset (its images unless another dataset has them).")
    @Argument var name: String
    @OptionGroup var global: GlobalOptions

    func run() async throws {
        try await global.withClassification { client in
            _ = try await client.deleteDataset(ClassificationV1.DeleteDatasetRequest(name: name), options: global.callOptions)
            try global.render(json: { ["deleted": name] }, text: { print("deleted dataset \(name)") })
        }
    }
}

// MARK: Training and evaluation

struct Train: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "train",
        abstract: "Train a classifier or detector on a dataset; follows the job with a progress bar and prints the model.",
        discussion: """
            Algorithms: cnn (a small residual network, the classifier default), features (HOG and colour histograms \
            with a linear model, trained in seconds), yolo (the detector). --base MODEL fine-tunes another model's \
            trained layers: a cnn classifier for a classifier; a cnn classifier or a yolo detector for a detector. The same --seed and data give the same model. --detach prints the job and \
            returns (gateway classify jobs watch ID).
            """)

    @Option var dataset: String
    @Option(help: "classifier or detector.") var kind = "classifier"
    @Option(help: "cnn, features or yolo.") var algorithm: String?
    @Option(help: "Start from this model's layers (a cnn classifier; or a yolo detector, for a detector).") var base: String?
    @Option(help: "The model's name (default DATASET-ALGORITHM-N).") var name: String?
    @Option var epochs: Int32?
    @Option var seed: UInt64?
    @Option(name: .customLong("image-size"), help: "Side of the square network input.") var imageSize: Int32?
    @Option(name: .customLong("validation-dataset")) var validationDataset: String?
    @Option(name: .customLong("validation-fraction"), help: "Held out per label (default 0.1).") var validationFraction: Double?
    @Option(help: "Augmentations, comma-separated: flip, crop, rotation, blur, exposure, noise; or none (default: cnn crop,rotation; others none).") var augment: String?
    @Flag(name: .customLong("include-feedback"), help: "Add the photos kept by `gateway classify feedback --consent` (their labels must be the dataset's).") var includeFeedback = false
    @Flag(help: "Print the job and return at once.") var detach = false
    @OptionGroup var global: GlobalOptions

    func request() throws -> ClassificationV1.TrainRequest {
        var request = ClassificationV1.TrainRequest()
        request.dataset = dataset
        switch kind.lowercased() {
        case "classifier": request.kind = .classifier
        case "detector": request.kind = .detector
        default: throw ValidationError("--kind must be classifier or detector")
        }
        request.algorithm = algorithm ?? ""
        request.name = name ?? ""
        request.baseModel = base
        request.epochs = epochs
        request.seed = seed
        request.imageSize = imageSize
        request.validationDataset = validationDataset
        request.validationFraction = validationFraction
        if let augment {
            var a = ClassificationV1.Augmentation()
            for item in augment.split(separator: ",").map({ $0.trimmingCharacters(in: .whitespaces).lowercased() }) {
                switch item {
                case "none": break
                case "flip": a.flip = true
                case "crop": a.crop = 0.1
                case "rotation": a.rotation = 10
                case "blur": a.blur = true
                case "exposure": a.exposure = 0.2
                case "noise": a.noise = 0.03
                default: throw ValidationError("--augment: unknown augmentation \(item)")
                }
            }
            request.augmentation = a
        }
        request.includeFeedback = includeFeedback
        return request
    }

    func run() async throws {
        let request = try request()
        try await global.withClient(for: "classification", { $0 }) { rpc in
            let client = ClassificationV1.Classification.Client(wrapping: rpc)
            let job = try await client.train(request, options: global.callOptions)
            if detach {
                try global.render(job, text: { print("started job \(job.id); follow it with: gateway classify jobs watch \(job.id)") })
                return
            }
            let ended = try await followJob(job.id, with: JobsV1.Jobs.Client(wrapping: rpc), display: global.json ? nil : ProgressDisplay())
            guard let result = try ended.requireResult(), result.typeName == ClassificationV1.TrainingResult.protoName,
                  let model = try ClassificationV1.TrainingResult(serializedBytes: result.value).model else {
                throw RPCError(.internalError, "training job \(job.id) ended without its model")
            }
            try global.render(json: {
                ["model": model.name, "training_accuracy": jsonValue(model.trainingAccuracy),
                 "validation_accuracy": jsonValue(model.validationAccuracy), "seconds": model.trainingSeconds,
                 "map50": jsonValue(model.map50), "map50_95": jsonValue(model.map5095),
                 "training_images": jsonValue(model.trainingImages)]
            }, text: { print(modelText(model)) })
        }
    }
}

func modelKindName(_ kind: ClassificationV1.ModelKind) -> String { kind == .detector ? "detector" : "classifier" }

func modelJSON(_ m: ClassificationV1.ModelSummary) -> [String: Any] {
    [
        "name": m.name, "kind": modelKindName(m.kind), "algorithm": m.algorithm, "labels": m.labels,
        "input": ["width": m.inputWidth, "height": m.inputHeight], "training_accuracy": jsonValue(m.trainingAccuracy),
        "validation_accuracy": jsonValue(m.validationAccuracy), "map50": jsonValue(m.map50), "map50_95": jsonValue(m.map5095),
        "seconds": m.trainingSeconds, "size": m.size, "created_at": isoDate(m.createdAt), "active": m.active,
        "training_images": jsonValue(m.trainingImages),
    ]
}

func modelText(_ m: ClassificationV1.ModelSummary) -> String {
    var figures: [String] = []
    if let a = m.trainingAccuracy { figures.append("training \(percent(a))") }
    if let a = m.validationAccuracy { figures.append("validation \(percent(a))") }
    if let a = m.map50 { figures.append(String(format: "mAP50 %.3f", a)) }
    if let a = m.map5095 { figures.append(String(format: "mAP50:95 %.3f", a)) }
    if let n = m.trainingImages { figures.append("\(n) training images") }
    return "\(m.name): \(m.algorithm) \(modelKindName(m.kind)), \(m.labels.count) labels, input \(m.inputWidth)×\(m.inputHeight)"
        + (figures.isEmpty ? "" : ", " + figures.joined(separator: ", "))
        + (m.trainingSeconds > 0 ? String(format: ", trained in %.1f s", m.trainingSeconds) : "")
        + (m.active ? " (active)" : "")
}

struct Evaluate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "evaluate",
        abstract: "Accuracy, per-class precision/recall/F1 and the confusion matrix (classifiers), AP at IoU 0.5 and 0.5:0.95 (detectors).")

    @Argument var model: String
    @Argument var dataset: String
    @OptionGroup var global: GlobalOptions

    func run() async throws {
        try await global.withClassification { client in
            let r = try await client.evaluate(ClassificationV1.EvaluateRequest(model: model, dataset: dataset), options: global.longCallOptions)
            try global.render(json: {
                [
                    "accuracy": r.map50 == nil ? r.accuracy as Any : NSNull(), "images": r.images, "labels": r.labels,
                    "per_class": Dictionary(uniqueKeysWithValues: r.perClass.map { c in
                        (c.label, ["precision": c.precision, "recall": c.recall, "f1": c.f1, "ap50": jsonValue(c.ap50),
                                   "ap50_95": jsonValue(c.ap5095)] as [String: Any])
                    }),
                    "confusion": r.confusion.map(\.predicted), "map50": jsonValue(r.map50), "map50_95": jsonValue(r.map5095),
                ]
            }, text: {
                if let map50 = r.map50 {
                    print(String(format: "%lld images: mAP50 %.3f, mAP50:95 %.3f", r.images, map50, r.map5095 ?? 0))
                    printTable(["LABEL", "AP50", "AP50:95"], r.perClass.map { [$0.label, String(format: "%.3f", $0.ap50 ?? 0), String(format: "%.3f", $0.ap5095 ?? 0)] })
                } else {
                    print("\(r.images) images: accuracy \(percent(r.accuracy))")
                    printTable(["LABEL", "PRECISION", "RECALL", "F1"], r.perClass.map {
                        [$0.label, String(format: "%.3f", $0.precision), String(format: "%.3f", $0.recall), String(format: "%.3f", $0.f1)]
                    })
                    print("confusion (rows: truth, columns: predicted \(r.labels.joined(separator: " ")))")
                    for row in r.confusion { print("  \(row.label): \(row.predicted.map(String.init).joined(separator: " "))") }
                }
            })
        }
    }
}

// MARK: Prediction

struct ClassifyImage: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "image", abstract: "Classify photos: the top labels with their confidences, and the catalogue entry of the best.")

    @Argument(help: "PNG or JPEG files.") var photos: [String]
    @Option(help: "The model (default: the active classifier).") var model: String?
    @Option(help: "How many labels (default 5).") var top: Int32?
    @Option(help: "fit (default), fill or center-crop.") var scaling: String?
    @Option(name: .customLong("min-confidence"), help: "Below this the answer is \"nothing recognised\".") var minConfidence: Double?
    @OptionGroup var global: GlobalOptions

    func validate() throws {
        if photos.isEmpty { throw ValidationError("give at least one photo") }
        if let scaling, !["fit", "fill", "center-crop"].contains(scaling) { throw ValidationError("--scaling must be fit, fill or center-crop") }
    }

    var scalingValue: ClassificationV1.Scaling {
        switch scaling {
        case "fill": .fill
        case "center-crop": .centerCrop
        case "fit": .fit
        default: .unspecified
        }
    }

    func run() async throws {
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
            try global.render(json: { Self.json(answers) }, text: { Self.text(answers) })
        }
    }

    static func json(_ answers: [(String, ClassificationV1.ClassifyResponse)]) -> Any {
        var items: [[String: Any]] = []
        for (file, r) in answers {
            let labels: [[String: Any]] = r.labels.map { ["label": $0.label, "confidence": $0.confidence] }
            items.append(["file": file, "model": r.model, "recognised": r.recognised, "labels": labels,
                          "entry": jsonValue(r.entry.map(entryJSON))])
        }
        if items.count == 1 { return items[0] }
        let all: [String: Any] = ["images": items]
        return all
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
    static let configuration = CommandConfiguration(commandName: "detect", abstract: "Detect objects in photos: labelled boxes.")

    @Argument(help: "PNG or JPEG files.") var photos: [String]
    @Option(help: "The model (default: the active detector).") var model: String?
    @Option(help: "Only this label (repeatable).") var only: [String] = []
    @Option(help: "Confidence threshold (default 0.25).") var confidence: Double?
    @Option(help: "NMS IoU threshold (default 0.45).") var iou: Double?
    @Option(name: .customLong("max"), help: "Most detections (default 100).") var maximum: Int32?
    @OptionGroup var global: GlobalOptions

    func validate() throws { if photos.isEmpty { throw ValidationError("give at least one photo") } }

    func run() async throws {
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
            try global.render(json: { Self.json(answers) }, text: { Self.text(answers) })
        }
    }

    static func box(_ b: ClassificationV1.Box?) -> [String: Any] {
        let b = b ?? ClassificationV1.Box()
        return ["x": b.x, "y": b.y, "width": b.width, "height": b.height]
    }

    static func json(_ answers: [(String, ClassificationV1.DetectResponse)]) -> Any {
        var items: [[String: Any]] = []
        for (file, r) in answers {
            var detections: [[String: Any]] = []
            for d in r.detections {
                detections.append(["label": d.label, "confidence": d.confidence, "box": box(d.box), "box_px": box(d.boxPx)])
            }
            items.append(["file": file, "model": r.model, "width": r.imageWidth, "height": r.imageHeight, "detections": detections])
        }
        if items.count == 1 { return items[0] }
        let all: [String: Any] = ["images": items]
        return all
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

func entryJSON(_ e: ClassificationV1.CatalogueEntry) -> [String: Any] {
    ["label": e.label, "name": e.name, "local_name": e.localName,
     "attributes": Dictionary(e.attributes.map { ($0.key, $0.value) }, uniquingKeysWith: { a, _ in a })]
}

// MARK: Catalogue and feedback

struct CatalogueCommands: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "catalogue", abstract: "Entries shown beside a label (a breed's name, fur, size…): import, search, show.",
        subcommands: [CatalogueImport.self, CatalogueSearch.self, CatalogueShow.self])
}

struct CatalogueImport: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "import", abstract: "Import a JSON array of {label, name, local_name, attributes: {key: value}}; entries replace those of the same label.")
    @Argument var file: String
    @OptionGroup var global: GlobalOptions

    func run() async throws {
        try await global.withClassification { client in
            let r = try await client.importCatalogue(ClassificationV1.ImportCatalogueRequest(json: try readFile(file)), options: global.callOptions)
            try global.render(json: { ["entries": r.entries] }, text: { print("imported \(r.entries) catalogue entries") })
        }
    }
}

struct CatalogueSearch: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "search", abstract: "Search every field, case- and diacritics-insensitively; sorted by local name.")
    @Argument var query: String = ""
    @Option var limit: Int32?
    @OptionGroup var global: GlobalOptions

    func run() async throws {
        try await global.withClassification { client in
            let r = try await client.searchCatalogue(ClassificationV1.SearchCatalogueRequest(query: query, limit: limit), options: global.callOptions)
            try global.render(json: { ["entries": r.entries.map(entryJSON)] }, text: {
                printTable(["LABEL", "NAME", "LOCAL NAME"], r.entries.map { [$0.label, $0.name, $0.localName] })
            })
        }
    }
}

struct CatalogueShow: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "show", abstract: "One label's entry with every attribute.")
    @Argument var label: String
    @OptionGroup var global: GlobalOptions

    func run() async throws {
        try await global.withClassification { client in
            let e = try await client.getCatalogueEntry(ClassificationV1.GetCatalogueEntryRequest(label: label), options: global.callOptions)
            try global.render(json: { entryJSON(e) }, text: {
                print("\(e.label): \(e.name)" + (e.localName.isEmpty ? "" : " (\(e.localName))"))
                for a in e.attributes { print("  \(a.key): \(a.value)") }
            })
        }
    }
}

struct Feedback: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "feedback",
        abstract: "Confirm or correct a prediction. With --consent the photo is kept under LABEL in the feedback dataset; without it nothing is kept.")
    @Argument var photo: String
    @Option var label: String
    @Flag(help: "Allow the service to keep the photo for training.") var consent = false
    @Option(help: "The model that predicted.") var model: String?
    @Option(help: "What it predicted.") var predicted: String?
    @OptionGroup var global: GlobalOptions

    func run() async throws {
        try await global.withClassification { client in
            let r = try await client.feedback(
                ClassificationV1.FeedbackRequest(image: try readFile(photo), label: label, consent: consent, model: model ?? "",
                                                 predictedLabel: predicted ?? ""), options: global.callOptions)
            try global.render(json: { ["stored": r.stored, "dataset": jsonValue(r.stored ? r.dataset : nil)] }, text: {
                print(r.stored ? "kept under \(label) in dataset \(r.dataset)" : "thank you; nothing was kept (no consent)")
            })
        }
    }
}
