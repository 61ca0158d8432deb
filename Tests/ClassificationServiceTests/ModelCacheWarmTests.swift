import ClassificationCore
import Foundation
import Testing
import Torch

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

/// Every inference runs on the service's one inference thread with every core's OpenMP thread, and nothing else runs
/// torch's parallel operations on the lane: a second thread's OpenMP team doubled Classify's inference (18 ms
/// against 9–10 on 2 cores; `menagerie-bench classification-photo`'s Classify p50 48.6–53.3 ms before, 41.8–45.4
/// after).
@Suite struct InferenceThreadTests {
    @Test func inferenceRunsOnOneThreadAndTheLaneOnOneOpenMPThread() async throws {
        let tests = try ClassificationServiceTests()
        let service = tests.service
        var threads = Set<String>()
        for _ in 0..<6 {
            threads.insert(try await service.inference { "\(pthread_self())" })
        }
        #expect(threads.count == 1)
        #expect(try await service.inference { Torch.threads } == min(2, service.limits.torchThreads))
        #expect(try await service.heavy { Torch.threads } == 1)
    }
}
