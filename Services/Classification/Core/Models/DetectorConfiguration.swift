/// The `yolo` detector's shape: a grid of cells, each predicting `anchors.count` boxes (YOLOv2's anchors, from
/// k-means over the training boxes, as widths and heights relative to the input).
public struct DetectorConfiguration: Sendable, Codable, Equatable {
    public var grid: Int
    public var anchors: [[Double]]
    public var widths: [Int]
}
