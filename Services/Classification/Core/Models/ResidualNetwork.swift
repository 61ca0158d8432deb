import Torch

/// The `cnn` classifier: a small residual network (ResNet's basic blocks) trained from scratch. A 3×3 stem, one
/// basic block per stage (the first at full resolution, each next one halving it and widening), global average
/// pooling and a linear layer. Three stages of 16/32/64 channels reach ~99 % on the 32×32 digits in seconds.
public struct ResidualNetworkConfiguration: Sendable, Codable, Equatable {
    public var widths: [Int]
    public var classes: Int
    public var channels: Int
    /// Stride of the stem and of the first stage (nil: 1, full resolution). A detector's backbone halves early.
    public var stemStride: Int?
    public var firstStageStride: Int?

    public init(
        widths: [Int] = [16, 32, 64], classes: Int, channels: Int = 3, stemStride: Int? = nil,
        firstStageStride: Int? = nil
    ) {
        self.widths = widths
        self.classes = classes
        self.channels = channels
        self.stemStride = stemStride
        self.firstStageStride = firstStageStride
    }
}

public final class ResidualNetwork {
    public let configuration: ResidualNetworkConfiguration
    public let parameters: Parameters

    /// Builds the network with fresh weights drawn from `seed`.
    public init(_ configuration: ResidualNetworkConfiguration, seed: UInt64 = 0) throws {
        self.configuration = configuration
        parameters = Parameters(seed: seed)
        let p = parameters
        let widths = configuration.widths
        try Layers.conv(p, "stem", in: configuration.channels, out: widths[0], kernel: 3)
        try Layers.batchNorm(p, "stem.bn", channels: widths[0])
        var input = widths[0]
        for (stage, width) in widths.enumerated() {
            let name = "stage\(stage)"
            try Layers.conv(p, "\(name).conv1", in: input, out: width, kernel: 3)
            try Layers.batchNorm(p, "\(name).bn1", channels: width)
            try Layers.conv(p, "\(name).conv2", in: width, out: width, kernel: 3)
            try Layers.batchNorm(p, "\(name).bn2", channels: width)
            if stage > 0 || input != width || (configuration.firstStageStride ?? 1) != 1 {
                try Layers.conv(p, "\(name).shortcut", in: input, out: width, kernel: 1)
                try Layers.batchNorm(p, "\(name).shortcut.bn", channels: width)
            }
            input = width
        }
        try Layers.linear(p, "head", in: input, out: configuration.classes)
    }

    /// Logits [N, classes] for images [N, channels, H, W].
    public func forward(_ x: Tensor, training: Bool) throws -> Tensor {
        let h = try featureMap(x, training: training)
        let pooled = try h.adaptiveAvgPool2d(height: 1, width: 1).reshaped([-1, configuration.widths.last!])
        return try Layers.applyLinear(parameters, "head", pooled)
    }

    /// The last stage's feature map [N, widths.last, H / stride, W / stride].
    public func featureMap(_ x: Tensor, training: Bool) throws -> Tensor {
        let p = parameters
        var h = try Layers.applyBatchNorm(
            p, "stem.bn", Layers.applyConv(p, "stem", x, stride: configuration.stemStride ?? 1, padding: 1),
            training: training
        ).relu()
        for stage in configuration.widths.indices {
            let name = "stage\(stage)"
            let stride = stage == 0 ? configuration.firstStageStride ?? 1 : 2
            var y = try Layers.applyConv(p, "\(name).conv1", h, stride: stride, padding: 1)
            y = try Layers.applyBatchNorm(p, "\(name).bn1", y, training: training).relu()
            y = try Layers.applyBatchNorm(
                p, "\(name).bn2", Layers.applyConv(p, "\(name).conv2", y, padding: 1), training: training)
            let shortcut =
                p.tensors["\(name).shortcut.weight"] != nil
                ? try Layers.applyBatchNorm(
                    p, "\(name).shortcut.bn", Layers.applyConv(p, "\(name).shortcut", h, stride: stride, padding: 0),
                    training: training)
                : h
            h = try (y + shortcut).relu()
        }
        return h
    }

    /// The total downsampling from input to feature map.
    public var stride: Int {
        (configuration.stemStride ?? 1) * (configuration.firstStageStride ?? 1)
            * (1 << (configuration.widths.count - 1))
    }
}
