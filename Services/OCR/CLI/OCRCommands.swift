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
        subcommands: [
            OCRScan.self, OCRTemplateCommands.self, OCRRecordCommands.self, OCRExport.self,
            JobsCommands<OCRCommands>.self,
        ])

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

    /// One row per record; a value stored uncertain is marked `(?)` and the last column names them.
    static func printRecords(_ records: [OcrV1.Record], template: OcrV1.Template?) {
        let names = template?.values.map(\.name) ?? records.first?.values.map(\.name) ?? []
        printTable(
            ["id", "date", "date from"] + names + ["uncertain"],
            records.map { record in
                ["\(record.id)", isoDate(record.createdAt), OCRDates.sourceName(record.dateSource)]
                    + record.values.map { $0.uncertainty.isEmpty ? $0.text : $0.text + " (?)" }
                    + [record.values.filter { !$0.uncertainty.isEmpty }.map(\.name).joined(separator: ", ")]
            })
    }
}

struct OCRTemplateCommands: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "template", abstract: "Create templates from photos; list, show, edit and delete them.",
        subcommands: [
            OCRTemplateCreate.self, List.self, Show.self, Edit.self, Rename.self, RenameValue.self, Delete.self,
        ])

    /// `OLD=NEW` → (OLD, NEW), for `rename-value` and `edit --rename-value`.
    static func parseRename(_ text: String) throws -> OcrV1.ValueRename {
        let parts = text.split(separator: "=", omittingEmptySubsequences: false).map(String.init)
        guard parts.count == 2 else { throw InvalidValue("\(text) is not OLD=NEW") }
        return OcrV1.ValueRename(from: parts[0], to: parts[1])
    }

    struct Edit: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "edit",
            abstract: "Change a template's name, description and value names at once (records keep their values).",
            discussion:
                "All or nothing: a taken name or an unknown value leaves the template as it was. `rename` and `rename-value` do one part of this."
        )
        @Argument(help: "Template name or id.") var template: String
        @Option(help: "The new name (default: unchanged).") var name: String?
        @Option(help: "The new description; \"\" clears it (default: unchanged).") var description: String?
        @Option(name: .customLong("rename-value"), help: "OLD=NEW, repeatable (default: none).") var renames: [String] =
            []
        @OptionGroup var global: GlobalOptions

        func validate() throws {
            for rename in renames { _ = try OCRTemplateCommands.parseRename(rename) }
            guard name != nil || description != nil || !renames.isEmpty else {
                throw ValidationError("nothing to change: give --name, --description or --rename-value")
            }
        }

        func run() async throws {
            let pairs = try renames.map(OCRTemplateCommands.parseRename)
            try await global.withOCR { ocr in
                let reply = try await ocr.updateTemplate(
                    OcrV1.UpdateTemplateRequest(
                        template: template, name: name, description: description, renames: pairs),
                    options: global.callOptions)
                try global.render(
                    reply,
                    text: {
                        let shown = reply.template ?? OcrV1.Template()
                        print(
                            "#\(shown.id) \(shown.name)" + (shown.description.isEmpty ? "" : " — \(shown.description)"))
                        print("values: " + shown.values.map(\.name).joined(separator: ", "))
                    })
            }
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "list", abstract: "Every template by name.")
        @OptionGroup var global: GlobalOptions

        func run() async throws {
            try await global.withOCR { ocr in
                let reply = try await ocr.listTemplates(OcrV1.ListTemplatesRequest(), options: global.callOptions)
                try global.render(
                    reply,
                    text: {
                        printTable(
                            ["id", "name", "values", "created"],
                            reply.templates.map {
                                [
                                    "\($0.id)", $0.name, $0.values.map(\.name).joined(separator: ", "),
                                    isoDate($0.createdAt),
                                ]
                            })
                    })
            }
        }
    }

    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "show", abstract: "A template's values and regions, and its last 5 records.",
            discussion:
                "With --json: an array of the two responses, the GetTemplateResponse and the LatestRecordsResponse.")
        @Argument(help: "Template name or id.") var template: String
        @OptionGroup var global: GlobalOptions

        func run() async throws {
            try await global.withOCR { ocr in
                let reply = try await ocr.getTemplate(
                    OcrV1.GetTemplateRequest(template: template), options: global.callOptions)
                let latest = try await ocr.latestRecords(
                    OcrV1.LatestRecordsRequest(template: template), options: global.callOptions)
                guard let shown = reply.template else { throw RPCError(.internalError, "the answer has no template") }
                try global.render(
                    jsonValue: { .array([reply.outputJSON, latest.outputJSON]) },
                    text: {
                        print(
                            "#\(shown.id) \(shown.name)" + (shown.description.isEmpty ? "" : " — \(shown.description)"))
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
            for rename in renames { _ = try OCRTemplateCommands.parseRename(rename) }
        }

        func run() async throws {
            let pairs = try renames.map(OCRTemplateCommands.parseRename)
            try await global.withOCR { ocr in
                let reply = try await ocr.renameValues(
                    OcrV1.RenameValuesRequest(template: template, renames: pairs), options: global.callOptions)
                try global.render(
                    reply,
                    text: { print("values: " + (reply.template?.values.map(\.name).joined(separator: ", ") ?? "")) })
            }
        }
    }

    struct Delete: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "delete", abstract: "Delete a template and its records.")
        @Argument(help: "Template name or id.") var template: String
        @OptionGroup var global: GlobalOptions

        func run() async throws {
            try await global.withOCR { ocr in
                let deleted = try await ocr.deleteTemplate(
                    OcrV1.DeleteTemplateRequest(template: template), options: global.callOptions)
                try global.render(deleted, text: { print("deleted \(template)") })
            }
        }
    }
}

struct OCRRecordCommands: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "record", abstract: "Add records from photos; list, correct and delete them.",
        subcommands: [OCRRecordAdd.self, List.self, Edit.self, Delete.self])

    struct Edit: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "edit", abstract: "Correct a record's values (NAME=VALUE …) and/or its date.",
            discussion: """
                Values are named as the template names them (gateway ocr template show T); a corrected value is saved \
                with confidence 1. --date sets the date, which then counts as given. An unknown value name exits 3 \
                with the template's names; an unknown record (or one of another template than --template) exits 5.
                """)
        @Argument(help: "Record id.") var id: Int64
        @Argument(help: "NAME=VALUE pairs (a value may be empty or contain =).") var values: [String] = []
        @Option(
            help:
                "The record's date, ISO 8601 (2026-11-22T14:05, local time unless an offset is given) (default: unchanged)."
        )
        var date: String?
        @Option(help: "Refuse unless the record belongs to this template, by name or id (default: any).") var template:
            String?
        @OptionGroup var global: GlobalOptions

        static func parseValue(_ text: String) throws -> OcrV1.RecordValue {
            guard let equals = text.firstIndex(of: "="), equals != text.startIndex else {
                throw InvalidValue("\(text) is not NAME=VALUE")
            }
            return OcrV1.RecordValue(
                name: String(text[..<equals]), text: String(text[text.index(after: equals)...]), confidence: 1)
        }

        func validate() throws {
            for value in values { _ = try Self.parseValue(value) }
            if let date { _ = try OCRDates.option(date) }
            guard !values.isEmpty || date != nil else {
                throw ValidationError("nothing to change: give NAME=VALUE pairs or --date")
            }
        }

        func run() async throws {
            let request = OcrV1.UpdateRecordRequest(
                recordID: id, template: template ?? "", values: try values.map(Self.parseValue),
                createdAt: try date.map { try OCRDates.option($0).timeIntervalSince1970 })
            try await global.withOCR { ocr in
                let reply = try await ocr.updateRecord(request, options: global.callOptions)
                try global.render(
                    reply, text: { OCRFormat.printRecords(reply.record.map { [$0] } ?? [], template: nil) })
            }
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "list",
            abstract: "The last 5 records, newest first, or with --all every record in time order.",
            discussion:
                #"With --json: a LatestRecordsResponse, {"records": […]} (with --all, every page's records in one)."#)
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
                    OcrV1.LatestRecordsResponse(records: records),
                    text: { OCRFormat.printRecords(records, template: nil) })
            }
        }
    }

    struct Delete: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "delete", abstract: "Delete one record.")
        @Argument(help: "Record id.") var id: Int64
        @OptionGroup var global: GlobalOptions

        func run() async throws {
            try await global.withOCR { ocr in
                let deleted = try await ocr.deleteRecord(
                    OcrV1.DeleteRecordRequest(recordID: id), options: global.callOptions)
                try global.render(deleted, text: { print("deleted record \(id)") })
            }
        }
    }
}

/// `gateway ocr export TEMPLATE > records.csv`.
struct OCRExport: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "export",
        abstract:
            "A template's records as CSV (RFC 4180, UTF-8): Date, Date source and the value names, one row per record in time order.",
        discussion: """
            Date source says where each date came from: given (typed), exif (the photo's) or upload (when it was saved). \
            A value that a spreadsheet would run as a formula (starting with =, +, -, @, a tab or CR) gets a leading ' \
            unless --raw; a plain number such as -12.5 stays a number. For Excel: --bom --delimiter ';' (where the \
            decimal separator is a comma) and --tz Europe/Prague for local times.
            """)
    @Argument(help: "Template name or id.") var template: String
    @Flag(help: "Values exactly as recorded, even those a spreadsheet would run as formulas.") var raw = false
    @Flag(help: "Start with a UTF-8 byte-order mark, so Excel reads accented names right.") var bom = false
    @Option(help: "Field delimiter: ',', ';' or 'tab'.") var delimiter = ","
    @Option(name: .customLong("tz"), help: "IANA time zone for the dates, e.g. Europe/Prague (default: UTC).")
    var timeZone: String?
    @OptionGroup var global: GlobalOptions

    /// `tab` (or a real tab) → "\t"; the others as given.
    var delimiterCharacter: String { delimiter == "tab" ? "\t" : delimiter }

    func validate() throws {
        guard [",", ";", "\t"].contains(delimiterCharacter) else {
            throw InvalidValue("--delimiter must be ',', ';' or 'tab' (got \"\(delimiter)\")")
        }
        if let timeZone, TimeZone(identifier: timeZone) == nil {
            throw InvalidValue("--tz \"\(timeZone)\" is not a known time zone (an IANA name such as Europe/Prague)")
        }
    }

    func run() async throws {
        let request = OcrV1.ExportRecordsRequest(
            template: template, raw: raw, bom: bom, delimiter: delimiterCharacter, timeZone: timeZone ?? "")
        try await global.withOCR { ocr in
            for try await chunk in ocr.exportRecords(request, options: global.callOptions) {
                FileHandle.standardOutput.write(Data(chunk.csv.utf8))
            }
        }
    }
}
