/// The `yolo` detector's shape: a residual backbone whose last feature map is a grid of cells, each predicting
/// `anchors.count` boxes (YOLOv2: anchors from k-means over the training boxes, widths and heights in input pixels).
public struct DetectorConfiguration: Sendable, Codable, Equatable {
    public var backbone: ResidualNetworkConfiguration
    public var anchors: [[Double]]
}

/// The `transfer` detector's shape (`TransferDetector`): EfficientNet-Lite0's first `blocks` blocks as the backbone,
/// a 3×3 convolution of `neckWidth` channels, and `anchors.count` boxes per cell (widths and heights in input pixels).
/// With `fineBlocks` the head reads the map after that many blocks (stride 8: 5) joined by the last block's map
/// enlarged to its size — fine detail and the deeper blocks' meaning in one map (`LiteBackbone`).
public struct TransferDetectorConfiguration: Sendable, Codable, Equatable {
    public var anchors: [[Double]]
    public var blocks: Int
    public var neckWidth: Int
    public var fineBlocks: Int?

    public init(anchors: [[Double]], blocks: Int, neckWidth: Int, fineBlocks: Int? = nil) {
        self.anchors = anchors
        self.blocks = blocks
        self.neckWidth = neckWidth
        self.fineBlocks = fineBlocks
    }
}
