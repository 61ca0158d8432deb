import Base
import Foundation
import Storage
import StorageTestSupport
import TLS
import Testing

@testable import HealthCore

@Suite struct UserTests {
    @Test func tokensAuthenticateUntilRevokedAndOnlyTheirHashIsStored() throws {
        let store = try HealthStore.inMemory(using: .testBackend)
        let (alice, token) = try store.createUser(name: "alice")
        #expect(token.count == 64)
        #expect(try store.authenticate(token: token) == alice)
        let second = try store.issueToken(userName: "alice")
        #expect(second != token)
        #expect(try store.authenticate(token: second) == alice)

        let stored = try store.database.read { try $0.query("SELECT hash FROM tokens").compactMap { $0.blob(0) } }
        #expect(stored.count == 2)
        #expect(stored.allSatisfy { $0.count == 32 })
        #expect(stored.contains(SHA256.hash(token.utf8)))
        #expect(!stored.contains(Array(token.utf8)))

        for wrong in ["", "nope", String(token.dropLast()) + "0"] where wrong != token {
            #expect(throws: HealthError.self) { try store.authenticate(token: wrong) }
        }
        try store.revoke(token: token)
        do {
            _ = try store.authenticate(token: token)
            Issue.record("revoked token accepted")
        } catch let error as HealthError {
            #expect(error.category == .unauthenticated)
        }
        #expect(try store.authenticate(token: second) == alice)
    }

    @Test func duplicateNamesAreAlreadyExists() throws {
        let store = try HealthStore.inMemory(using: .testBackend)
        _ = try store.createUser(name: "bob")
        #expect(throws: HealthError(.alreadyExists, "user \"bob\" already exists")) {
            try store.createUser(name: "bob")
        }
    }
}

@Suite struct SampleStoreTests {
    let store: HealthStore
    let alice: Int64
    let bob: Int64

    init() throws {
        store = try HealthStore.inMemory(using: .testBackend)
        alice = try store.createUser(name: "alice").user.id
        bob = try store.createUser(name: "bob").user.id
    }

    @Test func addIsIdempotentAndConflictsKeepTheFirstVersion() throws {
        let first = T.sample(.dietaryWater, 250, "2026-05-01T09:00:00Z")
        var result = try store.add([first], user: alice)
        #expect(result.added == 1)
        #expect(result.anchor == 1)
        result = try store.add([first], user: alice)
        #expect(result.added == 0)
        #expect(result.duplicates == 1)
        #expect(result.anchor == 1)  // nothing changed, the anchor did not move

        var changed = first
        changed.value = 500
        result = try store.add([changed], user: alice)
        #expect(result.conflicts == [SampleConflict(stored: first, rejected: changed)])
        #expect(try store.sample(first.uuid, user: alice).value == 250)
    }

    /// A push's total lists the first 1,000 conflicts and counts the rest, so a million conflicting samples
    /// do not make a million-entry answer.
    @Test func mergedResultsListAThousandConflictsAndCountTheRest() throws {
        let conflict = SampleConflict(
            stored: T.sample(.dietaryWater, 250, "2026-05-01T09:00:00Z"),
            rejected: T.sample(.dietaryWater, 500, "2026-05-01T09:00:00Z"))
        var total = WriteResult()
        for _ in 0..<3 {
            var batch = WriteResult()
            batch.conflicts = Array(repeating: conflict, count: 600)
            total.merge(batch)
        }
        #expect(total.conflicts.count == WriteResult.conflictListLimit)
        #expect(total.conflictsOmitted == 800)
        #expect(total.conflictCount == 1_800)
        var outer = WriteResult()
        outer.merge(total)
        #expect(outer.conflictCount == 1_800)
    }

    @Test func metadataAndZoneRoundTrip() throws {
        var sample = T.sample(.bodyMass, 72.5, "2026-05-01T07:00:00Z", zone: "Europe/Prague")
        sample.metadata = [MetadataEntry("HKWasUserEntered", "1"), MetadataEntry("note", "after \"run\"\n→ ok")]
        _ = try store.add([sample], user: alice)
        #expect(try store.sample(sample.uuid, user: alice) == sample)
    }

    @Test func anotherUsersSampleIsNotFound() throws {
        let sample = T.sample(.stepCount, 100, "2026-05-01T09:00:00Z", "2026-05-01T09:10:00Z")
        _ = try store.add([sample], user: alice)
        #expect(throws: HealthError.self) { try store.sample(sample.uuid, user: bob) }
        do {
            _ = try store.delete([sample.uuid], user: bob)
            Issue.record("bob deleted alice's sample")
        } catch let error as HealthError {
            #expect(error.category == .notFound)
        }
        #expect(try store.samples(SampleQuery(), user: bob).isEmpty)
        #expect(try store.sample(sample.uuid, user: alice) == sample)
    }

    @Test func deletionLeavesATombstoneThatKeepsTheUUIDDeleted() throws {
        let sample = T.sample(.stepCount, 100, "2026-05-01T09:00:00Z", "2026-05-01T09:10:00Z")
        _ = try store.add([sample], user: alice)
        var result = try store.delete([sample.uuid], user: alice)
        #expect(result.deleted == 1)
        #expect(result.anchor == 2)
        #expect(throws: HealthError.self) { try store.sample(sample.uuid, user: alice) }
        result = try store.delete([sample.uuid], user: alice)  // again: fine, nothing changes
        #expect(result.duplicateDeletions == 1)
        #expect(result.anchor == 2)
        result = try store.add([sample], user: alice)  // re-sent by a device that missed the deletion
        #expect(result.alreadyDeleted == 1)
        #expect(try store.samples(SampleQuery(), user: alice).isEmpty)
        // A delete naming one unknown UUID deletes nothing at all.
        let kept = T.sample(.stepCount, 5, "2026-05-01T10:00:00Z")
        _ = try store.add([kept], user: alice)
        #expect(throws: HealthError.self) { try store.delete([kept.uuid, UUID()], user: alice) }
        #expect(try store.sample(kept.uuid, user: alice) == kept)
    }

    @Test func aBatchWithOneBadSampleChangesNothing() throws {
        let good = T.sample(.heartRate, 70, "2026-05-01T09:00:00Z")
        let bad = T.sample(.heartRate, .nan, "2026-05-01T09:01:00Z")
        #expect(throws: HealthError.self) { try store.add([good, bad], user: alice) }
        #expect(try store.samples(SampleQuery(), user: alice).isEmpty)
        #expect(try store.anchor(user: alice) == 0)
    }

    @Test func changesSinceAnAnchorPageInOrderWithDeletions() throws {
        let samples = (0..<5).map { T.sample(.stepCount, Double($0), "2026-05-01T09:0\($0):00Z") }
        _ = try store.add(samples, user: alice)
        _ = try store.delete([samples[1].uuid], user: alice)
        _ = try store.add([T.sample(.stepCount, 9, "2026-05-01T10:00:00Z")], user: bob)  // not alice's log

        var page = try store.changes(user: alice, since: 0, limit: 3)
        // #1 (anchor 2) was deleted since: its row is gone, its tombstone (anchor 6) comes later.
        #expect(page.changes.samples.map(\.uuid) == [samples[0].uuid, samples[2].uuid, samples[3].uuid])
        #expect(page.anchor == 4)
        #expect(page.hasMore)
        page = try store.changes(user: alice, since: page.anchor, limit: 3)
        #expect(page.changes.samples.map(\.uuid) == [samples[4].uuid])
        #expect(page.changes.deletions.map(\.uuid) == [samples[1].uuid])
        #expect(page.changes.deletions.first?.type == .stepCount)
        #expect(page.anchor == 6)
        #expect(!page.hasMore)
        page = try store.changes(user: alice, since: 6, limit: 3)
        #expect(page.changes.isEmpty && page.anchor == 6 && !page.hasMore)
    }

    @Test func queryOptionsFollowHealthKit() throws {
        // 08:50–09:10 overlaps the start, 09:30–09:40 lies inside, 09:50–10:10 overlaps the end, 10:00 is an instant at the end.
        let early = T.sample(.stepCount, 1, "2026-05-01T08:50:00Z", "2026-05-01T09:10:00Z")
        let inside = T.sample(.stepCount, 2, "2026-05-01T09:30:00Z", "2026-05-01T09:40:00Z")
        let late = T.sample(.stepCount, 3, "2026-05-01T09:50:00Z", "2026-05-01T10:10:00Z")
        let atEnd = T.sample(.stepCount, 4, "2026-05-01T10:00:00Z")
        let atStart = T.sample(.stepCount, 5, "2026-05-01T09:00:00Z")
        let heart = T.sample(.heartRate, 60, "2026-05-01T09:30:00Z")
        _ = try store.add([early, inside, late, atEnd, atStart, heart], user: alice)
        func values(_ options: QueryOptions, limit: Int? = nil, ascending: Bool = true) throws -> [Double] {
            try store.samples(
                SampleQuery(
                    types: [.stepCount], from: T.ms("2026-05-01T09:00:00Z"), to: T.ms("2026-05-01T10:00:00Z"),
                    options: options, limit: limit, ascending: ascending), user: alice
            ).map(\.value)
        }
        #expect(try values([]) == [1, 5, 2, 3])
        #expect(try values(.strictStartDate) == [5, 2, 3])
        #expect(try values(.strictEndDate) == [1, 5, 2])
        #expect(try values([.strictStartDate, .strictEndDate]) == [5, 2])
        #expect(try values([], limit: 2, ascending: false) == [3, 2])
        #expect(try store.samples(SampleQuery(types: [.heartRate]), user: alice).map(\.value) == [60])
        #expect(throws: HealthError.self) { try store.samples(SampleQuery(from: 10, to: 5), user: alice) }
    }
}
