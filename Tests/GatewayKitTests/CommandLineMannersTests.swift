import Foundation
import TestSupport
import Testing

/// One set of command-line manners for every gateway subcommand (issue 21), through the executable: a rejected
/// value exits 3 with the subcommand's own usage line and the accepted values, a command line that does not parse
/// 64, a missing file 66, `--help` says every option's default, `--json` errors are one JSON object on standard
/// error, file arguments complete as files and enumerated options as their values. The subcommands come from the
/// command tree itself (`--experimental-dump-help`), so a new subcommand without a row in `rows` fails.
/// Nothing listens on the endpoints given: every value is checked before anything connects.
@Suite struct CommandLineMannersTests {
    struct Row {
        /// Arguments after the subcommand's names that carry a value the gateway rejects.
        var bad: [String]
        /// What the error must say (the accepted values, or the rule).
        var says: String
        /// Arguments and options (by name, without dashes) that take a file or directory.
        var files: [String] = []

        init(_ bad: String, says: String, files: [String] = []) {
            self.bad = bad.split(separator: " ").map(String.init)
            self.says = says
            self.files = files
        }
    }

    static let timeout = "--timeout must be a number of seconds"

    /// One row per subcommand.
    static let rows: [String: Row] = [
        "status": Row("--timeout 0", says: timeout),
        "user create": Row("a/b", says: "a user name is 1–128 bytes"),
        "user list": Row("--identity /", says: "--identity must be a file path", files: ["identity", "state"]),
        "user grant-admin": Row("a/b", says: "a user name is 1–128 bytes"),
        "user revoke": Row("a/b", says: "a user name is 1–128 bytes"),
        "token create": Row("u --expires soon", says: "The value 'soon' is invalid for '--expires"),
        "token revoke": Row("a/b --identity /", says: "--identity must be a file path"),
        "probe": Row("127.0.0.1:1 --timeout -1", says: timeout),
        "methods": Row("zoo --timeout 0", says: timeout),
        "stats": Row("zoo --timeout nan", says: timeout),
        "zoo search": Row("--limit many", says: "The value 'many' is invalid for '--limit"),
        "zoo show": Row("abc", says: "The value 'abc' is invalid for '<id>'"),
        "zoo filters": Row("--timeout 0", says: timeout),
        "zoo status": Row("--timeout 0", says: timeout),
        "zoo import": Row(
            "--dir . --timeout 0", says: timeout,
            files: [
                "lexicon-csv", "animals-json", "map", "bounds", "adoptions", "pavilion-fixes", "singular-plural", "dir",
                "tiles",
            ]),
        "zoo route": Row("--from north --to-animal 1", says: "--from \"north\" is not LAT,LON"),
        "zoo nearby": Row("--from 50.1,14.4 --radius far", says: "The value 'far' is invalid for '--radius"),
        "zoo tour": Row("1 -2 --from 50.1,14.4", says: "an animal's id is a number from 1 (got -2)"),
        "zoo geojson": Row("--timeout 0", says: timeout, files: ["output"]),
        "zoo catalogue": Row("--page-size 0", says: "--page-size must be 1…500 (got 0)"),
        "zoo graph": Row("--timeout 0", says: timeout),
        "zoo jobs list": Row("--job-state sleeping", says: "'queued', 'running', 'succeeded', 'failed' or 'cancelled'"),
        "zoo jobs show": Row("x --timeout 0", says: timeout),
        "zoo jobs watch": Row("x --timeout 0", says: timeout),
        "zoo jobs cancel": Row("x --timeout 0", says: timeout),
        "ocr scan": Row(
            "x.png --level bogus", says: "Please provide one of 'fast' and 'accurate'",
            files: ["files", "words", "annotate"]),
        "ocr template create": Row(
            "--from x.png --name n --segmentation bogus", says: "'auto', 'page', 'block', 'line' or 'sparse'",
            files: ["from", "words"]),
        "ocr template list": Row("--timeout 0", says: timeout),
        "ocr template show": Row("T --timeout 0", says: timeout),
        "ocr template edit": Row("T --rename-value volts", says: "volts is not OLD=NEW"),
        "ocr template rename": Row("T N --timeout 0", says: timeout),
        "ocr template rename-value": Row("T volts", says: "volts is not OLD=NEW"),
        "ocr template delete": Row("T --timeout 0", says: timeout),
        "ocr record add": Row(
            "T x.png --min-text-height 2", says: "--min-text-height must be a fraction",
            files: ["photo", "words", "annotate"]),
        "ocr record edit": Row("1 Volts=12.9 --date 2026-13-01", says: "--date \"2026-13-01\" is not an ISO 8601 date"),
        "ocr record list": Row("T --timeout 0", says: timeout),
        "ocr record delete": Row("x", says: "The value 'x' is invalid for '<id>'"),
        "ocr export": Row("T --tz Mars/Olympus", says: "--tz \"Mars/Olympus\" is not a known time zone"),
        "ocr jobs list": Row("--job-state sleeping", says: "'queued', 'running'"),
        "ocr jobs show": Row("x --timeout 0", says: timeout),
        "ocr jobs watch": Row("x --timeout 0", says: timeout),
        "ocr jobs cancel": Row("x --timeout 0", says: timeout),
        "health user create": Row("jana --timeout 0", says: timeout),
        "health token issue": Row("--timeout 0", says: timeout),
        "health token revoke": Row("--timeout 0", says: timeout),
        "health account": Row("--timeout 0", says: timeout),
        "health login": Row("TOKEN --timeout 0", says: timeout),
        // A negative number is the value, and a step count below 0 is refused before anything connects.
        "health add": Row("stepCount -100", says: "stepCount value -100.0 count is outside 0.0…", files: ["store"]),
        "health list": Row("stepCount --limit many", says: "The value 'many' is invalid for '--limit"),
        "health show": Row("u --timeout 0", says: timeout),
        "health stats": Row("stepCount --period fortnight", says: "'hour', 'day', 'week' or 'month'"),
        "health delete": Row("u --timeout 0", says: timeout),
        "health sync": Row("--timeout 0", says: timeout),
        "health import": Row("export.xml --timeout 0", says: timeout, files: ["path", "store"]),
        "health export": Row("stepCount --timeout 0", says: timeout),
        "classify dataset create": Row(
            "d --from . --timeout 0", says: timeout, files: ["from", "annotations", "images"]),
        "classify dataset list": Row("--timeout 0", says: timeout),
        "classify dataset show": Row("d --timeout 0", says: timeout),
        "classify dataset delete": Row("d --timeout 0", says: timeout),
        "classify train": Row("--dataset d --algorithm bogus", says: "'cnn', 'features', 'transfer' or 'yolo'"),
        "classify evaluate": Row("m d --timeout 0", says: timeout),
        "classify image": Row("x.png --scaling bogus", says: "'fit', 'fill' or 'center-crop'", files: ["photos"]),
        "classify detect": Row(
            "x.png --confidence many", says: "The value 'many' is invalid for '--confidence",
            files: ["photos", "stream"]),
        "classify model list": Row("--timeout 0", says: timeout),
        "classify model show": Row("m --timeout 0", says: timeout, files: ["plot"]),
        "classify model delete": Row("m --timeout 0", says: timeout),
        "classify model activate": Row("m --timeout 0", says: timeout),
        "classify model export": Row(
            "m --format torchscript", says: "Please provide one of 'menagerie' and 'onnx'", files: ["output"]),
        "classify model import": Row(
            "m.pt --name n --format bogus", says: "'menagerie', 'torchscript' or 'onnx'", files: ["file"]),
        "classify deployment set": Row("dogs m --timeout 0", says: timeout),
        "classify deployment list": Row("--timeout 0", says: timeout),
        "classify deployment delete": Row(
            "dogs --kind bogus", says: "Please provide one of 'classifier' and 'detector'"),
        "classify catalogue import": Row("c.json --timeout 0", says: timeout, files: ["file"]),
        "classify catalogue search": Row("--limit many", says: "The value 'many' is invalid for '--limit"),
        "classify catalogue show": Row("beagle --timeout 0", says: timeout),
        "classify feedback": Row("p.png --label l --timeout 0", says: timeout, files: ["photo"]),
        "classify jobs list": Row("--job-state sleeping", says: "'queued', 'running'"),
        "classify jobs show": Row("x --timeout 0", says: timeout),
        "classify jobs watch": Row("x --timeout 0", says: timeout),
        "classify jobs cancel": Row("x --timeout 0", says: timeout),
        "cluster import": Row(
            "health x.sqlite --cluster 127.0.0.1:1,nowhere", says: "a node's address must be host:port", files: ["file"]
        ),
        "cluster backup": Row("health x.sqlite --cluster 127.0.0.1:1 --timeout 0", says: timeout, files: ["file"]),
        "cluster restore": Row("health x.sqlite --cluster 127.0.0.1:0", says: "with a port 1-65535", files: ["file"]),
        "guestbook add": Row("four Slon.", says: "The value 'four' is invalid for '<animal-id>'"),
        "guestbook show": Row("abc", says: "The value 'abc' is invalid for '<id>'"),
        "guestbook list": Row("4 --page-size many", says: "The value 'many' is invalid for '--page-size"),
        "guestbook delete": Row("abc", says: "The value 'abc' is invalid for '<id>'"),
        "guestbook count": Row("abc", says: "The value 'abc' is invalid for '<animal-id>'"),
        "guestbook jobs list": Row("--job-state sleeping", says: "'queued', 'running'"),
        "guestbook jobs show": Row("x --timeout 0", says: timeout),
        "guestbook jobs watch": Row("x --timeout 0", says: timeout),
        "guestbook jobs cancel": Row("x --timeout 0", says: timeout),
        "cluster members": Row("Health! --cluster 127.0.0.1:1", says: "SERVICE must be a service's name"),
        "cluster add": Row("health 0 127.0.0.1:2 --cluster 127.0.0.1:1", says: "a node id must be a positive number"),
        "cluster remove": Row("health nowhere --cluster 127.0.0.1:1", says: "a node's address must be host:port"),
    ]

    @Test func everySubcommandKeepsTheManners() throws {
        let leaves = try Gateway.leaves()
        #expect(
            Set(leaves.keys) == Set(Self.rows.keys),
            "subcommands without a row: \(Set(leaves.keys).subtracting(Self.rows.keys).sorted()); rows without a subcommand: \(Set(Self.rows.keys).subtracting(leaves.keys).sorted())"
        )
        for (path, command) in leaves.sorted(by: { $0.key < $1.key }) {
            guard let row = Self.rows[path] else { continue }
            let names = path.split(separator: " ").map(String.init)
            let usage = "Usage: gateway \(path) "

            let bad = try Gateway.run(names + row.bad)
            #expect(bad.status == 3, "gateway \(path) \(row.bad): \(bad)")
            #expect(
                bad.stderr.contains(usage) && bad.stderr.contains(row.says), "gateway \(path) \(row.bad): \(bad.stderr)"
            )
            #expect(bad.stdout.isEmpty, "gateway \(path): \(bad.stdout)")

            let unparsed = try Gateway.run(names + ["--no-such-option"])
            #expect(
                unparsed.status == 64 && unparsed.stderr.contains(usage),
                "gateway \(path) --no-such-option: \(unparsed)")

            let arguments = command.arguments.filter { $0.name != "help" && $0.name != "version" }
            if arguments.contains(where: { $0.name == "json" }) {
                let json = try Gateway.run(names + row.bad + ["--json"])
                #expect(json.status == 3 && json.stdout.isEmpty, "gateway \(path) --json: \(json)")
                let object = try? JSONSerialization.jsonObject(with: Data(json.stderr.utf8)) as? [String: String]
                #expect(
                    object?.keys.sorted() == ["code", "message"] && object?["code"] == "invalid_argument",
                    "gateway \(path) --json: \(json.stderr)")
                #expect(object?["message"]?.contains(row.says) == true, "gateway \(path) --json: \(json.stderr)")
            }

            // Every argument and option explains itself, and every option that may be left out says its default:
            // ArgumentParser prints "(default: …)" for a default value, the help text says it for the rest.
            let help = try Gateway.run(names + ["--help"])
            #expect(help.status == 0, "gateway \(path) --help: \(help)")
            let helpText = help.stdout.split(whereSeparator: \.isWhitespace).joined(separator: " ")
            for argument in arguments {
                #expect(!argument.abstract.isEmpty, "gateway \(path) \(argument.name) has no help text")
                if argument.kind == "option" && argument.isOptional {
                    if let value = argument.defaultValue {
                        // "(default: 10.0)", or "(values: fast, accurate; default: accurate)" for an enumeration.
                        #expect(
                            helpText.contains("default: \(value))"),
                            "gateway \(path) --help: \(argument.name) (\(value)) in \(help.stdout)")
                    } else {
                        #expect(
                            argument.abstract.contains("default"),
                            "gateway \(path) --\(argument.name): \"\(argument.abstract)\" says no default")
                    }
                }
                if argument.allValues != nil {
                    #expect(
                        argument.completion == "list", "gateway \(path) \(argument.name) does not complete its values")
                }
            }
            for file in row.files {
                let argument = arguments.first { $0.name == file }
                #expect(
                    argument?.completion == "file" || argument?.completion == "directory",
                    "gateway \(path) \(file) does not complete as a file")
            }
        }
    }

    /// The options whose values are a fixed set are enumerations: completion offers them, errors list them.
    @Test func enumeratedOptionsListTheirValues() throws {
        let leaves = try Gateway.leaves()
        let enumerated: [(String, String)] = [
            ("ocr scan", "level"), ("ocr scan", "segmentation"), ("ocr record add", "segmentation"),
            ("health stats", "period"),
            ("health stats", "preset"), ("classify image", "scaling"), ("classify train", "kind"),
            ("classify train", "algorithm"),
            ("classify model import", "format"), ("classify model import", "kind"), ("classify model import", "layout"),
            ("zoo jobs list", "job-state"),
        ]
        for (path, name) in enumerated {
            let argument = leaves[path]?.arguments.first { $0.name == name }
            #expect(argument?.allValues?.isEmpty == false, "gateway \(path) --\(name) is no enumeration")
        }
        let bash = try Gateway.run(["--generate-completion-script", "bash"])
        #expect(bash.status == 0)
        #expect(bash.stdout.contains("'fast'$'\\n''accurate'"), "bash completion lacks --level's values")
        #expect(
            bash.stdout.contains("'hour'$'\\n''day'$'\\n''week'$'\\n''month'"),
            "bash completion lacks --period's values")
        #expect(
            bash.stdout.contains("-fX '!*.@(png|jpg|jpeg|tif|tiff|bmp|gif|webp|heic|heif)'"),
            "bash completion does not complete image files")
        let zsh = try Gateway.run(["--generate-completion-script", "zsh"])
        #expect(
            zsh.status == 0 && zsh.stdout.contains("___level=('fast' 'accurate')"),
            "zsh completion lacks --level's values")
        #expect(
            zsh.stdout.contains(":files:_files -g '\\''*.png *.jpg"), "zsh completion does not complete image files")
    }

    @Test func aMissingFileIsItsOwnErrorNotAUsageError() throws {
        let missing = "/nonexistent/menagerie-\(UUID().uuidString)"
        let cases: [[String]] = [
            ["ocr", "scan", "\(missing).png"], ["ocr", "scan", "\(missing).png", "--words", missing],
            ["classify", "image", "\(missing).png"], ["classify", "catalogue", "import", missing],
            ["zoo", "import", "--dir", missing],
            ["zoo", "import", "--tiles", "\(missing).mbtiles"],
            ["health", "import", missing], ["classify", "dataset", "create", "d", "--from", missing],
            ["cluster", "import", "health", missing, "--cluster", "127.0.0.1:1"],
            ["cluster", "restore", "health", missing, "--cluster", "127.0.0.1:1"],
        ]
        for arguments in cases {
            let result = try Gateway.run(arguments)
            #expect(
                result.status == 66 && result.stderr.contains("cannot read") && result.stderr.contains(missing),
                "\(arguments): \(result)")
            #expect(!result.stderr.contains("Usage:"), "\(arguments): \(result.stderr)")
            let json = try Gateway.run(arguments + ["--json"])
            let object = try? JSONSerialization.jsonObject(with: Data(json.stderr.utf8)) as? [String: String]
            #expect(
                json.status == 66 && json.stdout.isEmpty && object?["code"] == "not_found",
                "\(arguments) --json: \(json)")
        }
    }

    /// Several photos: each failure is named on standard error and the others are still tried; the status is the
    /// first failure's (66 for a file that cannot be read), and `--json` puts {"file", "code", "message"} in its place.
    @Test func severalPhotosFailEachUnderItsName() throws {
        let missing = "/nonexistent/menagerie-\(UUID().uuidString)"
        for command in [["classify", "image"], ["classify", "detect"]] {
            let result = try Gateway.run(command + ["\(missing)-a.heic", "\(missing)-b.webp"])
            #expect(result.status == 66 && result.stdout.isEmpty, "\(command): \(result)")
            #expect(
                result.stderr.contains("error: \(missing)-a.heic: ")
                    && result.stderr.contains("error: \(missing)-b.webp: "), "\(command): \(result.stderr)")
            let json = try Gateway.run(command + ["\(missing)-a.heic", "\(missing)-b.webp", "--json"])
            let array = try? JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [[String: String]]
            #expect(
                json.status == 66 && array?.map { $0["file"] ?? "" } == ["\(missing)-a.heic", "\(missing)-b.webp"],
                "\(command) --json: \(json)")
            #expect(array?.first?["code"] == "not_found", "\(command) --json: \(json.stdout)")
        }
    }

    /// Standard output carries results only: `health import` (on the device, no server) writes its report there and
    /// its progress and per-record rejections on standard error.
    @Test func progressAndPerItemErrorsGoToStandardError() throws {
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("manners-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: scratch) }
        let export = scratch.appendingPathComponent("export.xml")
        try Data(
            """
            <?xml version="1.0" encoding="UTF-8"?>
            <HealthData locale="en_US">
             <Record type="HKQuantityTypeIdentifierStepCount" sourceName="Phone" unit="count" startDate="2026-05-01 09:00:00 +0200" endDate="2026-05-01 09:10:00 +0200" value="420"/>
             <Record type="HKQuantityTypeIdentifierHeartRate" sourceName="Broken Strap" unit="count/min" startDate="2026-05-01 10:00:00 +0200" endDate="2026-05-01 10:00:00 +0200" value="500"/>
            </HealthData>
            """.utf8
        ).write(to: export)
        let result = try Gateway.run([
            "health", "import", export.path, "--store", scratch.appendingPathComponent("device.sqlite").path,
        ])
        #expect(result.status == 0, "\(result)")
        #expect(result.stdout == "2 records: added 1, 0 already stored, 1 rejected\n", "\(result.stdout)")
        #expect(
            result.stderr.contains("100% ") && result.stderr.contains("MB read"),
            "no progress on standard error: \(result.stderr)")
        #expect(result.stderr.contains("rejected line"), "the rejection is not on standard error: \(result.stderr)")
    }
}

/// The gateway executable, run with stdout and stderr apart, against endpoints where nothing listens.
enum Gateway {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    static let path =
        (ProcessInfo.processInfo.environment["MENAGERIE_BIN_DIR"] ?? root.appendingPathComponent(".build/debug").path)
        + "/gateway"

    struct Result: CustomStringConvertible {
        var status: Int32
        var stdout: String
        var stderr: String
        var description: String { "exit \(status)\nstdout: \(stdout.prefix(600))\nstderr: \(stderr.prefix(600))" }
    }

    static func run(_ arguments: [String]) throws -> Result {
        let home = FileManager.default.temporaryDirectory.appendingPathComponent("manners-home").path
        let run = try runSeparatingOutput(
            path, arguments,
            environment: [
                "MENAGERIE_ENDPOINTS": "zoo=127.0.0.1:1;ocr=127.0.0.1:1;health=127.0.0.1:1;classification=127.0.0.1:1",
                "MENAGERIE_HEALTH_TOKEN": "t", "XDG_DATA_HOME": home, "HOME": home, "COLUMNS": "200",
            ])
        return Result(status: run.status, stdout: run.stdout, stderr: run.stderr)
    }

    struct Argument {
        var name: String
        var kind: String
        var isOptional: Bool
        var abstract: String
        var defaultValue: String?
        var allValues: [String]?
        /// `file`, `directory`, `list`, … : the kind of shell completion.
        var completion: String?
    }

    struct Command { var arguments: [Argument] }

    /// Every leaf subcommand by its path (`ocr template create`), from the command tree ArgumentParser dumps.
    static func leaves() throws -> [String: Command] {
        let dump = try run(["--experimental-dump-help"])
        try #require(dump.status == 0, "\(dump)")
        let tool = try #require(try JSONSerialization.jsonObject(with: Data(dump.stdout.utf8)) as? [String: Any])
        var leaves: [String: Command] = [:]
        func walk(_ command: [String: Any], _ path: [String]) {
            let children = (command["subcommands"] as? [[String: Any]] ?? []).filter {
                $0["commandName"] as? String != "help"
            }
            if children.isEmpty {
                let arguments = (command["arguments"] as? [[String: Any]] ?? []).filter {
                    $0["shouldDisplay"] as? Bool ?? true
                }.map { argument in
                    let preferred = (argument["preferredName"] as? [String: Any])?["name"] as? String
                    return Argument(
                        name: preferred ?? argument["valueName"] as? String ?? "",
                        kind: argument["kind"] as? String ?? "",
                        isOptional: argument["isOptional"] as? Bool ?? false,
                        abstract: argument["abstract"] as? String ?? "",
                        defaultValue: argument["defaultValue"] as? String,
                        allValues: argument["allValues"] as? [String],
                        completion: (argument["completionKind"] as? [String: Any])?.keys.first)
                }
                leaves[path.joined(separator: " ")] = Command(arguments: arguments)
            }
            for child in children { walk(child, path + [child["commandName"] as? String ?? ""]) }
        }
        walk(tool["command"] as? [String: Any] ?? [:], [])
        return leaves
    }
}
