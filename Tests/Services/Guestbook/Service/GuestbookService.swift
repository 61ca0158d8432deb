import Foundation
import GuestbookAPI
import GuestbookCore
import Jobs
import JobsAPI
import JobsService
import RPC
import Schema

/// The guestbook's RPC methods (`menagerie.guestbook.v1.Guestbook`): thin handlers that check what only the
/// request knows (page sizes and tokens), call the store and convert its answer. The store checks the notes
/// themselves and throws `GuestbookError`, whose category the RPC server answers with, so handlers catch nothing.
public struct GuestbookService: GuestbookV1.Guestbook.ServiceProtocol {
    public let store: GuestbookStore
    /// Where CountEntries runs its jobs (nil: it answers FAILED_PRECONDITION, as in tests that need none).
    public let jobs: JobRunner?
    /// How often a watch looks for new notes (in the shared database, so it sees every replica's).
    public let watchInterval: Duration

    public static let defaultPageSize: Int32 = 20
    public static let maxPageSize: Int32 = 100
    public static let maxWatchCount: Int32 = 100

    /// The kind CountEntries' jobs are listed under.
    public static let countJobKind = "guestbook.count"

    public init(store: GuestbookStore, jobs: JobRunner? = nil, watchInterval: Duration = .milliseconds(100)) {
        self.store = store
        self.jobs = jobs
        self.watchInterval = watchInterval
    }

    public func addEntry(request: GuestbookV1.AddEntryRequest, context: ServerContext) async throws -> GuestbookV1.Entry
    {
        GuestbookV1.Entry(try await store.add(animalID: request.animalID, author: request.author, text: request.text))
    }

    public func getEntry(request: GuestbookV1.GetEntryRequest, context: ServerContext) async throws -> GuestbookV1.Entry
    {
        GuestbookV1.Entry(try await store.entry(id: request.id))
    }

    public func listEntries(
        request: GuestbookV1.ListEntriesRequest, context: ServerContext
    ) async throws -> GuestbookV1.ListEntriesResponse {
        let pageSize = request.pageSize ?? Self.defaultPageSize
        guard (1...Self.maxPageSize).contains(pageSize) else {
            throw RPCError(.invalidArgument, "page_size must be 1…\(Self.maxPageSize), got \(pageSize)")
        }
        var afterID: Int64 = 0
        if !request.pageToken.isEmpty {
            guard let token = Int64(request.pageToken), token > 0 else {
                throw RPCError(.invalidArgument, "page_token \"\(request.pageToken)\" is not one ListEntries returned")
            }
            afterID = token
        }
        // One more than the page, to know whether another page follows.
        let entries = try await store.entries(animalID: request.animalID, afterID: afterID, limit: Int(pageSize) + 1)
        let page = entries.prefix(Int(pageSize))
        return GuestbookV1.ListEntriesResponse(
            entries: page.map(GuestbookV1.Entry.init),
            nextPageToken: entries.count > page.count ? String(page.last!.id) : "")
    }

    public func watchEntries(
        request: GuestbookV1.WatchEntriesRequest, response: ResponseWriter<GuestbookV1.Entry>, context: ServerContext
    ) async throws {
        guard (1...Self.maxWatchCount).contains(request.count) else {
            throw RPCError(.invalidArgument, "count must be 1…\(Self.maxWatchCount), got \(request.count)")
        }
        guard request.afterID >= 0 else {
            throw RPCError(.invalidArgument, "after_id must not be negative, got \(request.afterID)")
        }
        var afterID = request.afterID
        var left = Int(request.count)
        while true {
            for entry in try await store.entries(animalID: request.animalID, afterID: afterID, limit: left) {
                try await response.send(GuestbookV1.Entry(entry))
                afterID = entry.id
                left -= 1
            }
            if left == 0 { return }
            try context.checkAlive()
            try await Task.sleep(for: watchInterval)
        }
    }

    public func deleteEntry(
        request: GuestbookV1.DeleteEntryRequest, context: ServerContext
    ) async throws -> GuestbookV1.DeleteEntryResponse {
        try await store.delete(id: request.id)
        return GuestbookV1.DeleteEntryResponse()
    }

    public func countEntries(request: GuestbookV1.CountEntriesRequest, context: ServerContext) async throws
        -> JobsV1.Job
    {
        // Checked now, so a bad id is the call's INVALID_ARGUMENT rather than a failed job.
        try EntryRules.checkAnimalID(request.animalID)
        guard let jobs else { throw RPCError(.failedPrecondition, "this guestbook server runs no jobs") }
        let store = store, animalID = request.animalID
        let job = try await jobs.start(
            kind: Self.countJobKind, submitter: context.submitter, user: context.caller?.name
        ) { _ in
            GuestbookV1.EntryCount(animalID: animalID, count: try store.count(animalID: animalID))
        }
        return JobsV1.Job(job)
    }
}

extension GuestbookV1.Entry {
    init(_ entry: GuestbookEntry) {
        self.init(
            id: entry.id, animalID: entry.animalID, author: entry.author, text: entry.text, createdMs: entry.createdMs)
    }
}
