/// The `yolo` detector's shape: a residual backbone whose last feature map is a grid of cells, each predicting
/// `anchors.count` boxes (YOLOv2: anchors from k-means over the training boxes, widths and heights in input pixels).
public struct DetectorConfiguration: Sendable, Codable, Equatable {
    public var backbone: ResidualNetworkConfiguration
    public var anchors: [[Double]]
}
