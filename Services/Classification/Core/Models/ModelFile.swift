import Base
import Foundation
import TLS

/// What a model file says about its model (JSON inside the container).
public struct ModelHeader: Sendable, Codable, Equatable {
    public enum Kind: String, Sendable, Codable { case classifier, detector }

    public var kind: Kind
    /// "cnn", "features", "transfer", "yolo", or "torchscript" / "onnx" for an imported model.
    public var algorithm: String
    /// Class names in output order.
    public var labels: [String]
    public var inputWidth: Int
    public var inputHeight: Int
    public var scaling: Scaling = .fit
    /// Per-channel normalisation applied after scaling to [0, 1] (imported models); nil for none.
    public var mean: [Float]?
    public var std: [Float]?
    public var network: ResidualNetworkConfiguration?
    public var detector: DetectorConfiguration?
    /// A `transfer` detector's shape; nil for every other model.
    public var transferDetector: TransferDetectorConfiguration?
    /// A classifier fine-tuned from an imported TorchScript one: the module's method whose output feeds the trained
    /// linear head ("features" when the module exports one, else "forward"); nil when the module's own output is
    /// the class scores.
    public var featureMethod: String?
    /// The output layout of an imported ONNX detector: "yolov5" ([1, N, 5 + classes]) or "yolov8" ([1, 4 + classes, N]).
    public var layout: String?
    public var trainingAccuracy: Double?
    public var validationAccuracy: Double?
    /// Further figures by name (evaluation results, mAP …).
    public var metrics: [String: Double] = [:]
    public var trainingSeconds: Double?
    public var seed: UInt64?
    /// The training's reported epochs, in order (nil for imported models and those trained before it was kept).
    public var history: [TrainingProgress]?
    /// The datasets the model was trained on (the feedback dataset among them when it was included), so evaluating
    /// it on their images can warn; nil for imported models and those trained before it was kept.
    public var trainingDatasets: [String]?
    /// Set on the model a cancelled training kept: what it is (see `TrainingInterrupted`).
    public var interrupted: String?
    /// A transfer classifier whose feature print's last block was fine-tuned (`FineTuning`): its module is its own
    /// tuned copy of the network. nil for every other model.
    public var fineTuned: Bool?
    /// A detector whose boxes are labelled by a transfer classifier of their crops (`ReclassifyingDetector`): how
    /// they are cropped. The classifier's own container is the file's script bytes. nil for every other model.
    public var cropClassifier: CropClassifierConfiguration?
    /// A classifier's test-time augmentation: the views of each input whose probabilities are averaged with the
    /// input's own (`TestTimeAugmentation`); nil or empty for none.
    public var testTimeAugmentation: [String]?

    public init(kind: Kind, algorithm: String, labels: [String], inputWidth: Int, inputHeight: Int) {
        self.kind = kind
        self.algorithm = algorithm
        self.labels = labels
        self.inputWidth = inputWidth
        self.inputHeight = inputHeight
    }
}

extension ModelHeader {
    /// A CHW input in [0, 1] normalised per channel by `mean` and `std`, as the imported model expects.
    func normalised(_ input: [Float]) -> [Float] {
        guard let mean, let std, mean.count == 3, std.count == 3 else { return input }
        let plane = input.count / 3
        return input.indices.map { (input[$0] - mean[$0 / plane]) / std[$0 / plane] }
    }
}

/// A model as stored and exported: the header, the trained tensors, and for an imported TorchScript module or ONNX
/// model its bytes (in `script`).
///
/// Container format, versions 1 and 2 (all integers little-endian):
///
///     offset  size  field
///     0       16    magic "MENAGERIE-MODEL\n"
///     16      4     format version: 2 for a model fine-tuned from an imported module (`featureMethod`), which a
///                   version-1 reader would take for the plain module and misread; 1 for every other model
///     20      4     header length H
///     24      H     header: UTF-8 JSON, ModelHeader plus "tensors": [{"name", "shape"}] in payload order
///                   and "script_bytes": the TorchScript module's length (0 for none)
///     24+H    …     payload: each tensor's values as float32, in header order, then the TorchScript bytes
///     end-32  32    SHA-256 of every byte before it
///
/// Reading checks the magic (a foreign file), the version, the checksum (a corrupt file) and that the payload
/// matches the tensor table, and throws `invalidArgument` for any of them.
public struct ModelFile: Sendable, Equatable {
    public var header: ModelHeader
    public var tensors: [NamedArray]
    public var script: [UInt8]?

    public init(header: ModelHeader, tensors: [NamedArray], script: [UInt8]? = nil) {
        self.header = header
        self.tensors = tensors
        self.script = script
    }

    public static let magic = Array("MENAGERIE-MODEL\n".utf8)
    /// The newest format version this build reads and writes.
    public static let version: UInt32 = 3

    /// The version this model is written in: the oldest that holds it, so other models stay readable by older builds.
    /// A detector with a crop classifier is version 3: an older build would read its boxes' labels from the
    /// detector alone, without a word, where a version it does not know is refused.
    var formatVersion: UInt32 { header.cropClassifier != nil ? 3 : header.featureMethod == nil ? 1 : 2 }

    private struct Envelope: Codable {
        var model: ModelHeader
        var tensors: [Entry]
        var scriptBytes: Int
        struct Entry: Codable {
            var name: String
            var shape: [Int]
        }
        enum CodingKeys: String, CodingKey { case model, tensors, scriptBytes = "script_bytes" }
    }

    public func encoded() throws -> [UInt8] {
        let envelope = Envelope(
            model: header, tensors: tensors.map { .init(name: $0.name, shape: $0.shape) },
            scriptBytes: script?.count ?? 0)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let json = [UInt8](try encoder.encode(envelope))
        var bytes = Self.magic
        append(&bytes, formatVersion)
        append(&bytes, UInt32(json.count))
        bytes += json
        for tensor in tensors {
            precondition(
                tensor.values.count == tensor.shape.reduce(1, *), "tensor \(tensor.name) does not fill its shape")
            tensor.values.withUnsafeBufferPointer { values in
                for v in values { append(&bytes, v.bitPattern) }
            }
        }
        bytes += script ?? []
        bytes += SHA256.digest(bytes)
        return bytes
    }

    public static func decode(_ bytes: [UInt8]) throws -> ModelFile {
        func invalid(_ why: String) -> ClassificationError { .invalid("not a valid model file: \(why)") }
        guard bytes.count >= magic.count + 8 + 32, Array(bytes.prefix(magic.count)) == magic else {
            throw invalid("it does not start with the Menagerie model magic (a foreign file?)")
        }
        let version = readUInt32(bytes, at: 16)
        guard (1...Self.version).contains(version) else {
            throw invalid("format version \(version) is not supported (this build reads 1 to \(Self.version))")
        }
        let body = Array(bytes[..<(bytes.count - 32)])
        guard SHA256.digest(body) == Array(bytes[(bytes.count - 32)...]) else {
            throw invalid("its checksum does not match (the file is corrupt or truncated)")
        }
        let headerLength = Int(readUInt32(bytes, at: 20))
        guard 24 + headerLength <= body.count else { throw invalid("the header runs past the end") }
        let envelope: Envelope
        do {
            envelope = try JSONDecoder().decode(Envelope.self, from: Data(body[24..<(24 + headerLength)]))
        } catch {
            throw invalid("the header is not the expected JSON (\(error))")
        }
        var offset = 24 + headerLength
        var tensors: [NamedArray] = []
        for entry in envelope.tensors {
            guard entry.shape.allSatisfy({ $0 >= 0 }) else { throw invalid("tensor \(entry.name) has a negative size") }
            // The checksum is no signature: a forged table may declare shapes whose product overflows, so the product is
            // held to what the payload has left at every step instead of trusted.
            var count = 1
            for dimension in entry.shape {
                let (product, overflow) = count.multipliedReportingOverflow(by: dimension)
                guard !overflow, product <= (body.count - offset) / 4 else {
                    throw invalid("tensor \(entry.name) runs past the end")
                }
                count = product
            }
            var values = [Float](repeating: 0, count: count)
            for i in 0..<count { values[i] = Float(bitPattern: readUInt32(body, at: offset + i * 4)) }
            offset += count * 4
            tensors.append(NamedArray(name: entry.name, shape: entry.shape, values: values))
        }
        guard offset + envelope.scriptBytes == body.count else {
            throw invalid("the payload's length does not match its table")
        }
        let script = envelope.scriptBytes > 0 ? Array(body[offset...]) : nil
        let header = envelope.model
        guard !header.labels.isEmpty, header.inputWidth > 0, header.inputHeight > 0 else {
            throw invalid("it has no labels or no input size")
        }
        return ModelFile(header: header, tensors: tensors, script: script)
    }
}

private func append(_ bytes: inout [UInt8], _ value: UInt32) {
    for i in 0..<4 { bytes.append(UInt8(truncatingIfNeeded: value >> (8 * UInt32(i)))) }
}

private func readUInt32(_ bytes: [UInt8], at offset: Int) -> UInt32 {
    (0..<4).reduce(UInt32(0)) { $0 | UInt32(bytes[offset + $1]) << (8 * UInt32($1)) }
}
