import Base
import Foundation
import GuestbookCore
import Storage
import StorageTestSupport
import Testing

/// The guestbook's rules and persistence, without RPC.
@Suite struct GuestbookStoreTests {
    /// Expects `body` to fail with a GuestbookError of `category` whose message starts with `field` (the proto
    /// field's name, so a caller knows which value to fix).
    func expectError(
        _ category: ErrorCategory, naming field: String, sourceLocation: SourceLocation = #_sourceLocation,
        _ body: () async throws -> Void
    ) async {
        do {
            try await body()
            Issue.record("expected \(category) naming \(field), it succeeded", sourceLocation: sourceLocation)
        } catch let error as GuestbookError {
            #expect(error.category == category, "\(error)", sourceLocation: sourceLocation)
            #expect(error.message.hasPrefix(field + " "), "\(error)", sourceLocation: sourceLocation)
        } catch {
            Issue.record("expected a GuestbookError, got \(error)", sourceLocation: sourceLocation)
        }
    }

    @Test func refusesNotesOutsideTheLimits() async throws {
        let store = try GuestbookStore.inMemory(using: .testBackend)
        await expectError(.invalidArgument, naming: "text") {
            _ = try await store.add(animalID: 1, author: "Eva", text: "")
        }
        await expectError(.invalidArgument, naming: "text") {
            _ = try await store.add(animalID: 1, author: "Eva", text: " \n\t")
        }
        await expectError(.invalidArgument, naming: "text") {
            _ = try await store.add(animalID: 1, author: "Eva", text: String(repeating: "ž", count: 501))
        }
        await expectError(.invalidArgument, naming: "author") {
            _ = try await store.add(animalID: 1, author: String(repeating: "a", count: 81), text: "hi")
        }
        await expectError(.invalidArgument, naming: "animal_id") {
            _ = try await store.add(animalID: 0, author: "", text: "hi")
        }
        // The limits themselves are allowed; an empty author is anonymous.
        _ = try await store.add(
            animalID: 1, author: String(repeating: "a", count: 80), text: String(repeating: "ž", count: 500))
        _ = try await store.add(animalID: 1, author: "", text: "hi")
        #expect(try await store.entries(animalID: 1, limit: 10).count == 2)
    }

    /// A text of one letter and a million combining marks is refused by its scalar count, quickly.
    @Test func countsScalarsNotCharacters() async throws {
        let store = try GuestbookStore.inMemory(using: .testBackend)
        let text = "a" + String(repeating: "\u{301}", count: 1_000_000)
        await expectError(.invalidArgument, naming: "text") {
            _ = try await store.add(animalID: 1, author: "", text: text)
        }
    }

    @Test func storesAndReadsBackAcrossReopening() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent(
            "guestbook-\(UUID().uuidString).sqlite"
        ).path
        defer {
            for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
        }
        let added = try await GuestbookStore(path: path).add(
            animalID: 42, author: "Eva", text: "Žirafa se na mě podívala.",
            now: Date(timeIntervalSince1970: 1_700_000_000.5))
        #expect(added.createdMs == 1_700_000_000_500)
        let reopened = try GuestbookStore(path: path)
        #expect(try await reopened.entry(id: added.id) == added)
    }

    @Test func listsAnAnimalsNotesInIDOrderAfterACursor() async throws {
        let store = try GuestbookStore.inMemory(using: .testBackend)
        let first = try await store.add(animalID: 7, author: "a", text: "one")
        _ = try await store.add(animalID: 8, author: "b", text: "other animal")
        let second = try await store.add(animalID: 7, author: "c", text: "two")
        let third = try await store.add(animalID: 7, author: "d", text: "three")
        #expect(try await store.entries(animalID: 7, limit: 10) == [first, second, third])
        #expect(try await store.entries(animalID: 7, afterID: first.id, limit: 1) == [second])
        #expect(try await store.entries(animalID: 7, afterID: third.id, limit: 10).isEmpty)
        await expectError(.invalidArgument, naming: "after_id") {
            _ = try await store.entries(animalID: 7, afterID: -1, limit: 1)
        }
    }

    @Test func anUnknownEntryIsNotFound() async throws {
        let store = try GuestbookStore.inMemory(using: .testBackend)
        do {
            _ = try await store.entry(id: 12)
            Issue.record("expected NOT_FOUND")
        } catch let error as GuestbookError {
            #expect(error == GuestbookError.unknownEntry(id: 12))
            #expect(error.category == .notFound)
        }
        await expectError(.invalidArgument, naming: "id") { _ = try await store.entry(id: 0) }
    }

    @Test func deletesANoteAndCountsAnAnimalsNotes() async throws {
        let store = try GuestbookStore.inMemory(using: .testBackend)
        let first = try await store.add(animalID: 3, author: "", text: "Hroch.")
        _ = try await store.add(animalID: 3, author: "", text: "Hroch zívá.")
        _ = try await store.add(animalID: 4, author: "", text: "Slon.")
        #expect(try store.count(animalID: 3) == 2)
        try await store.delete(id: first.id)
        #expect(try store.count(animalID: 3) == 1)
        #expect(try store.count(animalID: 5) == 0)
        await expectError(.notFound, naming: "no") { try await store.delete(id: first.id) }
        await expectError(.invalidArgument, naming: "id") { try await store.delete(id: 0) }
        await expectError(.invalidArgument, naming: "animal_id") { _ = try store.count(animalID: 0) }
    }
}
