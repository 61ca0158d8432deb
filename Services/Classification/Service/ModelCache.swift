import Base
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
    /// Where a model that loads slower than it should (`Classifier.notFrozen`) is reported.
    private let logger: Logger?
    private let entries = Mutex<[String: (stamp: Double, engine: Engine)]>([:])
    /// Models kept loaded at once; the least recently stored goes first beyond it.
    private let limit: Int

    init(store: ClassificationStore, limit: Int = 16, logger: Logger? = nil) {
        self.store = store
        self.limit = limit
        self.logger = logger
    }

    /// The loaded model of that name (NOT_FOUND when there is none). Blocking (database, decoding): call it on the lane.
    func engine(named name: String) throws -> Engine {
        let stamp = try store.modelStamp(named: name)
        if let cached = entries.withLock({ $0[name] }), cached.stamp == stamp { return cached.engine }
        let file = try store.model(named: name)
        let engine: Engine =
            switch file.header.kind {
            case .classifier: .classifier(try Classifier(file))
            case .detector: .detector(try Detectors.load(file))
            }
        if case .classifier(let classifier) = engine, let reason = classifier.notFrozen {
            logger?.warning(
                "model \(name) runs its TorchScript module as loaded, slower: it could not be frozen for inference (\(reason))"
            )
        }
        Self.warmUp(engine)
        entries.withLock { entries in
            if entries.count >= limit, let oldest = entries.min(by: { $0.value.stamp < $1.value.stamp })?.key {
                entries[oldest] = nil
            }
            entries[name] = (stamp, engine)
        }
        return engine
    }

    func forget(_ name: String) { entries.withLock { $0[name] = nil } }

    /// Whether the model of that name is loaded as stored (for tests and the warm-up's log).
    func isLoaded(_ name: String) -> Bool { entries.withLock { $0[name] != nil } }

    /// Three inferences on a blank image at the model's input, so the first caller's is not the one that pays for
    /// libtorch's first forwards (its allocations; TorchScript's profiling executor profiles the first run and
    /// optimises on the next: a second or more on a transfer model) or OpenCV's. A model that fails on a blank image
    /// is left to fail on its callers' images, as it does.
    static func warmUp(_ engine: Engine, runs: Int = 3) {
        let header = engine.header
        let width = max(1, header.inputWidth), height = max(1, header.inputHeight)
        let blank = RGBImage(width: width, height: height, pixels: [UInt8](repeating: 127, count: width * height * 3))
        for _ in 0..<runs {
            switch engine {
            case .classifier(let classifier): _ = try? classifier.classify(blank, top: 1)
            case .detector(let detector): _ = try? detector.detect(blank)
            }
        }
    }

    /// Loads (and warms) every app's model, so they are ready before their first call and after another replica
    /// repoints an app; returns the names loaded now. Blocking: call it on the lane.
    @discardableResult
    func warmDeployed() throws -> [String] {
        var loaded: [String] = []
        // No more than the cache keeps: beyond it each pass would evict what the last one loaded.
        for model in Set(try store.deployments().compactMap(\.model)).sorted().prefix(limit) {
            let before = isLoaded(model)
            guard (try? engine(named: model)) != nil else { continue }
            if !before { loaded.append(model) }
        }
        return loaded
    }
}
