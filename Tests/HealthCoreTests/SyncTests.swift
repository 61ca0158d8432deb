import Foundation
import StorageTestSupport
import Synchronization
import Testing

@testable import HealthCore

/// A connection that drops: fails a push after some batches (before or after the server committed the
/// next one) or a pull after some pages.
final class FlakyRemote: HealthRemote {
    struct Dropped: Error {}
    let base: InProcessRemote
    let pushBatchesBeforeDrop: Int?
    /// The server commits the batch at which the connection drops, and the device never hears back.
    let dropAfterCommit: Bool
    let pullPagesBeforeDrop: Int?
    let pushedBatches = Mutex(0)
    let pulledPages = Mutex(0)

    init(
        _ base: InProcessRemote, pushBatchesBeforeDrop: Int? = nil, dropAfterCommit: Bool = false,
        pullPagesBeforeDrop: Int? = nil
    ) {
        self.base = base
        self.pushBatchesBeforeDrop = pushBatchesBeforeDrop
        self.dropAfterCommit = dropAfterCommit
        self.pullPagesBeforeDrop = pullPagesBeforeDrop
    }

    func pushedAnchor(device: String, scope: String) async throws -> Int64 {
        try await base.pushedAnchor(device: device, scope: scope)
    }

    func push(device: String, scope: String, batches: @escaping @Sendable (PushWriter) async throws -> Void)
        async throws -> WriteResult
    {
        try await base.push(device: device, scope: scope) { writer in
            try await batches(
                PushWriter { batch in
                    let sent = self.pushedBatches.withLock { count in
                        count += 1
                        return count
                    }
                    if let limit = self.pushBatchesBeforeDrop, sent > limit {
                        if self.dropAfterCommit { try await writer.send(batch) }
                        throw Dropped()
                    }
                    try await writer.send(batch)
                })
        }
    }

    func pull(
        device: String, since: Int64, filter: SyncFilter, pageSize: Int,
        receive: @escaping @Sendable (ChangeBatch) async throws -> Void
    ) async throws {
        try await base.pull(device: device, since: since, filter: filter, pageSize: pageSize) { page in
            let received = self.pulledPages.withLock { count in
                count += 1
                return count
            }
            if let limit = self.pullPagesBeforeDrop, received > limit { throw Dropped() }
            try await receive(page)
        }
    }
}

@Suite struct SyncTests {
    let server: HealthStore
    let user: Int64
    let remote: InProcessRemote

    init() throws {
        server = try HealthStore.inMemory(using: .testBackend)
        user = try server.createUser(name: "alice").user.id
        remote = InProcessRemote(server: server, user: user)
    }

    func uuids(_ device: DeviceStore) throws -> Set<UUID> { Set(try device.samples(SampleQuery()).map(\.uuid)) }
    func serverUUIDs() throws -> Set<UUID> { Set(try server.samples(SampleQuery(), user: user).map(\.uuid)) }

    func steps(_ count: Int, from hour: Int = 8, source: String) -> [HealthSample] {
        (0..<count).map { index in
            let start = T.ms("2026-05-01T00:00:00Z") + Int64(hour) * 3_600_000 + Int64(index) * 60_000
            return HealthSample(
                type: .stepCount, value: Double(index % 50), start: start, end: start + 60_000, source: source)
        }
    }

    @Test func twoDevicesConvergeAndDeletionsTravelBothWays() async throws {
        let phone = try DeviceStore.inMemory(using: .testBackend), watch = try DeviceStore.inMemory(using: .testBackend)
        _ = try phone.add(steps(3, source: "iPhone"))
        _ = try watch.add(steps(2, from: 9, source: "Apple Watch"))
        let phoneSync = HealthSync(device: phone, remote: remote), watchSync = HealthSync(device: watch, remote: remote)
        _ = try await phoneSync.run()
        _ = try await watchSync.run()
        _ = try await phoneSync.run()
        #expect(try uuids(phone).count == 5)
        #expect(try uuids(phone) == uuids(watch))
        #expect(try uuids(phone) == serverUUIDs())
        // Samples are stored identically everywhere, content and all.
        #expect(try phone.samples(SampleQuery()) == watch.samples(SampleQuery()))

        let fromWatch = try watch.samples(SampleQuery(sources: ["Apple Watch"])).first!.uuid
        let fromPhone = try phone.samples(SampleQuery(sources: ["iPhone"])).first!.uuid
        _ = try phone.delete([fromWatch])  // the phone deletes what the watch recorded
        _ = try watch.delete([fromPhone])  // and the watch what the phone did
        _ = try await phoneSync.run()
        _ = try await watchSync.run()
        _ = try await phoneSync.run()
        #expect(try uuids(phone).count == 3)
        #expect(try uuids(phone) == uuids(watch))
        #expect(try uuids(phone) == serverUUIDs())
        #expect(try !serverUUIDs().contains(fromWatch) && !serverUUIDs().contains(fromPhone))
    }

    /// Progress is a fraction of each phase, not the 0 the gateway's bar showed throughout: the push's through the
    /// device's change log, then the pull's through the server's, each rising to 1.
    @Test func progressGivesEachPhasesFraction() async throws {
        let phone = try DeviceStore.inMemory(using: .testBackend), watch = try DeviceStore.inMemory(using: .testBackend)
        _ = try watch.add(steps(6, from: 9, source: "Apple Watch"))
        _ = try await HealthSync(device: watch, remote: remote).run()
        _ = try phone.add(steps(10, source: "iPhone"))
        let seen = Locked<[SyncProgress]>([])
        _ = try await HealthSync(device: phone, remote: remote, batchSize: 4).run { progress in
            seen.withLock { $0.append(progress) }
        }
        let all = seen.withLock { $0 }
        let push = all.filter { $0.phase == .push }, pull = all.filter { $0.phase == .pull }
        #expect(push.map(\.pushed) == [4, 8, 10])
        #expect(push.map(\.fraction) == [0.4, 0.8, 1])
        // The server's log: the watch's 6 and the phone's 10, read in pages of 4; the phone's own are not sent back.
        #expect(pull.map(\.pulled) == [4, 6, 6, 6] && pull.allSatisfy { $0.pushed == 10 })
        #expect(pull.map(\.fraction) == [0.25, 0.5, 0.75, 1])
    }

    @Test func runningItAgainChangesNothing() async throws {
        let phone = try DeviceStore.inMemory(using: .testBackend)
        _ = try phone.add(steps(10, source: "iPhone"))
        let sync = HealthSync(device: phone, remote: remote, batchSize: 4)
        let first = try await sync.run()
        #expect(first.pushedChanges == 10)
        #expect(first.pushed.added == 10)
        // Issue 39: the first sync after an import pulled back all it had pushed ("pulled 200000 (added 0)").
        #expect(first.pulledChanges == 0 && first.pulled.duplicates == 0)
        #expect(try phone.pulledAnchor(scope: "") == server.anchor(user: user))  // past them all the same
        let serverAnchor = try server.anchor(user: user), localAnchor = try phone.store.anchor(user: phone.user)
        let again = try await sync.run()
        #expect(again.pushedChanges == 0)
        #expect(again.pulledChanges == 0)
        #expect(try server.anchor(user: user) == serverAnchor)
        #expect(try phone.store.anchor(user: phone.user) == localAnchor)
        // Pulled rows are not pushed back: a second device's samples do not bounce.
        let watch = try DeviceStore.inMemory(using: .testBackend)
        let watchFirst = try await HealthSync(device: watch, remote: remote).run()
        #expect(watchFirst.pulled.added == 10)
        let watchAgain = try await HealthSync(device: watch, remote: remote).run()
        #expect(watchAgain.pushedChanges == 0 && watchAgain.pulledChanges == 0)
    }

    @Test func conflictsKeepTheServersFirstVersionEverywhereAndAreReported() async throws {
        let phone = try DeviceStore.inMemory(using: .testBackend), watch = try DeviceStore.inMemory(using: .testBackend)
        let shared = UUID()
        let phoneVersion = T.sample(.dietaryWater, 250, "2026-05-01T09:00:00Z", source: "iPhone", uuid: shared)
        var watchVersion = phoneVersion
        watchVersion.value = 300
        _ = try phone.add([phoneVersion])
        _ = try watch.add([watchVersion])
        _ = try await HealthSync(device: phone, remote: remote).run()
        let report = try await HealthSync(device: watch, remote: remote).run()
        #expect(report.pushed.conflicts == [SampleConflict(stored: phoneVersion, rejected: watchVersion)])
        #expect(report.pulled.conflicts == [SampleConflict(stored: phoneVersion, rejected: watchVersion)])
        // Issue 39: the text printed that conflict twice, met on the push and again on the pull.
        #expect(report.conflicts.count == 1 && report.conflictCount == 1)
        #expect(
            report.lines.filter { $0.hasPrefix("conflict: ") } == [
                "conflict: \(shared.uuidString.lowercased()) kept value 250.0, refused 300.0"
            ])
        #expect(try watch.sample(shared).value == 250)
        #expect(try server.sample(shared, user: user).value == 250)
        let again = try await HealthSync(device: watch, remote: remote).run()
        #expect(again.conflicts.isEmpty)
    }

    /// Issue 39: the text summary said only what was added (and deleted on the pull): duplicates, deletions on
    /// the server and samples refused as deleted before went unsaid.
    @Test func theSummarySaysEverythingThatHappenedBothWays() async throws {
        let phone = try DeviceStore.inMemory(using: .testBackend),
            tablet = try DeviceStore.inMemory(using: .testBackend)
        let both = T.sample(.stepCount, 5, "2026-05-01T09:00:00Z", "2026-05-01T09:01:00Z")
        let doomed = T.sample(.stepCount, 7, "2026-05-01T10:00:00Z", "2026-05-01T10:01:00Z")
        _ = try tablet.add([both])
        _ = try await HealthSync(device: tablet, remote: remote).run()
        _ = try phone.add([doomed])
        _ = try await HealthSync(device: phone, remote: remote).run()  // the phone gets `both`; the server `doomed`
        _ = try await HealthSync(device: tablet, remote: remote).run()
        _ = try tablet.delete([doomed.uuid])
        _ = try await HealthSync(device: tablet, remote: remote).run()
        // a third device that still has `doomed` and `both` of its own
        let late = try DeviceStore.inMemory(using: .testBackend)
        _ = try late.add([both, doomed])
        let report = try await HealthSync(device: late, remote: remote).run()
        #expect(
            report.lines == [
                "pushed 2 changes (server added 0, deleted 0, 1 already stored, 1 refused as deleted before), "
                    + "pulled 2 (added 0, deleted 1, 1 already stored)"
            ], "\(report.lines)")
    }

    @Test func aPushDroppedMidwayResumesWithoutLossOrDuplicates() async throws {
        let phone = try DeviceStore.inMemory(using: .testBackend)
        _ = try phone.add(steps(250, source: "iPhone"))
        let flaky = FlakyRemote(remote, pushBatchesBeforeDrop: 1)
        await #expect(throws: FlakyRemote.Dropped.self) {
            try await HealthSync(device: phone, remote: flaky, batchSize: 100).run()
        }
        #expect(try serverUUIDs().count == 100)  // the first batch committed with its anchor
        let resumed = try await HealthSync(device: phone, remote: remote, batchSize: 100).run()
        #expect(resumed.pushedChanges == 150)  // from where the server's cursor says, not from the start
        #expect(resumed.pushed.duplicates == 0)
        #expect(try serverUUIDs() == uuids(phone))
        #expect(try server.anchor(user: user) == 250)  // every sample added once
    }

    @Test func aBatchCommittedButNeverAcknowledgedIsNotSentAgain() async throws {
        let phone = try DeviceStore.inMemory(using: .testBackend)
        _ = try phone.add(steps(250, source: "iPhone"))
        let flaky = FlakyRemote(remote, pushBatchesBeforeDrop: 1, dropAfterCommit: true)
        await #expect(throws: FlakyRemote.Dropped.self) {
            try await HealthSync(device: phone, remote: flaky, batchSize: 100).run()
        }
        #expect(try serverUUIDs().count == 200)
        let resumed = try await HealthSync(device: phone, remote: remote, batchSize: 100).run()
        #expect(resumed.pushedChanges == 50)
        #expect(try serverUUIDs() == uuids(phone))
    }

    @Test func aPullDroppedMidwayResumesAfterTheLastCommittedPage() async throws {
        let phone = try DeviceStore.inMemory(using: .testBackend),
            tablet = try DeviceStore.inMemory(using: .testBackend)
        _ = try phone.add(steps(250, source: "iPhone"))
        _ = try await HealthSync(device: phone, remote: remote).run()
        let flaky = FlakyRemote(remote, pullPagesBeforeDrop: 2)
        await #expect(throws: FlakyRemote.Dropped.self) {
            try await HealthSync(device: tablet, remote: flaky, batchSize: 100).run()
        }
        #expect(try uuids(tablet).count == 200)
        #expect(try tablet.pulledAnchor(scope: "") == 200)
        let resumed = try await HealthSync(device: tablet, remote: remote, batchSize: 100).run()
        #expect(resumed.pulledChanges == 50)
        #expect(resumed.pulled.duplicates == 0)
        #expect(try uuids(tablet) == serverUUIDs())
    }

    @Test func aLimitedSyncKeepsItsOwnCursorsSoAFullSyncStillSendsTheRest() async throws {
        let phone = try DeviceStore.inMemory(using: .testBackend)
        _ = try phone.add(steps(5, source: "iPhone") + [T.sample(.dietaryWater, 250, "2026-05-01T12:00:00Z")])
        let limited = try await HealthSync(device: phone, remote: remote).run(
            filter: SyncFilter(types: [.dietaryWater]))
        #expect(limited.pushed.added == 1)
        #expect(try server.samples(SampleQuery(), user: user).map(\.type) == [.dietaryWater])
        let full = try await HealthSync(device: phone, remote: remote).run()
        #expect(full.pushed.added == 5)
        #expect(full.pushed.duplicates == 1)
        #expect(try serverUUIDs() == uuids(phone))
        // A time range: only what overlaps it comes down (08:01–08:02 only touches it).
        let tablet = try DeviceStore.inMemory(using: .testBackend)
        let range = SyncFilter(from: T.ms("2026-05-01T08:02:00Z"), to: T.ms("2026-05-01T08:04:00Z"))
        _ = try await HealthSync(device: tablet, remote: remote).run(filter: range)
        #expect(
            try tablet.samples(SampleQuery()).map(\.start) == [
                T.ms("2026-05-01T08:02:00Z"), T.ms("2026-05-01T08:03:00Z"),
            ])
    }
}

/// A value shared with a `@Sendable` callback.
final class Locked<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value
    init(_ value: Value) { self.value = value }
    func withLock<R>(_ body: (inout Value) -> R) -> R { lock.withLock { body(&value) } }
}
