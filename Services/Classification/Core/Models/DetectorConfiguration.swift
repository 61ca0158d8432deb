/// The `yolo` detector's shape: a residual backbone whose last feature map is a grid of cells, each predicting
/// `anchors.count` boxes (YOLOv2: anchors from k-means over the training boxes, widths and heights in input pixels).
public struct DetectorConfiguration: Sendable, Codable, Equatable {
    public var backbone: ResidualNetworkConfiguration
    public var anchors: [[Double]]
}

/// The `transfer` detector's shape (`TransferDetector`): EfficientNet-Lite0's first `blocks` blocks as the backbone,
/// a 3×3 convolution of `neckWidth` channels, and `anchors.count` boxes per cell (widths and heights in input pixels).
public struct TransferDetectorConfiguration: Sendable, Codable, Equatable {
    public var anchors: [[Double]]
    public var blocks: Int
    public var neckWidth: Int
}
