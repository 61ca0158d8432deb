import ArgumentParser
import ClassificationAPI
import Foundation
import GatewayKit
import RPC
import Schema

struct ModelCommands: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "model", abstract: "Trained and imported models: list, show, delete, activate, export, import.",
        subcommands: [
            ModelList.self, ModelShow.self, ModelDelete.self, ModelActivate.self, ModelExport.self,
            ModelImportCommand.self,
        ])
}

struct ModelList: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "list", abstract: "Every model with its kind, algorithm and figures.")
    @OptionGroup var global: GlobalOptions

    func run() async throws {
        try await global.withClassification { client in
            let r = try await client.listModels(ClassificationV1.ListModelsRequest(), options: global.callOptions)
            try global.render(
                r,
                text: {
                    printTable(
                        ["NAME", "KIND", "ALGORITHM", "LABELS", "INPUT", "ACCURACY", "APPS"],
                        r.models.map { m in
                            [
                                m.name, modelKindName(m.kind), m.algorithm + (m.fineTuned ? " (fine-tuned)" : ""),
                                "\(m.labels.count)", "\(m.inputWidth)x\(m.inputHeight)",
                                m.validationAccuracy.map(percent) ?? m.map50.map { String(format: "mAP50 %.3f", $0) }
                                    ?? "-", m.apps.joined(separator: ","),
                            ]
                        })
                })
        }
    }
}

struct ModelShow: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "show", abstract: "A model's labels, input and metrics, and its training's course.",
        discussion: """
            --plot FILE also draws the training's course as a PNG (800×400): the loss in red on its own scale (0 to \
            its largest value), training accuracy in blue and validation accuracy in green on 0–100 %, one point per \
            report, a grey line between the cnn's passes, grid lines at every 10 % of the height.
            """)
    @Argument(help: "The model's name.") var name: String
    @Option(
        help: "Also draw the loss and accuracy curves into this PNG file (default: none).",
        completion: .file(extensions: ["png"])) var plot: String?
    @OptionGroup var global: GlobalOptions

    func run() async throws {
        try await global.withClassification { client in
            let m = try await client.getModel(ClassificationV1.GetModelRequest(name: name), options: global.callOptions)
            if let plot {
                guard !m.history.isEmpty else {
                    throw RPCError(
                        .failedPrecondition,
                        "model \(name) has no training history to plot (imported, or trained before it was kept)")
                }
                guard FileManager.default.createFile(atPath: plot, contents: Data(TrainingCurvePlot.png(m.history)))
                else {
                    throw FileError(.notWritable, path: plot, reason: "cannot create the file", role: "--plot")
                }
                if !global.json { print("wrote \(plot): loss red, training accuracy blue, validation accuracy green") }
            }
            try global.render(
                m,
                text: {
                    print(modelText(m))
                    print("labels: \(m.labels.joined(separator: ", "))")
                    print("size: \(m.size) bytes, created \(isoDate(m.createdAt))")
                    for line in historyText(m.history) { print(line) }
                })
        }
    }
}

struct ModelDelete: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "delete", abstract: "Delete a model.",
        discussion: "--json prints the empty DeleteModelResponse: {}.")
    @Argument(help: "The model's name.") var name: String
    @OptionGroup var global: GlobalOptions

    func run() async throws {
        try await global.withClassification { client in
            let reply = try await client.deleteModel(
                ClassificationV1.DeleteModelRequest(name: name), options: global.callOptions)
            try global.render(reply, text: { print("deleted model \(name)") })
        }
    }
}

struct ModelActivate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "activate",
        abstract: "Make a model the app \"default\"'s classifier or detector (as `deployment set default MODEL`).",
        discussion: "--json prints the empty SetActiveModelResponse: {}.")
    @Argument(help: "The model's name.") var name: String
    @OptionGroup var global: GlobalOptions

    func run() async throws {
        try await global.withClassification { client in
            let reply = try await client.setActiveModel(
                ClassificationV1.SetActiveModelRequest(name: name), options: global.callOptions)
            try global.render(reply, text: { print("\(name) now answers for the app default") })
        }
    }
}

struct ModelExport: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "export",
        abstract:
            "Write a model's container file (labels, input, tensors, SHA-256; see Services/Classification/README.md), or an ONNX model.",
        discussion: """
            --format onnx writes the model as an ONNX graph to run elsewhere (onnxruntime, a phone): input "image" \
            [1, 3, H, W] RGB / 255 (then (x - input_mean) / input_std where metadata_props has them: a transfer model's \
            (p - 127) / 128), output "probabilities" (a detector: "boxes" in YOLOv5's layout, no NMS); labels and the resize in its \
            metadata_props. cnn and transfer classifiers (EfficientNet-Lite0 and the head in one graph), yolo and transfer \
            detectors (a transfer detector: Lite0's first 11 blocks and its yolo head) and imported ONNX models export; \
            features and torchscript models are refused (FAILED_PRECONDITION).
            The file arrives as a stream of ModelFileChunks, so --json prints what was written rather than a response: \
            {"file": PATH, "size": "BYTES"} (the size a string, as the JSON mapping spells 64-bit integers).
            """)
    @Argument(help: "The model's name.") var name: String
    @Option(
        name: [.short, .customLong("output")], help: "The file to write (default NAME.menagerie-model, or NAME.onnx).",
        completion: .file(extensions: ["menagerie-model", "onnx"])) var output: String?
    @Option(help: "What to write: menagerie (the container, default) or onnx.") var format: ExportFormat = .menagerie
    @OptionGroup var global: GlobalOptions

    /// `--format` of `model export`.
    enum ExportFormat: String, CaseIterable, ExpressibleByArgument {
        case menagerie, onnx
        var wire: ClassificationV1.ModelFormat { self == .onnx ? .onnx : .menagerie }
        var fileExtension: String { self == .onnx ? "onnx" : "menagerie-model" }
    }

    func run() async throws {
        try await global.withClassification { client in
            var bytes: [UInt8] = []
            let request = ClassificationV1.ExportModelRequest(name: name, format: format.wire)
            for try await chunk in client.exportModel(request, options: global.longCallOptions) {
                guard chunk.offset == Int64(bytes.count) else {
                    throw RPCError(.dataLoss, "the export's chunks arrived out of order")
                }
                bytes += chunk.data
            }
            let path = output ?? "\(name).\(format.fileExtension)"
            guard FileManager.default.createFile(atPath: path, contents: Data(bytes)) else {
                throw FileError(.notWritable, path: path, reason: "cannot create the file")
            }
            try global.render(
                jsonValue: { Self.written(path, size: bytes.count) },
                text: { print("wrote \(path) (\(bytes.count) bytes)") })
        }
    }

    /// What `--json` prints: the file written and its size, spelled as the JSON mapping spells an int64.
    static func written(_ path: String, size: Int) -> JSONValue {
        .object([JSONMember("file", .string(path)), JSONMember("size", .string(String(size)))])
    }
}

/// `--kind` of `train` and `model import`.
enum ModelKind: String, CaseIterable, ExpressibleByArgument {
    case classifier, detector
}

/// `--format` of `model import`.
enum ModelFormat: String, CaseIterable, ExpressibleByArgument {
    case menagerie, torchscript, onnx
}

/// `--layout` of `model import`: Ultralytics' ONNX export layouts.
enum DetectorLayout: String, CaseIterable, ExpressibleByArgument {
    case yolov5, yolov8
}

struct ModelImportCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "import",
        abstract: "Import a model file: one this service exported, or a TorchScript or ONNX model trained elsewhere.",
        discussion: """
            A TorchScript or ONNX classifier takes a float tensor [1, 3, H, W] (RGB pixels scaled to 0…1, then \
            (x - mean) / std per channel when given) and returns one score per label, in --labels order (logits or \
            probabilities). An ONNX detector (--kind detector) returns Ultralytics' export layout: --layout yolov5 \
            ([1, N, 5 + classes]) or yolov8 ([1, 4 + classes, N]), boxes in input pixels; its boxes pass through NMS. \
            TorchScript runs on libtorch, ONNX on OpenCV's DNN module. The model is run once on import: a file that \
            does not load or does not fit its labels and input is refused (INVALID_ARGUMENT) and nothing is kept.
            """)

    @Argument(help: "The model file.", completion: .file(extensions: ["menagerie-model", "pt", "onnx"])) var file:
        String
    @Option(help: "The imported model's name.") var name: String
    @Option(help: "The file's format.") var format = ModelFormat.menagerie
    @Option(help: "What the model does (default classifier, or what an ONNX file this service exported says).")
    var kind: ModelKind?
    @Option(
        help:
            "The labels in output order, comma-separated (default: the file's, for a menagerie model or an ONNX file this service exported)."
    ) var labels: String?
    @Option(help: "Input size WxH (default 224x224, or what an ONNX file this service exported says).") var input:
        String?
    @Option(help: "Per-channel mean, three comma-separated values (default: none, 0).") var mean: String?
    @Option(help: "Per-channel standard deviation, three comma-separated values (default: none, 1).") var std: String?
    @Option(help: "ONNX detector output layout (default: the service's guess from the output's shape).") var layout:
        DetectorLayout?
    @OptionGroup var global: GlobalOptions

    func request() throws -> ClassificationV1.ImportModelRequest {
        var r = ClassificationV1.ImportModelRequest()
        r.name = name
        switch format {
        case .menagerie: r.format = .menagerie
        case .torchscript: r.format = .torchscript
        case .onnx: r.format = .onnx
        }
        r.kind = kind.map { $0 == .detector ? .detector : .classifier } ?? .unspecified
        r.labels = labels.map { $0.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) } } ?? []
        if let input {
            let parts = input.lowercased().split(separator: "x").compactMap { Int32($0) }
            guard parts.count == 2 else { throw InvalidValue("--input must be WxH, e.g. 224x224 (got \(input))") }
            r.inputWidth = parts[0]
            r.inputHeight = parts[1]
        }
        func floats(_ text: String?, _ flag: String) throws -> [Float] {
            guard let text else { return [] }
            let values = text.split(separator: ",").compactMap { Float($0.trimmingCharacters(in: .whitespaces)) }
            guard values.count == 3 else {
                throw InvalidValue("\(flag) takes three comma-separated numbers (got \(text))")
            }
            return values
        }
        r.mean = try floats(mean, "--mean")
        r.std = try floats(std, "--std")
        switch layout {
        case nil: break
        case .yolov5: r.layout = .yolov5
        case .yolov8: r.layout = .yolov8
        }
        return r
    }

    func run() async throws {
        let first = try request()
        try await global.withClassification { client in
            let bytes = try readFile(file)
            let reply = try await client.importModel(options: global.longCallOptions) { writer in
                let piece = 1 << 20
                var offset = 0
                var message = first
                repeat {
                    let end = min(bytes.count, offset + piece)
                    message.data = Array(bytes[offset..<end])
                    try await writer.send(message)
                    message = ClassificationV1.ImportModelRequest()
                    offset = end
                } while offset < bytes.count
            }
            guard let model = reply.model else {
                throw RPCError(.internalError, "the import answered without the model")
            }
            try global.render(reply, text: { print("imported " + modelText(model)) })
        }
    }
}
