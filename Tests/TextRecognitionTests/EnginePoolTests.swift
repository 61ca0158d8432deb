import Foundation
import Synchronization
import Testing
import WorkLane

@testable import TextRecognition

@Suite struct EnginePoolTests {
    let english = EngineConfiguration(languages: ["eng"])

    @Test func enginesAreReusedAcrossCheckouts() async throws {
        let pool = EnginePool(maxEnginesPerConfiguration: 2)
        for _ in 0..<3 {
            let engine = try await pool.checkout(english)
            pool.checkin(engine)
        }
        #expect(pool.enginesCreated == 1)
        #expect(pool.idleCount == 1)
    }

    @Test func aCallerBeyondTheBoundWaitsForAReturnedEngine() async throws {
        let pool = EnginePool(maxEnginesPerConfiguration: 1)
        let first = try await pool.checkout(english)
        let waiter = Task { try await pool.checkout(english) }
        try await Task.sleep(for: .milliseconds(100))
        #expect(pool.enginesCreated == 1, "no second engine beyond the bound")
        pool.checkin(first)
        let second = try await waiter.value
        #expect(second === first, "the returned engine goes to the waiter")
        pool.checkin(second)
        #expect(pool.enginesCreated == 1)
    }

    @Test func aWaitingCallerCanBeCancelled() async throws {
        let pool = EnginePool(maxEnginesPerConfiguration: 1)
        let first = try await pool.checkout(english)
        let waiter = Task { try await pool.checkout(english) }
        try await Task.sleep(for: .milliseconds(50))
        waiter.cancel()
        await #expect(throws: CancellationError.self) { try await waiter.value }
        pool.checkin(first)
        #expect(pool.idleCount == 1, "the engine went back to the pool, not to the cancelled waiter")
    }

    @Test func idleEnginesAreBoundedOverConfigurations() async throws {
        let pool = EnginePool(maxEnginesPerConfiguration: 1, maxIdleEngines: 1)
        let words = EngineConfiguration(languages: ["eng"], userWords: ["Menagerie"])
        let a = try await pool.checkout(english)
        let b = try await pool.checkout(words)
        pool.checkin(a)
        pool.checkin(b)
        #expect(pool.idleCount == 1, "the least recently returned engine was dropped")
        let again = try await pool.checkout(words)
        #expect(again === b)
        pool.checkin(again)
    }

    @Test func aFailedCreationFreesItsPlace() async throws {
        let pool = EnginePool(maxEnginesPerConfiguration: 1)
        await #expect(throws: EngineError.languageUnavailable("xx_none")) {
            try await pool.checkout(EngineConfiguration(languages: ["xx_none"]))
        }
        let engine = try await pool.checkout(english)
        pool.checkin(engine)
    }

    @Test func prewarmMakesOneReadyEnginePerLaneThreadAndScansMakeNone() async throws {
        let lane = WorkLane(name: "prewarm-test", threads: 2)
        let pool = EnginePool(maxEnginesPerConfiguration: 2)
        #expect(try await pool.prewarm(languages: ["eng"], count: lane.threads, lane: lane) == 2)
        #expect(pool.enginesCreated == 2)
        #expect(pool.idleCount == 2)
        #expect(try await pool.prewarm(languages: ["eng"], count: lane.threads, lane: lane) == 0, "already warm")

        // Both threads read at once, as the service's lane does: neither makes an engine or a detector.
        let page = try Image.blank(width: 200, height: 60)
        try await withThrowingTaskGroup(of: Bool.self) { group in
            for _ in 0..<2 {
                group.addTask {
                    let engine = try await pool.checkout(self.english)
                    defer { pool.checkin(engine) }
                    let hadDetector = engine.hasOrientationDetector
                    _ = try await lane.run {
                        _ = try engine.detectOrientation(page)
                        return try engine.recognize(page)
                    }
                    return hadDetector
                }
            }
            for try await hadDetector in group {
                #expect(hadDetector, "the orientation detector was made by the pre-warm")
            }
        }
        #expect(pool.enginesCreated == 2, "scans after the pre-warm made no engine")
    }

    @Test func prewarmReportsAMissingLanguageAndLeavesNoPlaceTaken() async throws {
        let lane = WorkLane(name: "prewarm-test", threads: 1)
        let pool = EnginePool(maxEnginesPerConfiguration: 1)
        await #expect(throws: EngineError.languageUnavailable("xx_none")) {
            try await pool.prewarm(languages: ["xx_none"], count: 1, lane: lane)
        }
        #expect(pool.enginesCreated == 0)
        // Had the place stayed taken, this checkout would wait for ever instead of failing at once.
        await #expect(throws: EngineError.languageUnavailable("xx_none")) {
            try await pool.checkout(EngineConfiguration(languages: ["xx_none"]))
        }
    }

    @Test func recognitionRunsWithoutOpenMPThreads() async throws {
        let engine = try TesseractEngine(configuration: english)
        let text = try Image.blank(width: 200, height: 60)
        _ = try engine.recognize(text)
        if let levels = TesseractRuntime.openMPMaxActiveLevelsOfCallingThread() {
            #expect(levels == 0, "parallel regions entered from this thread run on it alone")
        }
        #expect(getenv("OMP_THREAD_LIMIT") != nil, "child processes (the tesseract program) get the limit too")
    }
}
