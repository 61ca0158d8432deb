import SevenSegment
import Synchronization

/// PP-OCR engines to lend to the threads that read: an engine is made on first demand and kept, so there are as
/// many as threads ever read at once (the lane's threads) and none is used by two threads at a time.
public final class PPOCRPool: Sendable {
    public let models: PPOCRModels
    /// The seven-segment glyph network each engine reads segment displays with, if installed.
    public let segments: SevenSegmentModel?
    private let idle = Mutex<[PPOCREngine]>([])

    public init(models: PPOCRModels, segments: SevenSegmentModel? = nil) {
        self.models = models
        self.segments = segments
    }

    /// An idle engine, or a new one (parsing the networks takes a moment: `prewarm` at start).
    public func checkout() throws -> PPOCREngine {
        if let engine = idle.withLock({ $0.popLast() }) { return engine }
        return try PPOCREngine(models: models, segments: segments)
    }

    public func checkin(_ engine: PPOCREngine) {
        idle.withLock { $0.append(engine) }
    }

    /// Makes `count` engines ahead of the first request.
    public func prewarm(_ count: Int) throws {
        let engines = try (0..<count).map { _ in try PPOCREngine(models: models, segments: segments) }
        idle.withLock { $0.append(contentsOf: engines) }
    }

    /// Runs `body` with an engine checked out for its duration.
    public func withEngine<T>(_ body: (PPOCREngine) throws -> T) throws -> T {
        let engine = try checkout()
        defer { checkin(engine) }
        return try body(engine)
    }
}
