import Base
import Foundation

/// Keeps the apps' models loaded: at start, before their first call, and again every `interval`, so a model an
/// admin set on another replica (they share the database) is loaded here before anyone asks for it. Each load runs
/// one warm-up inference (`ModelCache.warmUp`). On the inference thread, as any inference.
struct ModelWarmer: BackgroundService {
    let service: ClassificationService
    let interval: Duration
    let logger: Logger?

    var name: String { "classification model warm-up" }

    func run() async throws {
        while !Task.isCancelled {
            do {
                let loaded = try await service.warmApps()
                if !loaded.isEmpty {
                    logger?.info("loaded and warmed \(loaded.count) app model(s): \(loaded.joined(separator: ", "))")
                }
            } catch {
                logger?.warning("warming the apps' models: \(error)")
            }
            try? await Task.sleep(for: interval)
        }
    }
}

extension ClassificationService {
    /// Loads (and warms with one inference each) every app's model not loaded yet, on the inference thread; the names
    /// loaded.
    @discardableResult
    public func warmApps() async throws -> [String] {
        let cache = cache
        return try await inference { try cache.warmDeployed() }
    }

    /// The background service that loads and warms the apps' models at start and every `interval`.
    public func warmer(every interval: Duration = .seconds(30), logger: Logger? = nil) -> any BackgroundService {
        ModelWarmer(service: self, interval: interval, logger: logger)
    }
}
