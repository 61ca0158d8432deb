import Foundation
import HealthAPI
import HealthCore
import RPC
import RPCTesting
import Schema
import StorageTestSupport
import TestSupport
import Testing

@testable import HealthBridge
@testable import HealthService

/// The health service over the in-process transport, on an in-memory store.
struct HealthFixture {
    let store: HealthStore
    let client: HealthV1.Health.Client

    init() throws {
        store = try HealthStore.inMemory(using: .testBackend)
        let server = RPCServer(name: "health", services: [HealthService(store: store)])
        client = HealthV1.Health.Client(wrapping: RPCClient(transports: [InProcessTransport(server: server)]))
    }

    func options(_ token: String) -> CallOptions { CallOptions(metadata: ["authorization": "Bearer \(token)"]) }

    func user(_ name: String) async throws -> String {
        try await client.createUser(HealthV1.CreateUserRequest(name: name)).token
    }
}

func ms(_ text: String) -> Int64 { Timestamps.parse(text)!.0 }

func sample(
    _ type: String, _ value: Double, _ start: String, _ end: String? = nil, unit: String = "", uuid: UUID = UUID()
) -> HealthV1.Sample {
    HealthV1.Sample(
        uuid: uuid.uuidString, type: type, value: value, unit: unit, startMs: ms(start), endMs: ms(end ?? start),
        source: "iPhone")
}

func expectStatus(_ code: StatusCode, _ comment: Comment? = nil, _ body: () async throws -> Void) async {
    do {
        try await body()
        Issue.record("expected \(code), got success. \(comment?.description ?? "")")
    } catch let error as RPCError {
        #expect(error.code == code, "\(error) \(comment?.description ?? "")")
    } catch {
        Issue.record("expected RPCError \(code), got \(error)")
    }
}

@Suite struct HealthServiceTests {
    @Test func callsWithoutAValidTokenAreUnauthenticated() async throws {
        let health = try HealthFixture()
        let token = try await health.user("alice")
        await expectStatus(.unauthenticated) { _ = try await health.client.getAccount(.init()) }
        await expectStatus(.unauthenticated) {
            _ = try await health.client.getAccount(.init(), options: health.options("nope"))
        }
        await expectStatus(.unauthenticated) {
            _ = try await health.client.getAccount(.init(), options: CallOptions(metadata: ["authorization": token]))
        }
        #expect(try await health.client.getAccount(.init(), options: health.options(token)).name == "alice")
        let second = try await health.client.issueToken(.init(), options: health.options(token)).token
        _ = try await health.client.revokeToken(.init(), options: health.options(token))
        await expectStatus(.unauthenticated) {
            _ = try await health.client.getAccount(.init(), options: health.options(token))
        }
        #expect(try await health.client.getAccount(.init(), options: health.options(second)).name == "alice")
        await expectStatus(.alreadyExists) { _ = try await health.user("alice") }
    }

    @Test func usersSeeOnlyTheirOwnSamples() async throws {
        let health = try HealthFixture()
        let alice = health.options(try await health.user("alice")), bob = health.options(try await health.user("bob"))
        let uuid = UUID()
        _ = try await health.client.addSamples(
            .init(samples: [sample("dietaryWater", 0.5, "2026-05-01T09:00:00Z", unit: "L", uuid: uuid)]), options: alice
        )
        let stored = try await health.client.getSample(.init(uuid: uuid.uuidString, unit: "fl_oz_us"), options: alice)
            .sample
        #expect(abs((stored?.value ?? 0) - 16.907) < 0.001)
        await expectStatus(.notFound) {
            _ = try await health.client.getSample(.init(uuid: uuid.uuidString), options: bob)
        }
        await expectStatus(.notFound) {
            _ = try await health.client.deleteSamples(.init(uuids: [uuid.uuidString]), options: bob)
        }
        #expect(try await health.client.querySamples(.init(), options: bob).samples.isEmpty)
        #expect(
            try await health.client.querySamples(.init(types: ["dietaryWater"]), options: alice).samples.map(\.value)
                == [500])
    }

    /// Issue 39: a query stopped at its limit without saying more matched. A page carries the next's cursor.
    @Test func querySamplesPagesWithACursor() async throws {
        let health = try HealthFixture()
        let alice = health.options(try await health.user("alice"))
        _ = try await health.client.addSamples(
            .init(samples: (0..<3).map { sample("stepCount", Double($0), "2026-05-01T09:0\($0):00Z") }), options: alice)
        let first = try await health.client.querySamples(
            .init(types: ["stepCount"], limit: 2, descending: true), options: alice)
        #expect(first.samples.map(\.value) == [2, 1] && !first.next.isEmpty)
        let second = try await health.client.querySamples(
            .init(types: ["stepCount"], limit: 2, descending: true, after: first.next), options: alice)
        #expect(second.samples.map(\.value) == [0] && second.next.isEmpty)
        await expectStatus(.invalidArgument) {
            _ = try await health.client.querySamples(.init(types: ["stepCount"], after: "yesterday"), options: alice)
        }
    }

    @Test func badInputGetsAClearStatusAndChangesNothing() async throws {
        let health = try HealthFixture()
        let alice = health.options(try await health.user("alice"))
        let good = sample("heartRate", 60, "2026-05-01T09:00:00Z")
        for bad in [
            sample("heartRate", .nan, "2026-05-01T09:00:00Z"),
            sample("heartRate", 60, "2026-05-01T10:00:00Z", "2026-05-01T09:00:00Z"),
            sample("heartRate", 60, "2026-05-01T09:00:00Z", unit: "kg"), sample("vo2Max", 60, "2026-05-01T09:00:00Z"),
            HealthV1.Sample(uuid: "not-a-uuid", type: "heartRate", value: 60, startMs: 0, endMs: 0, source: "x"),
        ] {
            await expectStatus(.invalidArgument, "\(bad)") {
                _ = try await health.client.addSamples(.init(samples: [good, bad]), options: alice)
            }
        }
        var huge = good
        huge.metadata = [HealthV1.MetadataEntry(key: "note", value: String(repeating: "x", count: 1 << 20))]
        await expectStatus(.invalidArgument) {
            _ = try await health.client.addSamples(.init(samples: [huge]), options: alice)
        }
        let many = (0..<10_001).map { _ in good }
        await expectStatus(.resourceExhausted) {
            _ = try await health.client.addSamples(.init(samples: many), options: alice)
        }
        #expect(try await health.client.getAccount(.init(), options: alice).sampleCount == 0)
    }

    @Test func statisticsByDayInPrague() async throws {
        let health = try HealthFixture()
        let alice = health.options(try await health.user("alice"))
        _ = try await health.client.addSamples(
            .init(samples: [sample("stepCount", 400, "2026-05-01T23:45:00+02:00", "2026-05-02T00:45:00+02:00")]),
            options: alice)
        let answer = try await health.client.getStatistics(
            .init(
                type: "stepCount", fromMs: ms("2026-05-01T00:00:00+02:00"), toMs: ms("2026-05-03T00:00:00+02:00"),
                interval: .day,
                timeZone: "Europe/Prague"), options: alice)
        #expect(answer.unit == "count")
        #expect(answer.buckets.map(\.sum) == [100, 300])
        let today = try await health.client.getStatistics(
            .init(type: "stepCount", preset: .today, timeZone: "Europe/Prague", nowMs: ms("2026-05-02T12:00:00+02:00")),
            options: alice)
        #expect(today.buckets.map(\.sum) == [300])
        await expectStatus(.invalidArgument) {
            _ = try await health.client.getStatistics(
                .init(type: "stepCount", preset: .today, timeZone: "Mars/Base"), options: alice)
        }
        await expectStatus(.invalidArgument) {
            _ = try await health.client.getStatistics(.init(type: "stepCount"), options: alice)
        }
        // Issue 39: a preset beside a range answered the preset's range without a word.
        await expectStatus(.invalidArgument) {
            _ = try await health.client.getStatistics(
                .init(
                    type: "stepCount", fromMs: ms("2026-05-01T12:00:00+02:00"), preset: .today,
                    timeZone: "Europe/Prague"), options: alice)
        }
    }

    @Test func twoDevicesSyncThroughTheServiceAndConverge() async throws {
        let health = try HealthFixture()
        let token = try await health.user("alice")
        let remote = RPCHealthRemote(client: health.client, token: token)
        let phone = try DeviceStore.inMemory(using: .testBackend), watch = try DeviceStore.inMemory(using: .testBackend)
        let start = ms("2026-05-01T08:00:00Z")
        _ = try phone.add(
            (0..<2500).map {
                HealthSample(
                    type: .stepCount, value: 10, start: start + Int64($0) * 60_000,
                    end: start + Int64($0) * 60_000 + 60_000, source: "iPhone")
            })
        _ = try watch.add([HealthSample(type: .heartRate, value: 61, start: start, end: start, source: "Apple Watch")])
        let first = try await HealthSync(device: phone, remote: remote).run()
        #expect(first.pushed.added == 2500)
        // Issue 39: the pull sent back all 2,500 the push had just sent.
        #expect(first.pulledChanges == 0 && first.pulled.duplicates == 0)
        _ = try await HealthSync(device: watch, remote: remote).run()
        _ = try await HealthSync(device: phone, remote: remote).run()
        #expect(try phone.samples(SampleQuery()).count == 2501)
        #expect(try Set(phone.samples(SampleQuery()).map(\.uuid)) == Set(watch.samples(SampleQuery()).map(\.uuid)))
        let victim = try phone.samples(SampleQuery(limit: 1))[0].uuid
        _ = try watch.delete([victim])
        _ = try await HealthSync(device: watch, remote: remote).run()
        let again = try await HealthSync(device: phone, remote: remote).run()
        #expect(again.pulled.deleted == 1)
        #expect(try phone.samples(SampleQuery()).count == 2500)
        let quiet = try await HealthSync(device: phone, remote: remote).run()
        #expect(quiet.pushedChanges == 0 && quiet.pulledChanges == 0)
    }

    @Test func csvExportStreams() async throws {
        let health = try HealthFixture()
        let alice = health.options(try await health.user("alice"))
        _ = try await health.client.addSamples(
            .init(samples: [sample("dietaryWater", 250, "2026-05-01T09:00:00Z")]), options: alice)
        var text = ""
        for try await chunk in health.client.exportCSV(.init(type: "dietaryWater", unit: "L"), options: alice) {
            text += chunk.text
        }
        #expect(text.hasPrefix("uuid,type,start,end,value,unit,source,time_zone\r\n"))
        #expect(text.contains(",dietaryWater,2026-05-01T09:00:00Z,2026-05-01T09:00:00Z,0.25,L,iPhone,"))
    }

    /// A push is one client stream; the server commits each batch with the device's anchor as it arrives,
    /// not when the stream ends: the cursor moves while the device is still sending.
    @Test func pushCommitsEachBatchOfTheStreamAsItArrives() async throws {
        let health = try HealthFixture()
        let alice = health.options(try await health.user("alice"))
        let client = health.client
        @Sendable func batch(_ through: Int64, _ count: Int) -> HealthV1.PushRequest {
            HealthV1.PushRequest(
                deviceID: "phone", scope: "",
                samples: (0..<count).map { _ in sample("stepCount", 10, "2026-05-01T08:00:00Z", "2026-05-01T08:01:00Z")
                },
                throughAnchor: through)
        }
        let response = try await client.push(options: alice) { writer in
            try await writer.send(batch(1_000, 1_000))
            // The first batch is committed before the stream ends (polled for 5 s, scaled).
            var cursor: Int64 = 0
            for _ in 0..<Int(500 * TestTime.scale) where cursor < 1_000 {
                cursor = try await client.getPushCursor(.init(deviceID: "phone"), options: alice).anchor
                if cursor < 1_000 { try await Task.sleep(for: .milliseconds(10)) }
            }
            #expect(cursor == 1_000)
            try await writer.send(batch(2_000, 1_000))
        }
        #expect(response.summary?.added == 2_000)
        #expect(response.committedAnchor == 2_000)
    }

    /// A bad batch ends the push with a status naming it; the batches before it stay committed (the device
    /// resumes after them) and nothing of it is stored.
    @Test func aBadBatchEndsThePushAndKeepsTheOnesBefore() async throws {
        let health = try HealthFixture()
        let alice = health.options(try await health.user("alice"))
        let good = sample("heartRate", 60, "2026-05-01T09:00:00Z")
        var bad = [sample("heartRate", 61, "2026-05-01T09:01:00Z"), sample("heartRate", .nan, "2026-05-01T09:02:00Z")]
        func push(_ batches: [HealthV1.PushRequest]) async throws {
            _ = try await health.client.push(options: alice) { writer in
                for batch in batches { try await writer.send(batch) }
            }
        }
        do {
            try await push([
                HealthV1.PushRequest(deviceID: "phone", samples: [good], throughAnchor: 1),
                HealthV1.PushRequest(deviceID: "phone", samples: bad, throughAnchor: 3),
            ])
            Issue.record("a NaN value was accepted")
        } catch let error as RPCError {
            #expect(error.code == .invalidArgument)
            #expect(error.message.contains("push batch #1"), "\(error.message)")
            #expect(error.message.contains("not a finite number"), "\(error.message)")
        }
        #expect(try await health.client.getPushCursor(.init(deviceID: "phone"), options: alice).anchor == 1)
        #expect(try await health.client.getAccount(.init(), options: alice).sampleCount == 1)

        bad = (0..<10_001).map { _ in sample("heartRate", 60, "2026-05-01T09:00:00Z") }
        await expectStatus(.resourceExhausted) {
            try await push([HealthV1.PushRequest(deviceID: "phone", samples: bad, throughAnchor: 9)])
        }
        await expectStatus(.invalidArgument) {
            try await push([
                HealthV1.PushRequest(deviceID: "phone", throughAnchor: 2),
                HealthV1.PushRequest(deviceID: "watch", throughAnchor: 3),
            ])
        }
        await expectStatus(.invalidArgument) {
            try await push([HealthV1.PushRequest(deviceID: "", samples: [good], throughAnchor: 5)])
        }
        #expect(try await health.client.getPushCursor(.init(deviceID: "phone"), options: alice).anchor == 2)
        #expect(try await health.client.getPushCursor(.init(deviceID: "watch"), options: alice).anchor == 0)
        #expect(try await health.client.getAccount(.init(), options: alice).sampleCount == 1)
        await expectStatus(.unauthenticated) {
            _ = try await health.client.push(options: health.options("revoked")) { writer in
                try await writer.send(HealthV1.PushRequest(deviceID: "phone", samples: [good], throughAnchor: 1))
            }
        }
    }
}

/// The sync's streams have no deadline for the whole call (a million-sample first sync outlived the 60 s one
/// and failed DEADLINE_EXCEEDED); they fail only when no batch moves for the limit.
@Suite struct StallLimitTests {
    @Test func aStreamThatKeepsMovingOutlivesTheLimit() async throws {
        let start = ContinuousClock.now, limit = TestTime.scaled(.milliseconds(500))
        // Batches 50 ms apart for three times the limit: the stream outlives it as long as they keep coming.
        let batches = try await withStallLimit(limit, what: "push") { moved in
            var count = 0
            while ContinuousClock.now - start < limit * 3 {
                try await Task.sleep(for: .milliseconds(50))
                moved()
                count += 1
            }
            return count
        }
        #expect(batches >= 3 && ContinuousClock.now - start >= limit * 3)
    }

    @Test func aStalledStreamIsDeadlineExceededAndCancelled() async throws {
        let start = ContinuousClock.now
        let error = await #expect(throws: RPCError.self) {
            try await withStallLimit(.milliseconds(300), what: "pull") { moved in
                moved()
                try await Task.sleep(for: .seconds(30))  // cancelled when the limit passes
            }
        }
        #expect(
            error?.code == .deadlineExceeded && error?.message.contains("pull") == true, "\(String(describing: error))")
        #expect(ContinuousClock.now - start < TestTime.scaled(.seconds(10)))
    }
}

/// A stream's next page reserves room reckoned from its last page's encoded size, not a fixed guess per sample.
@Suite struct PageRoomTests {
    @Test func theNextPageTakesTwiceTheLastPagesSizePerItem() {
        // Samples with 4 KiB of metadata: a fixed 256 bytes a sample would reserve a sixteenth of what the page holds.
        let room = HealthService.nextPageRoom(lastEncoded: 500 * 4_200, items: 500, pageSize: 500)
        #expect(room >= 2 * 500 * 4_200)
        #expect(room < 2 * 500 * 4_300)
        // A short last page still reckons for a full one.
        #expect(HealthService.nextPageRoom(lastEncoded: 10 * 100, items: 10, pageSize: 1_000) >= 2 * 1_000 * 100)
        #expect(HealthService.nextPageRoom(lastEncoded: 0, items: 0, pageSize: 1_000) == 0)
    }
}
