import ArgumentParser
import Foundation
import GatewayKit
import OCRAPI
import RPC
import Schema

/// `gateway ocr …`: recognition, templates made from photos, records read from new photos, their CSV export, and
/// the service's jobs (batch scans).
public struct OCRCommands: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "ocr",
        abstract: "Text recognition, and templates that turn photos of a display into records exported as CSV.",
        discussion: """
            Unknown templates exit with the status code of NOT_FOUND (5), bad input with INVALID_ARGUMENT (3), an \
            image without text with NOT_FOUND, one too large with RESOURCE_EXHAUSTED (8).
            """,
        subcommands: [OCRScan.self, OCRTemplateCommands.self, OCRRecordCommands.self, OCRExport.self, JobsCommands<OCRCommands>.self])

    public init() {}
}

extension OCRCommands: JobsCommandService {
    public static let serviceName = "ocr"
}

extension GlobalOptions {
    /// Runs `body` with a typed client of the ocr service's instances.
    func withOCR(_ body: (OcrV1.OCR.Client) async throws -> Void) async throws {
        try await withClient(for: "ocr", OcrV1.OCR.Client.init(wrapping:), body)
    }
}

/// How templates and records print.
enum OCRFormat {
    static func levelName(_ level: OcrV1.ObservationLevel) -> String {
        switch level {
        case .block: "block"
        case .line: "line"
        case .word, .unspecified: "word"
        case .unrecognized(let value): "level \(value)"
        }
    }

    static func printRecords(_ records: [OcrV1.Record], template: OcrV1.Template?) {
        let names = template?.values.map(\.name) ?? records.first?.values.map(\.name) ?? []
        printTable(
            ["id", "date"] + names,
            records.map { record in ["\(record.id)", isoDate(record.createdAt)] + record.values.map(\.text) })
    }
}

struct OCRTemplateCommands: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "template", abstract: "Create templates from photos; list, show, rename and delete them.",
        subcommands: [OCRTemplateCreate.self, List.self, Show.self, Rename.self, RenameValue.self, Delete.self])

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "list", abstract: "Every template by name.")
        @OptionGroup var global: GlobalOptions

        func run() async throws {
            try await global.withOCR { ocr in
                let reply = try await ocr.listTemplates(OcrV1.ListTemplatesRequest(), options: global.callOptions)
                try global.render(
                    reply, text: {
                        printTable(
                            ["id", "name", "values", "created"],
                            reply.templates.map {
                                ["\($0.id)", $0.name, $0.values.map(\.name).joined(separator: ", "), isoDate($0.createdAt)]
                            })
                    })
            }
        }
    }

    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "show", abstract: "A template's values and regions, and its last 5 records.",
            discussion: "With --json: an array of the two responses, the GetTemplateResponse and the LatestRecordsResponse.")
        @Argument(help: "Template name or id.") var template: String
        @OptionGroup var global: GlobalOptions

        func run() async throws {
            try await global.withOCR { ocr in
                let reply = try await ocr.getTemplate(OcrV1.GetTemplateRequest(template: template), options: global.callOptions)
                let latest = try await ocr.latestRecords(
                    OcrV1.LatestRecordsRequest(template: template), options: global.callOptions)
                guard let shown = reply.template else { throw RPCError(.internalError, "the answer has no template") }
                try global.render(
                    jsonValue: { .array([reply.outputJSON, latest.outputJSON]) }, text: {
                        print("#\(shown.id) \(shown.name)" + (shown.description.isEmpty ? "" : " — \(shown.description)"))
                        printTable(
                            ["value", "level", "x", "y", "width", "height"],
                            shown.values.map { value in
                                let box = value.region ?? OcrV1.NormalizedBox()
                                return [value.name, OCRFormat.levelName(value.level)]
                                    + [box.x, box.y, box.width, box.height].map { String(format: "%.3f", $0) }
                            })
                        print("last records:")
                        OCRFormat.printRecords(latest.records, template: shown)
                    })
            }
        }
    }

    struct Rename: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "rename", abstract: "Give a template a new name.")
        @Argument(help: "Template name or id.") var template: String
        @Argument(help: "The new name.") var newName: String
        @OptionGroup var global: GlobalOptions

        func run() async throws {
            try await global.withOCR { ocr in
                let reply = try await ocr.renameTemplate(
                    OcrV1.RenameTemplateRequest(template: template, newName: newName), options: global.callOptions)
                try global.render(
                    reply, text: { print("renamed to \(reply.template?.name ?? newName)") })
            }
        }
    }

    struct RenameValue: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "rename-value", abstract: "Rename values (OLD=NEW …); records keep their values.")
        @Argument(help: "Template name or id.") var template: String
        @Argument(help: "OLD=NEW pairs.") var renames: [String]
        @OptionGroup var global: GlobalOptions

        func validate() throws {
            for rename in renames where rename.split(separator: "=", omittingEmptySubsequences: false).count != 2 {
                throw InvalidValue("\(rename) is not OLD=NEW")
            }
        }

        func run() async throws {
            let pairs = renames.map { rename -> OcrV1.ValueRename in
                let parts = rename.split(separator: "=", omittingEmptySubsequences: false).map(String.init)
                return OcrV1.ValueRename(from: parts[0], to: parts[1])
            }
            try await global.withOCR { ocr in
                let reply = try await ocr.renameValues(
                    OcrV1.RenameValuesRequest(template: template, renames: pairs), options: global.callOptions)
                try global.render(
                    reply, text: { print("values: " + (reply.template?.values.map(\.name).joined(separator: ", ") ?? "")) })
            }
        }
    }

    struct Delete: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "delete", abstract: "Delete a template and its records.")
        @Argument(help: "Template name or id.") var template: String
        @OptionGroup var global: GlobalOptions

        func run() async throws {
            try await global.withOCR { ocr in
                let deleted = try await ocr.deleteTemplate(OcrV1.DeleteTemplateRequest(template: template), options: global.callOptions)
                try global.render(deleted, text: { print("deleted \(template)") })
            }
        }
    }
}

struct OCRRecordCommands: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "record", abstract: "Add records from photos; list and delete them.",
        subcommands: [OCRRecordAdd.self, List.self, Delete.self])

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "list", abstract: "The last 5 records, newest first, or with --all every record in time order.",
            discussion: #"With --json: a LatestRecordsResponse, {"records": […]} (with --all, every page's records in one)."#)
        @Argument(help: "Template name or id.") var template: String
        @Flag(help: "Every record, oldest first (fetched page by page).") var all = false
        @OptionGroup var global: GlobalOptions

        func run() async throws {
            try await global.withOCR { ocr in
                var records: [OcrV1.Record] = []
                if all {
                    var token = ""
                    repeat {
                        let page = try await ocr.listRecords(
                            OcrV1.ListRecordsRequest(template: template, pageSize: 1000, pageToken: token),
                            options: global.callOptions)
                        records += page.records
                        token = page.nextPageToken
                    } while !token.isEmpty
                } else {
                    records = try await ocr.latestRecords(
                        OcrV1.LatestRecordsRequest(template: template), options: global.callOptions
                    ).records
                }
                try global.render(
                    OcrV1.LatestRecordsResponse(records: records), text: { OCRFormat.printRecords(records, template: nil) })
            }
        }
    }

    struct Delete: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "delete", abstract: "Delete one record.")
        @Argument(help: "Record id.") var id: Int64
        @OptionGroup var global: GlobalOptions

        func run() async throws {
            try await global.withOCR { ocr in
                let deleted = try await ocr.deleteRecord(OcrV1.DeleteRecordRequest(recordID: id), options: global.callOptions)
                try global.render(deleted, text: { print("deleted record \(id)") })
            }
        }
    }
}

/// `gateway ocr export TEMPLATE > records.csv`.
struct OCRExport: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "export",
        abstract: "A template's records as CSV (RFC 4180, UTF-8): Date and the value names, one row per record in time order.")
    @Argument(help: "Template name or id.") var template: String
    @OptionGroup var global: GlobalOptions

    func run() async throws {
        try await global.withOCR { ocr in
            for try await chunk in ocr.exportRecords(OcrV1.ExportRecordsRequest(template: template), options: global.callOptions) {
                FileHandle.standardOutput.write(Data(chunk.csv.utf8))
            }
        }
    }
}
