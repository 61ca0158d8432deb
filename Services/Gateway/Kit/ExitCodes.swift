import ArgumentParser
import Foundation
import RPC
import Schema

/// How gateway commands end: the one table of exit statuses, for every command group (README, "Exit status").
///
/// | status | meaning |
/// |--------|---------|
/// | 0      | success |
/// | 1–16   | a call failed with that status code (INVALID_ARGUMENT 3, NOT_FOUND 5, UNAVAILABLE 14, …) |
/// | 1      | also: a check found something wrong (`status`, `probe`) |
/// | 3      | a value the gateway itself rejects (a number that is not one, an unknown `--level`, a `--timeout` of 0): bad input like the service's INVALID_ARGUMENT |
/// | 64     | the command line does not parse (unknown option or subcommand, missing argument, options that exclude each other): sysexits' EX_USAGE |
/// | 65     | the work was done and stored, but some values in it are uncertain and want a look (e.g. an OCR record read with low confidence): sysexits' EX_DATAERR |
/// | 66     | an input file is missing or cannot be read: sysexits' EX_NOINPUT |
/// | 73     | an output file cannot be written: sysexits' EX_CANTCREAT |
///
/// A rejected value prints the subcommand's own usage line and, for an enumerated option, the accepted values.
/// Negative numbers are values (`--from -33.9,18.4`, `--radius -5`, `health add stepCount -100`); `--` still
/// ends the options as usual.
public enum GatewayExit {
    /// The exit status for a call that failed with `error`.
    public static func code(for error: RPCError) -> Int32 { max(1, error.code.exitCode) }

    /// A check found something wrong.
    public static let checkFailed = ExitCode(1)
    /// A value on the command line is wrong: INVALID_ARGUMENT's code, as when the server rejects it.
    public static let badValue = Int32(StatusCode.invalidArgument.rawValue)
    /// The command line itself is wrong (sysexits' EX_USAGE, as ArgumentParser exits).
    public static let usage: Int32 = 64
    /// Done and stored, but some values are uncertain (sysexits' EX_DATAERR): a script can flag the result for a
    /// look without treating it as a failure. Outside 1–16 so it is never mistaken for a call's status.
    public static let storedUncertain: Int32 = 65
    /// An input file is missing or unreadable (sysexits' EX_NOINPUT).
    public static let noInput: Int32 = 66
    /// An output file cannot be created or written (sysexits' EX_CANTCREAT).
    public static let cannotCreate: Int32 = 73

    /// The exit status for a command line (`arguments`) that did not parse: `exitCode` and `message` as
    /// ArgumentParser reports them. Its "The value '…' is invalid for …" (a value that does not convert), an
    /// error other than `ValidationError` from `validate()` (an `InvalidValue`, which ArgumentParser exits 1
    /// for) and a negative number where an argument was expected are bad values; every other 64 stays a usage error.
    public static func code(parseExitCode exitCode: Int32, message: String, arguments: [String] = []) -> Int32 {
        if exitCode == ExitCode.failure.rawValue { return badValue }
        guard exitCode == ExitCode.validationFailure.rawValue else { return exitCode }
        if message.hasPrefix("The value '") { return badValue }
        if message.hasPrefix("Unknown option '-"), isNegativeNumber(String(message.dropFirst("Unknown option '".count)))
        {
            return badValue
        }
        if message.hasPrefix("Missing expected argument"), negativeNumberAsArgument(arguments) != nil {
            return badValue
        }
        return usage
    }

    /// Whether `token` starts like a negative number (`-5`, `-.5`, `-33.9,18.4`): no option of the gateway does.
    static func isNegativeNumber(_ token: String) -> Bool {
        guard token.hasPrefix("-"), let next = token.dropFirst().first else { return false }
        return next.isASCII && (next.isNumber || next == ".")
    }

    /// The first negative number before any `--` in `arguments`.
    static func negativeNumberAsArgument(_ arguments: [String]) -> String? {
        arguments.prefix { $0 != "--" }.first(where: isNegativeNumber)
    }

    /// `arguments` with the negative numbers that stand where a positional argument goes moved behind a `--`, for
    /// a second parse when the first failed (ArgumentParser reads `-100` as an option): from the first negative
    /// number that does not follow an option name, the options (each with the value after it, when that is no
    /// option) go before `--` and the positional arguments after it, in their order. Nil when there is none.
    public static func negativeNumbersAsPositionals(_ arguments: [String]) -> [String]? {
        let end = arguments.firstIndex(of: "--") ?? arguments.endIndex
        func isOption(_ token: String) -> Bool { token.hasPrefix("-") && !isNegativeNumber(token) }
        guard
            let first = arguments[..<end].indices.first(where: {
                isNegativeNumber(arguments[$0]) && ($0 == 0 || !isOption(arguments[$0 - 1]))
            })
        else { return nil }
        var options: [String] = [], positionals: [String] = []
        var index = first
        while index < end {
            let token = arguments[index]
            if isOption(token) {
                options.append(token)
                if index + 1 < end, !arguments[index + 1].hasPrefix("-") || isNegativeNumber(arguments[index + 1]),
                    !token.contains("=")
                {
                    // A flag followed by a positional is taken for an option and its value; that parse may fail,
                    // and then the first parse's error stands.
                    options.append(arguments[index + 1])
                    index += 1
                }
            } else {
                positionals.append(token)
            }
            index += 1
        }
        let after = end < arguments.endIndex ? Array(arguments[(end + 1)...]) : []
        return Array(arguments[..<first]) + options + ["--"] + positionals + after
    }

    /// Whether the command line asks for JSON output (`--json` before any `--`): errors are then JSON too.
    static func wantsJSON(_ arguments: [String]) -> Bool {
        arguments.prefix { $0 != "--" }.contains("--json")
    }

    /// The subcommand of `root` that `arguments` name (their leading subcommand names), for its usage line.
    static func subcommand(of root: any ParsableCommand.Type, in arguments: [String]) -> any ParsableCommand.Type {
        var current = root
        for token in arguments {
            let next = current.configuration.subcommands.first { command in
                let configuration = command.configuration
                let name = configuration.commandName ?? command._commandName
                return name == token || configuration.aliases.contains(token)
            }
            guard let next else { break }
            current = next
        }
        return current
    }

    /// The gateway's `main`: parses as ArgumentParser does (once more with negative numbers as positional
    /// arguments when that fails), exits per the table above, and prints every error on standard error — with
    /// the subcommand's usage line for a bad value or a usage error, as one JSON object `{"code", "message"}`
    /// under `--json`.
    public static func main<Command: ParsableCommand>(_ type: Command.Type, arguments: [String]? = nil) async -> Never {
        let given = arguments ?? Array(CommandLine.arguments.dropFirst())
        let json = wantsJSON(given)
        var command: any ParsableCommand
        var retried = false
        do {
            do {
                command = try type.parseAsRoot(given)
            } catch {
                guard let reordered = negativeNumbersAsPositionals(given) else { throw error }
                do {
                    command = try type.parseAsRoot(reordered)
                } catch let second {
                    // With the negative numbers as values the command line parsed but a value was refused (`zoo tour
                    // 1 -2`): that says more than "Unknown option '-2'". Any other failure: the first error stands.
                    let message = type.message(for: second)
                    let exitCode = type.exitCode(for: second).rawValue
                    let valueRefused = exitCode == ExitCode.failure.rawValue || message.hasPrefix("The value '")
                    retried = valueRefused
                    throw valueRefused ? second : error
                }
            }
        } catch {
            let original = type.exitCode(for: error).rawValue
            // Help, --version, completion scripts and the help dump: as ArgumentParser prints them.
            if original == ExitCode.success.rawValue { type.exit(withError: error) }
            let code = code(parseExitCode: original, message: type.message(for: error), arguments: given)
            let failing = subcommand(of: type, in: given)
            var text = type.fullMessage(for: error)
            if !text.contains("Usage:") { text += "\n" + usageLines(type, failing) }
            if !retried, let negative = negativeNumberAsArgument(given), code == badValue,
                original != ExitCode.failure.rawValue
            {
                text += "\n(\(negative) reads as an option here; a negative number as an argument goes after --)"
            }
            fail(
                code: code, connectCode: "invalid_argument",
                message: type.message(for: error), text: text, json: json)
        }
        do {
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch let error as InvalidValue {
            let usage = usageLines(type, Swift.type(of: command))
            fail(
                code: badValue, connectCode: "invalid_argument", message: error.description,
                text: "Error: \(error.description)\n\(usage)", json: json)
        } catch let error as ValidationError {
            let usage = usageLines(type, Swift.type(of: command))
            fail(
                code: Self.usage, connectCode: "invalid_argument", message: error.message,
                text: "Error: \(error.message)\n\(usage)", json: json)
        } catch let error as FileError {
            fail(
                code: error.exitCode, connectCode: error.connectCode, message: error.description,
                text: "error: \(error.description)", json: json)
        } catch let error as RPCError {
            printFailure(error, json: json)
            exit(code(for: error))
        } catch {
            type.exit(withError: error)
        }
        type.exit()
    }

    /// `Usage: gateway ocr scan …` and where its help is, for a bad value found after parsing.
    static func usageLines(_ root: any ParsableCommand.Type, _ subcommand: any ParsableCommand.Type) -> String {
        func name(_ command: any ParsableCommand.Type) -> String {
            command.configuration.commandName ?? command._commandName
        }
        // The names from the root to the subcommand, for the help hint.
        func trail(to node: any ParsableCommand.Type, _ names: [String]) -> [String]? {
            if ObjectIdentifier(node) == ObjectIdentifier(subcommand) { return names }
            return node.configuration.subcommands.lazy.compactMap { trail(to: $0, names + [name($0)]) }.first
        }
        let path = trail(to: root, [name(root)]) ?? [name(root)]
        let usage = root.usageString(for: subcommand)
        return
            "Usage: \(usage.hasPrefix("Usage: ") ? String(usage.dropFirst(7)) : usage)\n  See '\(path.joined(separator: " ")) --help' for more information."
    }

    /// Prints an error on standard error — as the JSON object under `--json` — and exits with `code`.
    static func fail(code: Int32, connectCode: String, message: String, text: String, json: Bool) -> Never {
        if json {
            writeStandardError(errorJSON(code: connectCode, message: message).serialized() + "\n")
        } else {
            writeStandardError(text.hasSuffix("\n") ? text : text + "\n")
        }
        exit(code)
    }
}

/// The one JSON shape of a failure: `{"code": "not_found", "message": "..."}` (Connect's code names).
public func errorJSON(code: String, message: String) -> JSONValue {
    .object([JSONMember("code", .string(code)), JSONMember("message", .string(message))])
}

/// Writes `text` to standard error: progress, per-item errors and warnings go there, so standard output carries
/// only results (`gateway ocr scan *.tif > out.txt` collects the texts alone).
public func writeStandardError(_ text: String) {
    FileHandle.standardError.write(Data(text.utf8))
}

/// Prints a failed call: `error: CODE: message` on standard error, or under `--json` the JSON error object there.
func printFailure(_ error: RPCError, json: Bool) {
    if json {
        writeStandardError(error.outputJSON.serialized() + "\n")
    } else {
        writeStandardError("error: \(error.code.name): \(error.message)\n")
    }
}

/// A value the gateway rejects (in a command's `validate()` or `run()`): exits 3 (INVALID_ARGUMENT) with this
/// message and the subcommand's usage line, where a `ValidationError` is a usage error (64).
public struct InvalidValue: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// Runs a command body; an `RPCError` prints its status code and message on standard error (under `json`, the
/// JSON error object instead, see `RPCError.outputJSON`) and exits with `GatewayExit.code(for:)`.
public func reportingFailures(json: Bool = false, _ body: () async throws -> Void) async throws {
    do {
        try await body()
    } catch let error as RPCError {
        printFailure(error, json: json)
        throw ExitCode(GatewayExit.code(for: error))
    }
}
