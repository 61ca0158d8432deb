import Foundation
import Testing

/// The gateway's one rule for exit codes (issue 9, #13), through the executable: a value it rejects exits 3
/// (INVALID_ARGUMENT) like one the service rejects, a command line that does not parse exits 64, negative
/// numbers are values, and an unknown service is NOT_FOUND. Calls go to a port where nothing listens, so a
/// command line that parsed ends UNAVAILABLE (14): that is how these tests see that it parsed.
@Suite struct GatewayExitCodeTests {
    static let dead = "zoo=127.0.0.1:1"

    func gateway(_ arguments: [String]) async throws -> (status: Int32, output: String) {
        try await Stack.run("\(Stack.binDirectory)/gateway", arguments, environment: [:])
    }

    @Test func negativeNumbersAreValues() async throws {
        let parsed: [[String]] = [
            ["zoo", "route", "--from", "-33.9,18.4", "--to-animal", "1"],
            ["zoo", "route", "--from", "50.1,14.4", "--to", "-33.9,-18.4"],
            ["zoo", "nearby", "--from", "-33.9,18.4", "--radius", "-5", "--limit", "-2"],
            ["zoo", "tour", "1", "2", "--from", "-0.5,-0.5"],
            ["zoo", "search", "--limit", "-1", "--offset", "-3"],
            ["zoo", "route", "--from-animal", "-1", "--to-animal", "-2"],
            ["zoo", "jobs", "list", "--page-size", "-1"],
        ]
        for arguments in parsed {
            let result = try await gateway(arguments + ["--endpoint", Self.dead, "--timeout", "2"])
            #expect(
                result.status == 14,
                "gateway \(arguments.joined(separator: " ")): \(result.status) \(result.output.prefix(300))")
        }
        // As a positional argument, with or without `--`: the value reaches the check of ids (exit 3, not a usage error).
        for arguments in [["zoo", "show", "--", "-5"], ["zoo", "show", "-5"]] {
            let shown = try await gateway(arguments + ["--endpoint", Self.dead, "--timeout", "2"])
            #expect(
                shown.status == 3 && shown.output.contains("an animal's id is a number from 1 (got -5)"),
                "\(shown.output)")
        }
    }

    @Test func badValuesExit3() async throws {
        let cases: [[String]] = [
            ["zoo", "show", "abc"],
            ["zoo", "show", "-5"],
            ["zoo", "tour", "1", "-2", "--from", "50.1,14.4"],
            ["zoo", "search", "--limit", "many"],
            ["zoo", "search", "--offset", "1.5"],
            ["zoo", "nearby", "--from", "50.1,14.4", "--radius", "far"],
            ["zoo", "route", "--from", "north", "--to-animal", "1"],
            ["zoo", "route", "--from-animal", "x", "--to-animal", "1"],
            ["zoo", "jobs", "list", "--job-state", "sleeping"],
            ["zoo", "search", "--timeout", "-1"],
            ["methods", "zoo", "--timeout", "nan"],
            ["probe", "127.0.0.1:1", "--timeout", "-1"],
            ["probe", "127.0.0.1:1", "--pid", "x"],
            ["ocr", "record", "delete", "x"],
        ]
        for arguments in cases {
            let result = try await gateway(arguments + ["--endpoint", Self.dead])
            #expect(
                result.status == 3,
                "gateway \(arguments.joined(separator: " ")): \(result.status) \(result.output.prefix(300))")
            #expect(!result.output.isEmpty, "gateway \(arguments.joined(separator: " ")) says nothing")
        }
    }

    @Test func usageErrorsExit64() async throws {
        let cases: [[String]] = [
            ["zoo", "nosuchcommand"],
            ["zoo", "show"],
            ["zoo", "route", "--from"],
            ["zoo", "route", "--to-animal", "1"],
            ["zoo", "route", "--from", "50.1,14.4", "--from-animal", "1", "--to-animal", "2"],
            ["zoo", "search", "--no-such-flag"],
            ["zoo", "search", "-x"],
            ["methods"],
            ["nosuchcommand"],
        ]
        for arguments in cases {
            let result = try await gateway(arguments + ["--endpoint", Self.dead])
            #expect(
                result.status == 64,
                "gateway \(arguments.joined(separator: " ")): \(result.status) \(result.output.prefix(300))")
        }
        let help = try await gateway(["zoo", "--help"])
        let helpText = help.output.split(whereSeparator: \.isWhitespace).joined(separator: " ")
        #expect(
            help.status == 0 && helpText.contains("exits 64") && helpText.contains("INVALID_ARGUMENT (3)"),
            "\(help.output)")
    }

    @Test func anUnknownServiceIsNotFound() async throws {
        for command in [["methods"], ["stats"]] {
            let unknown = try await gateway(command + ["nosuchservice"])
            #expect(unknown.status == 5, "\(command) nosuchservice: \(unknown.status) \(unknown.output)")
            #expect(unknown.output.contains("NOT_FOUND") && unknown.output.contains("zoo"), "\(unknown.output)")
        }
        // A service of the stack with no instance running is UNAVAILABLE, as before.
        let down = try await gateway(["methods", "zoo", "--state", "/nonexistent/menagerie-state"])
        #expect(down.status == 14, "\(down.output)")
    }
}
