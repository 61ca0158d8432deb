import ArgumentParser
import Foundation
import RPC

/// How gateway commands end: 0 on success; a failed call exits with its status code (INVALID_ARGUMENT 3,
/// NOT_FOUND 5, UNAVAILABLE 14, …, never 0); a check that found something wrong (`status`, `probe`) exits 1;
/// a usage error exits as ArgumentParser decides (64).
public enum GatewayExit {
    /// The exit status for a call that failed with `error`.
    public static func code(for error: RPCError) -> Int32 { max(1, error.code.exitCode) }

    /// A check found something wrong.
    public static let checkFailed = ExitCode(1)
}

/// Runs a command body; an `RPCError` prints its status code and message and exits with `GatewayExit.code(for:)`.
public func reportingFailures(_ body: () async throws -> Void) async throws {
    do {
        try await body()
    } catch let error as RPCError {
        FileHandle.standardError.write(Data("error: \(error.code.name): \(error.message)\n".utf8))
        throw ExitCode(GatewayExit.code(for: error))
    }
}
