import ClassificationCore
import Foundation
import Synchronization

/// Loaded models by name, so a prediction does not decode a model file and build its network each time. Replicas
/// share the database, so a cached model is checked against the stored one's stamp (its creation time) on every
/// use: a model deleted and stored again under its name, here or by another replica, is loaded afresh.
final class ModelCache: Sendable {
    enum Engine: Sendable {
        case classifier(Classifier)
        case detector(any ObjectDetector)

        var header: ModelHeader {
            switch self {
            case .classifier(let classifier): classifier.header
            case .detector(let detector): detector.header
            }
        }
    }

    private let store: ClassificationStore
    private let entries = Mutex<[String: (stamp: Double, engine: Engine)]>([:])
    /// Models kept loaded at once; the least recently stored goes first beyond it.
    private let limit: Int

    init(store: ClassificationStore, limit: Int = 16) {
        self.store = store
        self.limit = limit
    }

    /// The loaded model of that name (NOT_FOUND when there is none). Blocking (database, decoding): call it on the lane.
    func engine(named name: String) throws -> Engine {
        let stamp = try store.modelStamp(named: name)
        if let cached = entries.withLock({ $0[name] }), cached.stamp == stamp { return cached.engine }
        let file = try store.model(named: name)
        let engine: Engine = switch file.header.kind {
        case .classifier: .classifier(try Classifier(file))
        case .detector: .detector(try Detectors.load(file))
        }
        entries.withLock { entries in
            if entries.count >= limit, let oldest = entries.min(by: { $0.value.stamp < $1.value.stamp })?.key {
                entries[oldest] = nil
            }
            entries[name] = (stamp, engine)
        }
        return engine
    }

    func forget(_ name: String) { entries.withLock { $0[name] = nil } }
}
