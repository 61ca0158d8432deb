import ArgumentParser
import Foundation
import RPC

/// How gateway commands end — one rule for every command group:
/// - 0 on success;
/// - a failed call exits with its status code (INVALID_ARGUMENT 3, NOT_FOUND 5, UNAVAILABLE 14, …, never 0);
/// - a value the gateway itself rejects (a number that is not one, an id or count out of range, a malformed
///   LAT,LON, an unknown `--job-state`) is bad input like the server's: INVALID_ARGUMENT, exit 3;
/// - a command line the gateway cannot make sense of (an unknown option or subcommand, a missing argument
///   or option value, options that exclude each other) is a usage error: exit 64 (EX_USAGE);
/// - a check that found something wrong (`status`, `probe`) exits 1.
/// Negative numbers are values (`--from -33.9,18.4`, `--radius -5`); as a positional argument, write
/// one after `--` (`gateway zoo show -- -5`), or it reads as an unknown option (a bad value, exit 3).
public enum GatewayExit {
    /// The exit status for a call that failed with `error`.
    public static func code(for error: RPCError) -> Int32 { max(1, error.code.exitCode) }

    /// A check found something wrong.
    public static let checkFailed = ExitCode(1)
    /// The command line itself is wrong (sysexits' EX_USAGE, as ArgumentParser exits).
    public static let usage: Int32 = 64
    /// A value on the command line is wrong: INVALID_ARGUMENT's code, as when the server rejects it.
    public static let badValue = Int32(StatusCode.invalidArgument.rawValue)

    /// The exit status for a command line (`arguments`) that did not parse: `exitCode` and `message` as
    /// ArgumentParser reports them. Its "The value '…' is invalid for …" (a value that does not convert), an
    /// error other than `ValidationError` from `validate()` (an `InvalidValue`, which ArgumentParser exits 1
    /// for) and a negative number where an argument was expected (ArgumentParser reads `-5` as an option, so
    /// the argument is missing or the option unknown) are bad values; every other 64 stays a usage error.
    public static func code(parseExitCode exitCode: Int32, message: String, arguments: [String] = []) -> Int32 {
        if exitCode == ExitCode.failure.rawValue { return badValue }
        guard exitCode == ExitCode.validationFailure.rawValue else { return exitCode }
        if message.hasPrefix("The value '") { return badValue }
        if message.hasPrefix("Unknown option '-"), isNegativeNumber(String(message.dropFirst("Unknown option '".count))) {
            return badValue
        }
        if message.hasPrefix("Missing expected argument"), negativeNumberAsArgument(arguments) != nil { return badValue }
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

    /// The gateway's `main`: parses as ArgumentParser does, exits with `code(parseExitCode:message:)` when
    /// the command line does not parse (printing what ArgumentParser prints), else runs the command.
    public static func main<Command: ParsableCommand>(_ type: Command.Type, arguments: [String]? = nil) async -> Never {
        var command: any ParsableCommand
        do {
            command = try type.parseAsRoot(arguments)
        } catch {
            let original = type.exitCode(for: error).rawValue
            let given = arguments ?? Array(CommandLine.arguments.dropFirst())
            let code = code(parseExitCode: original, message: type.message(for: error), arguments: given)
            if code == original { type.exit(withError: error) }
            var text = type.fullMessage(for: error)
            if let negative = negativeNumberAsArgument(given) {
                text += "\n(\(negative) reads as an option here; a negative number as an argument goes after --)"
            }
            FileHandle.standardError.write(Data((text + "\n").utf8))
            exit(code)
        }
        do {
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch {
            type.exit(withError: error)
        }
        type.exit()
    }
}

/// A value the gateway rejects in a command's `validate()`: exits 3 (INVALID_ARGUMENT) with this message,
/// where a `ValidationError` would be a usage error (64).
public struct InvalidValue: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// Runs a command body; an `RPCError` prints its status code and message and exits with `GatewayExit.code(for:)`.
/// With `json`, the error is also printed on stdout as `{"code": "not_found", "message": "..."}` (see
/// `RPCError.outputJSON`), so a script reading `--json` output gets JSON either way.
public func reportingFailures(json: Bool = false, _ body: () async throws -> Void) async throws {
    do {
        try await body()
    } catch let error as RPCError {
        if json { printJSON(error.outputJSON) }
        FileHandle.standardError.write(Data("error: \(error.code.name): \(error.message)\n".utf8))
        throw ExitCode(GatewayExit.code(for: error))
    }
}
