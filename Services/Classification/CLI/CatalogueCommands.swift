import ArgumentParser
import ClassificationAPI
import Foundation
import GatewayKit
import RPC

struct CatalogueCommands: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "catalogue",
        abstract: "Entries shown beside a label (a breed's name, fur, size…): import, search, show.",
        subcommands: [CatalogueImport.self, CatalogueSearch.self, CatalogueShow.self])
}

struct CatalogueImport: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "import",
        abstract: "Import an app's catalogue as written; entries replace the app's of the same label.",
        discussion: """
            The file is a JSON array of entries as the service prints them — {label, name, local_name or localName,             attributes: {key: value} or [{key, value}]}, or what `catalogue search --json` printed — or as the dog             seed's breed file has them: {id, breed, breedCZ, fur, size, …}, breed the label, breedCZ the local name,             every other key an attribute. Attributes keep the file's order. A key neither knows is refused (exit 3)             naming it.
            """)
    @Argument(help: "The catalogue: a JSON array of entries.", completion: .file(extensions: ["json"])) var file: String
    @Option(help: "The app whose catalogue it is (default: the only app).") var app: String?
    @OptionGroup var global: GlobalOptions

    func run() async throws {
        try await global.withClassification { client in
            let r = try await client.importCatalogue(
                ClassificationV1.ImportCatalogueRequest(json: try readFile(file), app: app ?? ""),
                options: global.callOptions)
            try global.render(r, text: { print("imported \(r.entries) catalogue entries") })
        }
    }
}

struct CatalogueSearch: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "search", abstract: "Search every field, case- and diacritics-insensitively; sorted by local name."
    )
    @Argument(help: "Text to look for in labels and names (default: every entry).") var query: String = ""
    @Option(help: "Most entries listed (default: the service's).") var limit: Int32?
    @Option(help: "The app whose catalogue (default: the only app).") var app: String?
    @OptionGroup var global: GlobalOptions

    func run() async throws {
        try await global.withClassification { client in
            let r = try await client.searchCatalogue(
                ClassificationV1.SearchCatalogueRequest(query: query, limit: limit, app: app ?? ""),
                options: global.callOptions)
            try global.render(
                r,
                text: {
                    printTable(["LABEL", "NAME", "LOCAL NAME"], r.entries.map { [$0.label, $0.name, $0.localName] })
                })
        }
    }
}

struct CatalogueShow: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "show", abstract: "One label's entry with every attribute.")
    @Argument(help: "The entry's label.") var label: String
    @Option(help: "The app whose catalogue (default: the only app).") var app: String?
    @OptionGroup var global: GlobalOptions

    func run() async throws {
        try await global.withClassification { client in
            let e = try await client.getCatalogueEntry(
                ClassificationV1.GetCatalogueEntryRequest(label: label, app: app ?? ""),
                options: global.callOptions)
            try global.render(
                e,
                text: {
                    print("\(e.label): \(e.name)" + (e.localName.isEmpty ? "" : " (\(e.localName))"))
                    for a in e.attributes { print("  \(a.key): \(a.value)") }
                })
        }
    }
}

struct Feedback: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "feedback",
        abstract:
            "Confirm or correct a prediction. With --consent the photo is kept under LABEL in the feedback dataset; without it nothing is kept."
    )
    @Argument(help: "The photo the model saw.", completion: .file(extensions: photoExtensions)) var photo: String
    @Option(help: "The right label for the photo.") var label: String
    @Flag(help: "Allow the service to keep the photo for training.") var consent = false
    @Option(help: "The model that predicted (default: none named).") var model: String?
    @Option(help: "What it predicted (default: none named).") var predicted: String?
    @OptionGroup var global: GlobalOptions

    func run() async throws {
        try await global.withClassification { client in
            let r = try await client.feedback(
                ClassificationV1.FeedbackRequest(
                    image: try readFile(photo), label: label, consent: consent, model: model ?? "",
                    predictedLabel: predicted ?? ""), options: global.callOptions)
            try global.render(
                r,
                text: {
                    print(
                        r.stored
                            ? "kept under \(label) in dataset \(r.dataset)" : "thank you; nothing was kept (no consent)"
                    )
                })
        }
    }
}
