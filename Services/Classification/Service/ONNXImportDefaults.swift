import ClassificationAPI
import ClassificationCore

/// `model import --format onnx` of a file this service exported (`model export --format onnx`) needs no flags: what
/// the request leaves out — labels, input size, kind, a detector's layout, mean and std — is taken from the file's
/// metadata_props. What the request gives wins; other ONNX files are left to the request alone.
enum ONNXImportDefaults {
    static func filled(_ first: ClassificationV1.ImportModelRequest, data: [UInt8])
        -> ClassificationV1.ImportModelRequest
    {
        guard first.format == .onnx, let described = ONNXExport.described(data) else { return first }
        var request = first
        if request.labels.isEmpty { request.labels = described.labels }
        if request.inputWidth == 0 && request.inputHeight == 0 {
            request.inputWidth = Int32(clamping: described.width)
            request.inputHeight = Int32(clamping: described.height)
        }
        if request.kind == .unspecified { request.kind = described.kind == .detector ? .detector : .classifier }
        if request.layout == .unspecified, described.layout == "yolov5" { request.layout = .yolov5 }
        if request.mean.isEmpty && request.std.isEmpty, let mean = described.mean, let std = described.std {
            request.mean = mean
            request.std = std
        }
        return request
    }
}
