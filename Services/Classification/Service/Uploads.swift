import Base
import ClassificationAPI
import ClassificationCore
import Foundation
import RPC
import Schema
import Torch
import Zip

/// A dataset upload as received: the header and each file's bytes by path. Nothing is kept until the whole
/// dataset validated, so a stream that breaks off or carries a bad file leaves nothing behind.
///
/// Each image is decoded as soon as its last chunk arrives (`check`), not after the stream ended: a bad image
/// among 20,000 ends the upload while the client is still sending, naming the file, or — under `skip_bad` — is
/// left out and named in the summary. The sizes measured then are kept, so the dataset is not decoded twice.
struct Upload: Sendable {
    var header: ClassificationV1.DatasetUploadHeader
    /// How a detection dataset's boxes are written (the header's, or read from what it sent).
    var format: AnnotationFormat
    var files: [String: [UInt8]]
    /// Upright width and height of each image checked as it arrived.
    var sizes: [String: (width: Int, height: Int)] = [:]
    /// Files left out, in the order they arrived, each with why.
    var skipped: [ClassificationV1.SkippedFile] = []

    /// Decodes one arrived file; throws `ClassificationError` when it is not a usable image.
    typealias Check = @Sendable (_ path: String, _ bytes: [UInt8]) async throws -> (width: Int, height: Int)

    static func receive(
        _ requests: RequestStream<ClassificationV1.UploadDatasetRequest>,
        limits: ClassificationService.Limits, held: MemoryReservation, check: Check
    ) async throws -> Upload {
        var sizes: [String: (width: Int, height: Int)] = [:]
        var skipped: [ClassificationV1.SkippedFile] = []
        var header: ClassificationV1.DatasetUploadHeader?
        var format = AnnotationFormat.createML
        var files: [String: [UInt8]] = [:]
        var finished: Set<String> = []
        var open: String?
        var total = 0
        var index = 0
        for try await message in requests {
            defer { index += 1 }
            if let h = message.header {
                guard index == 0 else {
                    throw RPCError(.invalidArgument, "message \(index): the header comes first and only once")
                }
                _ = try RequestValidation.name(h.name, field: "header.name")
                format = try annotationFormat(h)
                guard h.totalBytes <= Int64(limits.maxUploadBytes) else {
                    throw RPCError(
                        .resourceExhausted,
                        "the upload's \(h.totalBytes) bytes exceed the limit of \(limits.maxUploadBytes)")
                }
                header = h
            } else if index == 0 {
                throw RPCError(.invalidArgument, "message 0: the first message must carry the header")
            }
            guard let chunk = message.chunk else { continue }
            let path = chunk.path
            guard !path.isEmpty, path.utf8.count <= 1024, !path.hasPrefix("/"),
                !path.split(separator: "/").contains("..")
            else {
                throw RPCError(
                    .invalidArgument, "chunk.path: \"\(path.prefix(200))\" must be a relative path without ..")
            }
            guard !finished.contains(path) else { throw RPCError(.invalidArgument, "\(path): sent twice") }
            if let current = open, current != path {
                throw RPCError(.invalidArgument, "\(current): its chunks ended without one marked last")
            }
            if files[path] == nil {
                guard files.count < limits.maxUploadFiles else {
                    throw RPCError(.resourceExhausted, "more than \(limits.maxUploadFiles) files in one upload")
                }
                files[path] = []
            }
            total += chunk.data.count
            guard total <= limits.maxUploadBytes else {
                throw RPCError(.resourceExhausted, "the upload exceeds the limit of \(limits.maxUploadBytes) bytes")
            }
            // Each chunk takes its bytes of the memory budget as it arrives: five unfinished 300 MiB uploads took a
            // replica to 1,700 MiB before; now the one that does not fit is refused while it arrives.
            guard await held.grow(by: chunk.data.count, waitingUpTo: limits.budgetPatience) else {
                throw RPCError(
                    .resourceExhausted,
                    "the server's memory budget cannot hold more of this upload (\(total) bytes so far), still after waiting "
                        + "\(limits.budgetPatience); retry later")
            }
            files[path]! += chunk.data
            if chunk.last {
                finished.insert(path)
                open = nil
                guard let header else { continue }
                let yolo = header.kind == .detection && format == .yolo
                // YOLO's label files and class names are text, kept for the parser.
                if yolo && !DatasetBuilder.isImageName(path) && AnnotationFormat.isYOLOTextFile(path) { continue }
                if (header.kind == .classification || yolo) && !DatasetBuilder.isImageName(path) {
                    // Hidden files (.DS_Store) go without a word; anything else is named.
                    if !(path.split(separator: "/").last ?? "").hasPrefix(".") {
                        skipped.append(
                            ClassificationV1.SkippedFile(
                                path: path,
                                reason: "not an image by its name (\(DatasetBuilder.imageExtensionsText) expected)"
                                    + (yolo ? " nor a label file under labels/, a *.yaml or classes.txt" : "")))
                    }
                    files[path] = nil
                    continue
                }
                do {
                    sizes[path] = try await check(path, files[path]!)
                } catch let error as ClassificationError where error.category == .invalidArgument {
                    guard header.skipBad else { throw RPCError(.invalidArgument, error.message) }
                    skipped.append(ClassificationV1.SkippedFile(path: path, reason: error.message))
                    files[path] = nil
                }
            } else {
                open = path
            }
        }
        guard let header else { throw RPCError(.invalidArgument, "the upload was empty: no header") }
        if let open { throw RPCError(.invalidArgument, "\(open): the stream ended before its last chunk") }
        return Upload(header: header, format: format, files: files, sizes: sizes, skipped: skipped)
    }

    /// The header's kind and annotation format, checked together: a classification dataset is Create ML's folder
    /// layout; a detection dataset's format is the header's or, when unspecified, read from its JSON (none: YOLO).
    static func annotationFormat(_ header: ClassificationV1.DatasetUploadHeader) throws -> AnnotationFormat {
        switch header.kind {
        case .classification:
            guard header.annotationFormat == .unspecified || header.annotationFormat == .createml else {
                throw RPCError(
                    .invalidArgument,
                    "header.annotation_format: a classification dataset is Create ML's folder layout; YOLO and COCO annotate detection datasets"
                )
            }
            return .createML
        case .detection:
            let format: AnnotationFormat
            switch header.annotationFormat {
            case .unspecified: format = AnnotationFormat.detect(annotations: header.annotations)
            case .createml: format = .createML
            case .yolo: format = .yolo
            case .coco: format = .coco
            case .unrecognized(let value):
                throw RPCError(
                    .invalidArgument,
                    "header.annotation_format: \(value) is no format this server knows (CREATEML, YOLO, COCO)")
            }
            switch format {
            case .createML, .coco:
                guard !header.annotations.isEmpty else {
                    throw RPCError(
                        .invalidArgument,
                        "header.annotations: a detection dataset in \(format == .coco ? "COCO's" : "Create ML's") format needs its JSON"
                    )
                }
            case .yolo:
                guard header.annotations.isEmpty else {
                    throw RPCError(
                        .invalidArgument,
                        "header.annotations: YOLO's labels and class names are files of the upload (labels/*.txt, data.yaml or classes.txt); send no JSON"
                    )
                }
            }
            return format
        default: throw RPCError(.invalidArgument, "header.kind: give CLASSIFICATION or DETECTION")
        }
    }

    /// Images uploaded that the dataset stores once: files with the same bytes as another.
    static func duplicates(_ files: [String: [UInt8]], _ dataset: Dataset) -> Int {
        switch dataset.kind {
        case .classification:
            let images = files.keys.filter { DatasetBuilder.isImageName($0) }
            return max(0, images.count - dataset.samples.count)
        case .detection:
            return max(0, dataset.samples.count - dataset.images.count)
        }
    }
}

/// A TorchScript file is a zip that libtorch's reader (miniz) inflates entry by entry into buffers of the sizes
/// the entries declare: a 2 MB file whose `data.pkl` declares 2 GiB took a replica from 176 to 2,231 MiB before
/// it was refused. Its central directory is read first, and the declared sizes are held to per-entry and total
/// caps, to a ratio to the file's own size (PyTorch stores its entries uncompressed; a bomb inflates a
/// thousandfold) and to what the process's memory budget has left, before libtorch sees a byte.
enum TorchScriptArchive {
    /// The most one TorchScript archive may declare, in all: far above ImageNet classifiers (EfficientNet-Lite0
    /// is 19 MB; ResNet-50 98 MB).
    static let maxDeclaredBytes: UInt64 = 1 << 30
    /// How much more than the file's own size its entries may declare together (deflated tensors shrink a little).
    static let maxExpansion: UInt64 = 8

    static func inspect(_ data: [UInt8]) throws {
        guard ZipArchive.isZip(data) else {
            throw RPCError(
                .invalidArgument,
                "the file is not a TorchScript module (TorchScript is a zip archive; this does not start as one)")
        }
        let archive: ZipArchive
        do {
            archive = try ZipArchive(
                source: DataZipSource(Data(data)), name: "the TorchScript file",
                limits: ZipLimits(maxEntryBytes: maxDeclaredBytes, maxTotalBytes: maxDeclaredBytes, maxEntries: 100_000)
            )
        } catch let error as ZipError {
            throw RPCError(StatusCode(error.category), error.message)
        }
        let declared = archive.entries.reduce(UInt64(0)) { $0 + $1.size }
        let allowed = UInt64(data.count) * maxExpansion + (1 << 20)
        guard declared <= allowed else {
            throw RPCError(
                .invalidArgument,
                "the TorchScript file's entries declare \(declared >> 20) MiB from a \(data.count >> 10) KiB file, more than \(maxExpansion)× "
                    + "its size; refused before loading (a zip bomb?)")
        }
        let budget = MemoryBudget.process
        guard Int(declared) <= budget.limit - budget.used else {
            throw RPCError(
                .resourceExhausted,
                "loading the model needs \(declared >> 20) MiB and the server's memory budget has \((budget.limit - budget.used) >> 20) MiB left; retry later"
            )
        }
    }
}

/// A model file arriving as a client stream, and its conversion into a stored model.
enum ModelImport {
    /// Joins the file, each chunk taking its bytes of `held` (the memory budget) as it arrives: a file the
    /// budget cannot hold is refused RESOURCE_EXHAUSTED while it arrives, not after five of them took 1.7 GiB.
    static func receive(
        _ requests: RequestStream<ClassificationV1.ImportModelRequest>,
        limit: Int, held: MemoryReservation, patience: Duration
    ) async throws -> (ClassificationV1.ImportModelRequest, [UInt8]) {
        var first: ClassificationV1.ImportModelRequest?
        var data: [UInt8] = []
        for try await message in requests {
            if first == nil { first = message }
            guard data.count + message.data.count <= limit else {
                throw RPCError(.resourceExhausted, "the model file exceeds the limit of \(limit) bytes")
            }
            guard await held.grow(by: message.data.count, waitingUpTo: patience) else {
                throw RPCError(
                    .resourceExhausted,
                    "the server's memory budget cannot hold more of this model file (\(data.count) bytes so far), still after "
                        + "waiting \(patience); retry later")
            }
            data += message.data
        }
        guard var first else { throw RPCError(.invalidArgument, "the import was empty") }
        first.data = []
        return (first, data)
    }

    /// The stored model for an import: a Menagerie container is decoded (checksum, version, magic), a TorchScript
    /// module wrapped with its labels and preprocessing; every model is loaded once, so a file that does not run
    /// is refused now rather than at the first prediction.
    static func file(_ plan: RequestValidation.ModelImportPlan, data: [UInt8]) throws -> ModelFile {
        let file: ModelFile
        switch plan.format {
        case .torchscript, .onnx:
            let onnx = plan.format == .onnx
            guard plan.kind == .classifier || onnx else {
                throw RPCError(.invalidArgument, "kind: TorchScript imports are classifiers; import detectors as ONNX")
            }
            var header = ModelHeader(
                kind: plan.kind, algorithm: onnx ? "onnx" : "torchscript", labels: plan.labels,
                inputWidth: plan.width, inputHeight: plan.height)
            header.mean = plan.mean
            header.std = plan.std
            if plan.kind == .detector {
                switch plan.layout {
                case .yolov5: header.layout = "yolov5"
                case .yolov8: header.layout = "yolov8"
                default:
                    throw RPCError(
                        .invalidArgument, "layout: an ONNX detector needs its output layout, yolov5 or yolov8")
                }
            }
            if !onnx { try TorchScriptArchive.inspect(data) }
            if onnx, let location = ONNXExport.externalDataLocation(data) {
                throw RPCError(
                    .invalidArgument,
                    "the ONNX model keeps tensor data in an external file (\(location)), which the server does not read; import a model "
                        + "that holds its weights (onnx.save(model, path, save_as_external_data=False))")
            }
            file = ModelFile(header: header, tensors: [], script: data)
        default:
            file = try ModelFile.decode(data)
        }
        // Every model is loaded and run once on a blank image, so a file that does not load or whose input or output
        // does not fit its labels and size is refused now rather than at the first prediction.
        let blank = RGBImage(
            width: file.header.inputWidth, height: file.header.inputHeight,
            pixels: [UInt8](repeating: 128, count: 3 * file.header.inputWidth * file.header.inputHeight))
        do {
            switch file.header.kind {
            case .classifier: _ = try Classifier(file).classify(blank, top: 1)
            case .detector: _ = try Detectors.load(file).detect(blank)
            }
        } catch let error as TorchError {
            throw RPCError(
                .invalidArgument,
                "the model does not run on a \(file.header.inputWidth)×\(file.header.inputHeight) image: \(error.message)"
            )
        }
        return file
    }
}
