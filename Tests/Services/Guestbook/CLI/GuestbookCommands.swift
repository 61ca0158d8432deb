import ArgumentParser
import Foundation
import GatewayKit
import GuestbookAPI
import JobsAPI
import RPC
import Schema

/// `gateway guestbook …`: the test-only guestbook's command group, built like every service's (GlobalOptions,
/// `withClient`, `render` for `--json`, `JobsCommands`). The gateway shows it in its help only when compose's
/// services file lists guestbook, so the stack's own help names only its services.
public struct GuestbookCommands: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "guestbook",
        abstract: "Visitors' notes about animals (a test-only service).",
        discussion: """
            Bad input exits with the status code of INVALID_ARGUMENT (3), an unknown entry with NOT_FOUND (5), a \
            call without the token its method needs with UNAUTHENTICATED (16). With --json each command prints its \
            response as protobuf's JSON mapping.
            """,
        shouldDisplay: ServiceList.names().contains(serviceName),
        subcommands: [
            GuestbookAdd.self, GuestbookShow.self, GuestbookList.self, GuestbookDelete.self, GuestbookCount.self,
            JobsCommands<GuestbookCommands>.self,
        ])

    public init() {}
}

extension GuestbookCommands: JobsCommandService {
    public static let serviceName = "guestbook"
}

extension GlobalOptions {
    /// Runs `body` with a typed client of the guestbook's instances; failures print their status and exit with its code.
    func withGuestbook(_ body: (GuestbookV1.Guestbook.Client) async throws -> Void) async throws {
        try await withClient(for: "guestbook", GuestbookV1.Guestbook.Client.init(wrapping:), body)
    }
}

enum GuestbookFormat {
    static func line(_ entry: GuestbookV1.Entry) -> String {
        let time = ISO8601DateFormatter().string(from: Date(timeIntervalSince1970: Double(entry.createdMs) / 1000))
        return
            "#\(entry.id) animal \(entry.animalID), \(entry.author.isEmpty ? "anonymous" : entry.author), \(time): \(entry.text)"
    }
}

/// `guestbook add ANIMAL_ID TEXT [--author NAME]`.
struct GuestbookAdd: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "add", abstract: "Leave a note about an animal.", discussion: "With --json: the stored Entry.")

    @Argument(help: "The animal's id.") var animalID: Int64
    @Argument(help: "The note (at most 500 characters).") var text: String
    @Option(help: "Who writes it (at most 80 characters; default: anonymous).") var author: String?
    @OptionGroup var global: GlobalOptions

    func run() async throws {
        try await global.withGuestbook { guestbook in
            let entry = try await guestbook.addEntry(
                GuestbookV1.AddEntryRequest(animalID: animalID, author: author ?? "", text: text),
                options: global.callOptions)
            try global.render(entry, text: { print(GuestbookFormat.line(entry)) })
        }
    }
}

/// `guestbook show ID`.
struct GuestbookShow: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "show", abstract: "Show one note.", discussion: "With --json: the Entry.")

    @Argument(help: "The note's id.") var id: Int64
    @OptionGroup var global: GlobalOptions

    func run() async throws {
        try await global.withGuestbook { guestbook in
            let entry = try await guestbook.getEntry(GuestbookV1.GetEntryRequest(id: id), options: global.callOptions)
            try global.render(entry, text: { print(GuestbookFormat.line(entry)) })
        }
    }
}

/// `guestbook list ANIMAL_ID [--page-size N] [--page-token T]`.
struct GuestbookList: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "list", abstract: "An animal's notes, oldest first, one page.",
        discussion: "With --json: the ListEntriesResponse (entries and nextPageToken).")

    @Argument(help: "The animal's id.") var animalID: Int64
    @Option(name: .customLong("page-size"), parsing: .unconditional, help: "Notes per page (1…100; default: 20).")
    var pageSize: Int32?
    @Option(name: .customLong("page-token"), help: "The token a previous page printed (default: the first page).")
    var pageToken: String?
    @OptionGroup var global: GlobalOptions

    func run() async throws {
        try await global.withGuestbook { guestbook in
            let page = try await guestbook.listEntries(
                GuestbookV1.ListEntriesRequest(animalID: animalID, pageSize: pageSize, pageToken: pageToken ?? ""),
                options: global.callOptions)
            try global.render(
                page,
                text: {
                    for entry in page.entries { print(GuestbookFormat.line(entry)) }
                    if !page.nextPageToken.isEmpty { print("more: --page-token \(page.nextPageToken)") }
                })
        }
    }
}

/// `guestbook delete ID`: the admin's (the stack's admin token, which the gateway sends by default).
struct GuestbookDelete: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "delete", abstract: "Remove a note (the admin's).",
        discussion: "With --json: the empty DeleteEntryResponse.")

    @Argument(help: "The note's id.") var id: Int64
    @OptionGroup var global: GlobalOptions

    func run() async throws {
        try await global.withGuestbook { guestbook in
            let reply = try await guestbook.deleteEntry(
                GuestbookV1.DeleteEntryRequest(id: id), options: global.callOptions)
            try global.render(reply, text: { print("deleted #\(id)") })
        }
    }
}

/// `guestbook count ANIMAL_ID [--detach]`: starts the counting job and follows it to its EntryCount.
struct GuestbookCount: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "count", abstract: "Count an animal's notes, in a job (a signed-in user's).",
        discussion: "With --json: the job's EntryCount (with --detach: the Job).")

    @Argument(help: "The animal's id.") var animalID: Int64
    @Flag(help: "Print the job's id and return at once (gateway guestbook jobs watch ID).") var detach = false
    @OptionGroup var global: GlobalOptions

    func run() async throws {
        try await global.withClient(for: GuestbookCommands.serviceName, { $0 }) { client in
            let job = try await GuestbookV1.Guestbook.Client(wrapping: client).countEntries(
                GuestbookV1.CountEntriesRequest(animalID: animalID), options: global.callOptions)
            if detach {
                try global.render(
                    job,
                    text: { print("started \(job.summary); follow it with: gateway guestbook jobs watch \(job.id)") })
                return
            }
            let ended = try await followJob(job.id, with: JobsV1.Jobs.Client(wrapping: client), display: nil)
            guard let result = try ended.requireResult(), result.typeName == GuestbookV1.EntryCount.protoName else {
                throw RPCError(.internalError, "count job \(job.id) ended without an EntryCount")
            }
            let count = try GuestbookV1.EntryCount(serializedBytes: result.value)
            try global.render(count, text: { print("animal \(count.animalID): \(count.count) note(s)") })
        }
    }
}
