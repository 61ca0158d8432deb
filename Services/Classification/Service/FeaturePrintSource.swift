import ClassificationCore
import Foundation
import Synchronization

/// Where the service finds the feature print (`--feature-print`, set by compose through MENAGERIE_FEATURE_PRINT),
/// loaded and checked on first use and then kept: a transfer training or a default-algorithm choice reads 19 MB and
/// hashes it only once per process. A failed load is not kept, so a feature print installed while the service
/// runs is found by the next training.
public final class FeaturePrintSource: Sendable {
    public let directory: String?
    /// The features of photos already trained on, so a training again on them skips the network.
    public let cache = FeatureCache()
    private let loaded = Mutex<FeaturePrint?>(nil)

    public init(directory: String?) {
        self.directory = directory.flatMap { $0.isEmpty ? nil : $0 }
    }

    /// Whether a feature print is there to load (its manifest exists); says nothing of its checksum.
    public var isInstalled: Bool {
        guard let directory else { return false }
        return FileManager.default.fileExists(
            atPath: URL(fileURLWithPath: directory).appendingPathComponent(FeaturePrint.manifestName).path)
    }

    /// The checked feature print: FAILED_PRECONDITION when none is configured or installed, DATA_LOSS when its
    /// module fails its checksum. Blocking: call it on the lane.
    public func load() throws -> FeaturePrint {
        if let featurePrint = loaded.withLock({ $0 }) { return featurePrint }
        guard let directory else {
            throw ClassificationError(
                .failedPrecondition,
                "the feature print is not installed (the service was started without --feature-print); \(FeaturePrint.installHint)"
            )
        }
        let featurePrint = try FeaturePrint.load(directory: directory)
        loaded.withLock { $0 = featurePrint }
        return featurePrint
    }
}
