import ClassificationCore
import Testing

@testable import ClassificationService

/// More apps than the cache keeps: each warm-up pass loaded them all, evicting what the pass before had loaded, so
/// every 30 s a model was read and warmed again for nothing.
@Suite struct ModelCacheWarmTests {
    @Test func theWarmUpLoadsNoMoreThanTheCacheKeeps() async throws {
        let tests = try ClassificationServiceTests()
        try await AppsTests.importModel(tests.client, "a", labels: ["r", "g", "b"])
        try await AppsTests.importModel(tests.client, "b", labels: ["r", "g", "b"])
        try tests.store.setDeployment(app: "one", model: "a")
        try tests.store.setDeployment(app: "two", model: "b")
        let cache = ModelCache(store: tests.store, limit: 1)
        #expect(try cache.warmDeployed() == ["a"])
        #expect(try cache.warmDeployed() == [])
    }
}
