import ArgumentParser
import Foundation
import RPC

/// Options every gateway command takes.
struct GlobalOptions: ParsableArguments {
    @Option(name: .customLong("endpoint"), help: "SERVICE=HOST:PORT[,HOST:PORT…] (repeatable); overrides the compose state.")
    var endpoints: [String] = []

    @Option(name: .customLong("state"), help: "The compose state directory (default: $MENAGERIE_STATE_DIR, else compose/.state).")
    var stateDirectory: String?

    @Flag(help: "Print JSON instead of tables.")
    var json = false

    @Option(help: "Seconds to wait for each call.")
    var timeout = 10.0

    func validate() throws { try validateTimeout(timeout) }

    func resolveEndpoints() throws -> Endpoints {
        try Endpoints(flags: endpoints, stateDirectory: stateDirectory)
    }

    var callOptions: CallOptions { CallOptions(timeout: .milliseconds(Int64(timeout * 1000))) }
}

/// Rejects a `--timeout` that is no number of seconds a call can wait (NaN, infinite, not positive, or
/// too large to count in milliseconds).
func validateTimeout(_ timeout: Double) throws {
    guard timeout.isFinite, timeout > 0, timeout <= 1_000_000 else {
        throw ValidationError("--timeout must be a number of seconds above 0 and at most 1000000 (got \(timeout))")
    }
}

/// Runs a command body; an `RPCError` prints its status code and message and exits non-zero.
func reportingFailures(_ body: () async throws -> Void) async throws {
    do {
        try await body()
    } catch let error as RPCError {
        FileHandle.standardError.write(Data("error: \(error.code.name): \(error.message)\n".utf8))
        throw ExitCode(max(1, error.code.exitCode))
    }
}

/// Prints rows as a table with aligned columns.
func printTable(_ header: [String], _ rows: [[String]]) {
    let widths = header.indices.map { column in
        ([header] + rows).map { $0[column].count }.max() ?? 0
    }
    for row in [header] + rows {
        let cells = row.enumerated().map { column, cell in
            column == row.count - 1 ? cell : cell.padding(toLength: widths[column], withPad: " ", startingAt: 0)
        }
        print(cells.joined(separator: "  "))
    }
}

/// Prints a JSON value (dictionaries, arrays, strings, numbers, booleans, NSNull) with sorted keys.
func printJSON(_ value: Any) throws {
    let data = try JSONSerialization.data(withJSONObject: value, options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes])
    print(String(decoding: data, as: UTF8.self))
}

/// `1h 02m`, `3m 05s`, `12s`.
func formatDuration(seconds: Double) -> String {
    let total = Int(seconds)
    if total >= 3600 { return "\(total / 3600)h \(String(format: "%02d", total % 3600 / 60))m" }
    if total >= 60 { return "\(total / 60)m \(String(format: "%02d", total % 60))s" }
    return "\(total)s"
}

/// Shows progress of a long operation: a redrawn bar on a terminal, plain lines otherwise.
struct ProgressDisplay {
    private let isTerminal = isatty(STDOUT_FILENO) == 1

    /// Shows `fraction` (0…1) done with a short message.
    func update(fraction: Double, message: String) {
        let percent = Int((min(max(fraction, 0), 1) * 100).rounded())
        if isTerminal {
            let filled = percent * 30 / 100
            let bar = String(repeating: "#", count: filled) + String(repeating: " ", count: 30 - filled)
            print("\r[\(bar)] \(String(format: "%3d", percent))% \(message)\u{1B}[K", terminator: "")
            fflush(nil)
        } else {
            print("\(percent)% \(message)")
        }
    }

    /// Ends the bar's line on a terminal.
    func finish() {
        if isTerminal { print("") }
    }
}
