import Foundation
import Synchronization
import Testing

@testable import ZooCore

/// A clock the test moves by hand; sleepers wake when it passes their time.
final class ManualClock: WallClock {
    private struct Sleeper {
        var id: Int
        var until: Date
        var continuation: CheckedContinuation<Void, any Error>
    }
    private struct State {
        var now: Date
        var sleepers: [Sleeper] = []
        var sleepStarted: [CheckedContinuation<Date, Never>] = []
        var nextID = 0
    }
    private let state: Mutex<State>

    init(_ now: Date) { state = Mutex(State(now: now)) }

    var now: Date { state.withLock { $0.now } }

    func sleep(until date: Date) async throws {
        let id = state.withLock { state in
            defer { state.nextID += 1 }
            return state.nextID
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let (outcome, waiting) = state.withLock {
                    state -> (Result<Void, any Error>?, [CheckedContinuation<Date, Never>]) in
                    if Task.isCancelled { return (.failure(CancellationError()), []) }
                    if date <= state.now { return (.success(()), []) }
                    state.sleepers.append(Sleeper(id: id, until: date, continuation: continuation))
                    defer { state.sleepStarted.removeAll() }
                    return (nil, state.sleepStarted)
                }
                if let outcome { continuation.resume(with: outcome) }
                for waiter in waiting { waiter.resume(returning: date) }
            }
        } onCancel: {
            let cancelled = state.withLock { state -> Sleeper? in
                guard let index = state.sleepers.firstIndex(where: { $0.id == id }) else { return nil }
                return state.sleepers.remove(at: index)
            }
            cancelled?.continuation.resume(throwing: CancellationError())
        }
    }

    /// Waits until someone sleeps; returns the time it sleeps until.
    func nextSleep() async -> Date {
        await withCheckedContinuation { continuation in
            let pending = state.withLock { state -> Date? in
                if let first = state.sleepers.first { return first.until }
                state.sleepStarted.append(continuation)
                return nil
            }
            if let pending { continuation.resume(returning: pending) }
        }
    }

    /// Sets the time and wakes the sleepers whose time has come.
    func advance(to date: Date) {
        let woken = state.withLock { state in
            state.now = date
            let due = state.sleepers.filter { $0.until <= date }
            state.sleepers.removeAll { $0.until <= date }
            return due.map(\.continuation)
        }
        for continuation in woken { continuation.resume() }
    }
}

@Suite struct RefreshTests {
    @Test func schedulerSleepsUntilEachFiringAndRunsTheAction() async throws {
        let clock = ManualClock(CronScheduleTests.date("2026-11-20 10:00"))
        let scheduler = RefreshScheduler(
            schedule: try CronSchedule("0 2 * * 6"), calendar: CronScheduleTests.calendar, clock: clock)
        #expect(scheduler.nextRun == CronScheduleTests.date("2026-11-21 02:00"))
        let firings = Mutex<[Date]>([])
        let task = Task { await scheduler.run { date in firings.withLock { $0.append(date) } } }
        defer { task.cancel() }
        #expect(await clock.nextSleep() == CronScheduleTests.date("2026-11-21 02:00"))
        #expect(firings.withLock { $0 }.isEmpty)
        clock.advance(to: CronScheduleTests.date("2026-11-21 02:00"))
        #expect(await clock.nextSleep() == CronScheduleTests.date("2026-11-28 02:00"))
        #expect(firings.withLock { $0 } == [CronScheduleTests.date("2026-11-21 02:00")])
        #expect(scheduler.nextRun == CronScheduleTests.date("2026-11-28 02:00"))
        // A clock that jumped past several firings runs the action once, then waits for the next one.
        clock.advance(to: CronScheduleTests.date("2026-12-15 12:00"))
        #expect(await clock.nextSleep() == CronScheduleTests.date("2026-12-19 02:00"))
        #expect(firings.withLock { $0.count } == 2)
    }

    @Test func sourcesAreFilesDirectoriesOrURLsWithAKind() throws {
        let csv = SampleFiles.directory.appendingPathComponent("lexikon-zvirat.csv").path
        #expect(try RefreshSource(parsing: csv) == .file(.lexiconCSV, path: csv))
        #expect(try RefreshSource(parsing: "map=/tmp/x.json") == .file(.map, path: "/tmp/x.json"))
        #expect(try RefreshSource(parsing: SampleFiles.directory.path) == .directory(path: SampleFiles.directory.path))
        #expect(
            try RefreshSource(parsing: "https://example.org/data/animals.json")
                == .url(.animalsJSON, URL(string: "https://example.org/data/animals.json")!))
        #expect(
            try RefreshSource(parsing: "adoptions=http://example.org/a?x=1")
                == .url(.adoptions, URL(string: "http://example.org/a?x=1")!))
        for bad in [
            "", "https://example.org/unknown.csv", "/tmp/unknown.txt", "ftp://example.org/animals.json", "http://",
            "map=",
        ] {
            #expect(throws: ZooError.self, "\(bad)") { try RefreshSource(parsing: bad) }
        }
    }

    @Test func refreshFetchesOverHTTPAndImports() async throws {
        let lexicon = try SampleFiles.file(.lexiconCSV), adoptions = try SampleFiles.file(.adoptions)
        let server = try LoopbackHTTPServer(bodies: [
            "/open-data/lexikon-zvirat.csv": Array(lexicon.content), "/adoptions": Array(adoptions.content),
        ])
        defer { server.stop() }
        let scratch = try ScratchDirectory()
        let library = try ZooLibrary(scratchAt: scratch.databasePath)
        let map = SampleFiles.directory.appendingPathComponent("map-metadata.json").path
        let sources = try [
            "\(server.baseURL)/open-data/lexikon-zvirat.csv", "adoptions=\(server.baseURL)/adoptions", map,
        ]
        .map { try RefreshSource(parsing: $0) }
        let clock = ManualClock(CronScheduleTests.date("2026-11-20 10:00"))
        let scheduler = RefreshScheduler(
            schedule: try CronSchedule("0 2 * * 6"), calendar: CronScheduleTests.calendar, clock: clock)
        let refresher = ZooRefresher(library: library, sources: sources, scheduler: scheduler)
        let task = Task { await refresher.run() }
        defer { task.cancel() }
        let firing = await clock.nextSleep()
        clock.advance(to: firing)
        _ = await clock.nextSleep()  // the refresh ran; the scheduler waits for the next firing
        #expect(server.requests == ["/open-data/lexikon-zvirat.csv", "/adoptions"])
        let metadata = try await library.metadata()
        let record = try #require(metadata.lastImport)
        #expect(
            record.succeeded && record.trigger == .schedule
                && record.files.map(\.kind) == [.lexiconCSV, .adoptions, .map])
        #expect(try library.snapshot().catalogue.animal(id: 1).adoption?.englishName == "Lion")
        #expect(try library.hasImported(scheduledFor: firing))
        // The same firing again (another replica) is skipped without fetching.
        #expect(try await refresher.refresh(scheduledFor: firing) == nil)
        #expect(server.requests.count == 2)
    }

    @Test func aFailedFetchKeepsTheDataAndIsRecorded() async throws {
        let server = try LoopbackHTTPServer(bodies: [:])
        defer { server.stop() }
        let scratch = try ScratchDirectory()
        let library = try ZooLibrary(scratchAt: scratch.databasePath)
        try library.loadSampleDataIfEmpty(from: SampleFiles.directory)
        let scheduler = RefreshScheduler(schedule: try CronSchedule("@daily"))
        let refresher = ZooRefresher(
            library: library, sources: [try RefreshSource(parsing: "\(server.baseURL)/animals.json")],
            scheduler: scheduler)
        await #expect(throws: ZooError.self) { try await refresher.refresh(scheduledFor: nil) }
        let failed = try #require(try await library.metadata().lastFailedImport)
        #expect(failed.trigger == .schedule && failed.error?.contains("HTTP 404") == true)
        #expect(try library.snapshot().catalogue.animals.count == 13)
        // Nothing listens: a connection error is a failure too.
        let gone = ZooRefresher(
            library: library, sources: [try RefreshSource(parsing: "map=http://127.0.0.1:1/map")], scheduler: scheduler)
        await #expect(throws: (any Error).self) { try await gone.refresh(scheduledFor: nil) }
    }
    /// A refresh whose JSON is broken says which file, which entry and field, and what was wrong there, in the error
    /// it throws and in the one `zoo status` shows, not Swift's "DecodingError.dataCorrupted … Debug description".
    @Test func aFailedRefreshSaysWhatFailedInWords() async throws {
        let cases: [(file: String, content: String, reason: String)] = [
            (
                "animals.json", #"[{"_id": 1, "name": "Lev"}, {"_id": "two", "name": "Tygr"}]"#,
                "entry 2: field _id should be a whole number, but it is a string"
            ),
            (
                "animals.json", #"[{"_id": 1, "name": "Lev", "map_locations": [{"_id": 5, "geometry": {}}]}]"#,
                "entry 1: field map_locations[0].geometry.coordinates is missing"
            ),
            ("animals.json", #"{"animals": []}"#, "the file should be a list, but it is an object"),
            (
                "animals.json", "[{\"_id\": 1,\n  \"name\": Lev}]",
                "not valid JSON: unexpected text at line 2, column 11"
            ),
            (
                "animals.json", #"[{"_id": 1, "name": "Lev""#,
                "not valid JSON: the text ends before the JSON does (is the file cut short?)"
            ),
            ("map-metadata.json", #"{"nodes": []}"#, "field roads is missing"),
            (
                "map-metadata.json",
                #"{"nodes": [], "roads": [{"_id": 1, "geometry": {"coordinates": [{"_id": 2, "lon": 14.4, "lat": null}]}}]}"#,
                "field roads[0].geometry.coordinates[0].lat is null, where a number belongs"
            ),
            (
                "map-bounds.json", #"{"bounds": {"north": 50.1, "east": "14.4", "south": 50.0, "west": 14.3}}"#,
                "field bounds.east should be a number, but it is a string"
            ),
        ]
        for (file, content, reason) in cases {
            let scratch = try ScratchDirectory()
            let source = scratch.url.appendingPathComponent("open-data")
            try FileManager.default.createDirectory(at: source, withIntermediateDirectories: true)
            let path = source.appendingPathComponent(file).path
            try content.write(toFile: path, atomically: true, encoding: .utf8)
            let library = try ZooLibrary(scratchAt: scratch.databasePath)
            let refresher = ZooRefresher(
                library: library, sources: [try RefreshSource(parsing: source.path)],
                scheduler: RefreshScheduler(schedule: try CronSchedule("@daily")))
            let error = await #expect(throws: ZooError.self, "\(file): \(content)") {
                try await refresher.refresh(scheduledFor: nil)
            }
            #expect(error?.message == "cannot import \(path): \(reason)", "\(content)")
            let recorded = try await library.metadata().lastFailedImport?.error
            #expect(
                recorded?.hasSuffix("cannot import \(path): \(reason)") == true, "\(recorded ?? "nothing recorded")")
        }
    }
}
