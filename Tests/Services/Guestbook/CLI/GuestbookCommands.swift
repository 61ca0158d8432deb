import ArgumentParser
import Foundation
import GatewayKit
import GuestbookAPI
import RPC
import Schema

/// `… guestbook …`: the test-only guestbook's command group, built like every service's (GlobalOptions,
/// `withClient`, `render` for `--json`). The gateway does not list it; the suite runs it in process with
/// `--endpoint guestbook=HOST:PORT`.
public struct GuestbookCommands: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "guestbook",
        abstract: "Visitors' notes about animals (a test-only service).",
        discussion: """
            Bad input exits with the status code of INVALID_ARGUMENT (3), an unknown entry with NOT_FOUND (5). \
            With --json each command prints its response as protobuf's JSON mapping.
            """,
        subcommands: [GuestbookAdd.self, GuestbookShow.self, GuestbookList.self])

    public init() {}
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
        return "#\(entry.id) animal \(entry.animalID), \(entry.author.isEmpty ? "anonymous" : entry.author), \(time): \(entry.text)"
    }
}

/// `guestbook add ANIMAL_ID TEXT [--author NAME]`.
struct GuestbookAdd: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "add", abstract: "Leave a note about an animal.", discussion: "With --json: the stored Entry.")

    @Argument(help: "The animal's id.") var animalID: Int64
    @Argument(help: "The note (at most 500 characters).") var text: String
    @Option(help: "Who writes it (at most 80 characters; default: anonymous).") var author = ""
    @OptionGroup var global: GlobalOptions

    func run() async throws {
        try await global.withGuestbook { guestbook in
            let entry = try await guestbook.addEntry(
                GuestbookV1.AddEntryRequest(animalID: animalID, author: author, text: text), options: global.callOptions)
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
    @Option(name: .customLong("page-size"), parsing: .unconditional, help: "Notes per page (1…100).") var pageSize: Int32?
    @Option(name: .customLong("page-token"), help: "The token a previous page printed.") var pageToken = ""
    @OptionGroup var global: GlobalOptions

    func run() async throws {
        try await global.withGuestbook { guestbook in
            let page = try await guestbook.listEntries(
                GuestbookV1.ListEntriesRequest(animalID: animalID, pageSize: pageSize, pageToken: pageToken), options: global.callOptions)
            try global.render(page, text: {
                for entry in page.entries { print(GuestbookFormat.line(entry)) }
                if !page.nextPageToken.isEmpty { print("more: --page-token \(page.nextPageToken)") }
            })
        }
    }
}
