import ArgumentParser
import Foundation
import RPC

/// Options every gateway command takes: `@OptionGroup var global: GlobalOptions`.
public struct GlobalOptions: ParsableArguments, Sendable {
    @Option(
        name: .customLong("endpoint"),
        help: "SERVICE=HOST:PORT[,HOST:PORT…] (repeatable; default: $MENAGERIE_ENDPOINTS, else the compose state).")
    public var endpoints: [String] = []

    @Option(
        name: .customLong("state"),
        help: "The compose state directory (default: $MENAGERIE_STATE_DIR, else compose/.state).")
    public var stateDirectory: String?

    @OptionGroup public var tls: ClientTLSOptions

    @Flag(help: "Print JSON instead of tables.")
    public var json = false

    @Option(parsing: .unconditional, help: "Seconds to wait for each call.")
    public var timeout = 10.0

    public init() {}

    public func validate() throws { try validateTimeout(timeout) }

    public func resolveEndpoints() throws -> Endpoints {
        var resolved = try Endpoints(flags: endpoints, stateDirectory: stateDirectory)
        resolved.tls = try tls.credentials(stateDirectory: stateDirectory)
        return resolved
    }

    /// `--timeout` as the options of one call.
    public var callOptions: CallOptions { CallOptions(timeout: .milliseconds(Int64(timeout * 1000))) }

    /// Runs `body` with a typed client of `service` (e.g. `ZooV1.Zoo.Client.init(wrapping:)`) over every known
    /// instance, closing it afterwards; a failed call prints its status and exits with its code. An UNAUTHENTICATED
    /// answer says where this command takes its token from: `tokenHint`, else the gateway's own (`Endpoints`).
    public func withClient<Client>(
        for service: String, tokenHint: String? = nil, _ makeClient: (RPCClient) -> Client,
        _ body: (Client) async throws -> Void
    ) async throws {
        try await reportingFailures(json: json) {
            let endpoints = try resolveEndpoints()
            let client = try endpoints.client(for: service)
            defer { client.close() }
            do {
                try await body(makeClient(client))
            } catch let error as RPCError where error.code == .unauthenticated {
                throw RPCError(
                    .unauthenticated,
                    "\(error.message) (\(tokenHint ?? endpoints.unauthenticatedHint(service: service)))")
            }
        }
    }
}

/// Rejects a `--timeout` that is no number of seconds a call can wait (NaN, infinite, not positive, or
/// too large to count in milliseconds).
public func validateTimeout(_ timeout: Double) throws {
    guard timeout.isFinite, timeout > 0, timeout <= 1_000_000 else {
        throw InvalidValue("--timeout must be a number of seconds above 0 and at most 1000000 (got \(timeout))")
    }
}
