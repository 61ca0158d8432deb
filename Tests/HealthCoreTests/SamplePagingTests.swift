import Foundation
import StorageTestSupport
import Testing

@testable import HealthCore

/// Issue 39: `list` stopped at the 1,000 oldest samples without a word. Pages carry the cursor of the next.
@Suite struct SamplePagingTests {
    @Test func pagesWalkEverySampleOnceNewestFirstAndSayWhenThereIsMore() throws {
        let store = try HealthStore.inMemory(using: .testBackend)
        let user = try store.createUser(name: "alice").user.id
        // 25 samples, several at the same instant (the cursor's UUID breaks the tie).
        let samples = (0..<25).map { index in
            T.sample(
                .stepCount, Double(index), Timestamps.format(T.ms("2026-05-01T09:00:00Z") + Int64(index / 3) * 60_000))
        }
        _ = try store.add(samples, user: user)
        for ascending in [false, true] {
            var seen: [HealthSample] = [], cursor: SampleCursor?, pages = 0
            repeat {
                let page = try store.page(
                    SampleQuery(types: [.stepCount], limit: 10, ascending: ascending, after: cursor), user: user)
                seen += page.samples
                cursor = page.next
                pages += 1
                #expect(page.samples.count == (cursor == nil ? 5 : 10))
            } while cursor != nil && pages < 10
            #expect(pages == 3)
            #expect(Set(seen.map(\.uuid)) == Set(samples.map(\.uuid)) && seen.count == 25)
            let starts = seen.map(\.start)
            #expect(starts == (ascending ? starts.sorted() : starts.sorted(by: >)))
        }
        // Exactly a page's worth: no next.
        #expect(try store.page(SampleQuery(types: [.stepCount], limit: 25), user: user).next == nil)
        let cursor = try SampleCursor(text: SampleCursor(start: 5, uuid: samples[0].uuid).text)
        #expect(cursor == SampleCursor(start: 5, uuid: samples[0].uuid))
        #expect(throws: HealthError.self) { try SampleCursor(text: "yesterday") }
    }
}
