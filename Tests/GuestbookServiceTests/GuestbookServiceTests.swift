import Base
import Foundation
import GuestbookAPI
import GuestbookCore
import GuestbookService
import JobsAPI
import JobsService
import RPC
import RPCTesting
import Schema
import StorageTestSupport
import Testing

/// The guestbook's handlers over the in-process transport, on an in-memory store.
struct Fixture {
    let store: GuestbookStore
    let client: GuestbookV1.Guestbook.Client

    /// The Jobs rpcs beside it (with `jobs`).
    let jobsClient: JobsV1.Jobs.Client

    init(jobs: ServiceJobs? = nil, store: GuestbookStore? = nil) throws {
        self.store = try store ?? GuestbookStore.inMemory(using: .testBackend)
        let guestbook = GuestbookService(store: self.store, jobs: jobs?.runner, watchInterval: .milliseconds(10))
        let server = RPCServer(name: "guestbook", services: [guestbook] + (jobs.map { [$0.rpcService] } ?? []))
        let rpc = RPCClient(transports: [InProcessTransport(server: server)])
        client = GuestbookV1.Guestbook.Client(wrapping: rpc)
        jobsClient = JobsV1.Jobs.Client(wrapping: rpc)
    }
}

/// Expects `body` to fail with `code` and a message containing `naming` (the field at fault, or the id).
func expectStatus(
    _ code: StatusCode, naming: String, sourceLocation: SourceLocation = #_sourceLocation,
    _ body: () async throws -> Void
) async {
    do {
        try await body()
        Issue.record("expected \(code.name), the call succeeded", sourceLocation: sourceLocation)
    } catch let error as RPCError {
        #expect(error.code == code, "\(error)", sourceLocation: sourceLocation)
        #expect(error.message.contains(naming), "\(error)", sourceLocation: sourceLocation)
    } catch {
        Issue.record("expected \(code.name), got \(error)", sourceLocation: sourceLocation)
    }
}

@Suite struct GuestbookServiceTests {
    @Test func addsAndGetsAnEntry() async throws {
        let guestbook = try Fixture().client
        let added = try await guestbook.addEntry(.init(animalID: 3, author: "Eva", text: "Lední medvěd plaval."))
        #expect(added.id > 0 && added.animalID == 3 && added.author == "Eva" && added.text == "Lední medvěd plaval.")
        #expect(added.createdMs > 1_700_000_000_000)
        #expect(try await guestbook.getEntry(.init(id: added.id)) == added)
    }

    /// The domain's errors reach the caller with their status and the field's name, no handler catching them.
    @Test func invalidInputIsInvalidArgumentNamingTheField() async throws {
        let guestbook = try Fixture().client
        await expectStatus(.invalidArgument, naming: "text") {
            _ = try await guestbook.addEntry(.init(animalID: 1, author: "", text: ""))
        }
        await expectStatus(.invalidArgument, naming: "text") {
            _ = try await guestbook.addEntry(.init(animalID: 1, author: "", text: String(repeating: "x", count: 501)))
        }
        await expectStatus(.invalidArgument, naming: "author") {
            _ = try await guestbook.addEntry(.init(animalID: 1, author: String(repeating: "x", count: 81), text: "hi"))
        }
        await expectStatus(.invalidArgument, naming: "animal_id") {
            _ = try await guestbook.addEntry(.init(animalID: -1, author: "", text: "hi"))
        }
        await expectStatus(.invalidArgument, naming: "page_size") {
            _ = try await guestbook.listEntries(.init(animalID: 1, pageSize: 0))
        }
        await expectStatus(.invalidArgument, naming: "page_size") {
            _ = try await guestbook.listEntries(.init(animalID: 1, pageSize: 101))
        }
        await expectStatus(.invalidArgument, naming: "page_token") {
            _ = try await guestbook.listEntries(.init(animalID: 1, pageToken: "x"))
        }
        await expectStatus(.invalidArgument, naming: "count") {
            for try await _ in guestbook.watchEntries(.init(animalID: 1, afterID: 0, count: 0)) {}
        }
    }

    @Test func anUnknownEntryIsNotFound() async throws {
        let guestbook = try Fixture().client
        await expectStatus(.notFound, naming: "99") { _ = try await guestbook.getEntry(.init(id: 99)) }
    }

    @Test func pagesThroughAnAnimalsEntries() async throws {
        let guestbook = try Fixture().client
        var added: [GuestbookV1.Entry] = []
        for text in ["one", "two", "three"] {
            added.append(try await guestbook.addEntry(.init(animalID: 5, author: "", text: text)))
        }
        _ = try await guestbook.addEntry(.init(animalID: 6, author: "", text: "another animal"))
        let first = try await guestbook.listEntries(.init(animalID: 5, pageSize: 2))
        #expect(first.entries == Array(added[0..<2]))
        #expect(!first.nextPageToken.isEmpty)
        let second = try await guestbook.listEntries(.init(animalID: 5, pageSize: 2, pageToken: first.nextPageToken))
        #expect(second.entries == [added[2]])
        #expect(second.nextPageToken.isEmpty)
    }

    /// A watch sends the notes stored already, then each new one, and ends after `count`.
    @Test func watchSendsStoredThenNewEntries() async throws {
        let fixture = try Fixture()
        let guestbook = fixture.client
        let before = try await guestbook.addEntry(.init(animalID: 9, author: "", text: "before"))
        let watch = Task {
            var seen: [GuestbookV1.Entry] = []
            for try await entry in guestbook.watchEntries(.init(animalID: 9, afterID: 0, count: 2)) {
                seen.append(entry)
            }
            return seen
        }
        try await Task.sleep(for: .milliseconds(50))
        _ = try await guestbook.addEntry(.init(animalID: 10, author: "", text: "not watched"))
        let after = try await guestbook.addEntry(.init(animalID: 9, author: "", text: "after"))
        #expect(try await watch.value == [before, after])
    }

    @Test func deletesAnEntry() async throws {
        let guestbook = try Fixture().client
        let added = try await guestbook.addEntry(.init(animalID: 3, author: "", text: "Hroch."))
        _ = try await guestbook.deleteEntry(.init(id: added.id))
        await expectStatus(.notFound, naming: "\(added.id)") { _ = try await guestbook.getEntry(.init(id: added.id)) }
        await expectStatus(.notFound, naming: "\(added.id)") {
            _ = try await guestbook.deleteEntry(.init(id: added.id))
        }
    }

    /// CountEntries answers with a job whose result is the EntryCount; a bad animal id is the call's error, no job.
    @Test func countsAnAnimalsEntriesInAJob() async throws {
        let store = try GuestbookStore.inMemory(using: .testBackend)
        let jobs = try await ServiceJobs(
            database: store.database, logger: Logger(label: "guestbook-test"), shutdownGrace: .seconds(1))
        let fixture = try Fixture(jobs: jobs, store: store)
        for text in ["Žirafa.", "Žirafa jí."] {
            _ = try await fixture.client.addEntry(.init(animalID: 5, author: "", text: text))
        }
        let started = try await fixture.client.countEntries(.init(animalID: 5))
        #expect(started.kind == GuestbookService.countJobKind)
        var last: JobsV1.Job?
        for try await job in fixture.jobsClient.watchJob(.init(id: started.id)) { last = job }
        let result = try #require(last?.result, "\(String(describing: last))")
        #expect(last?.state == .succeeded && result.typeName == GuestbookV1.EntryCount.protoName)
        #expect(
            try GuestbookV1.EntryCount(serializedBytes: result.value) == GuestbookV1.EntryCount(animalID: 5, count: 2))
        await expectStatus(.invalidArgument, naming: "animal_id") {
            _ = try await fixture.client.countEntries(.init(animalID: 0))
        }
        // Without a job runner (a server that runs none): FAILED_PRECONDITION, not a crash.
        await expectStatus(.failedPrecondition, naming: "jobs") {
            _ = try await Fixture().client.countEntries(.init(animalID: 5))
        }
    }
}
