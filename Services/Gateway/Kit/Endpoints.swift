import Base
import Foundation
import RPC
import Transport

/// Where each service's instances are: from `--endpoint` flags, the `MENAGERIE_ENDPOINTS`
/// environment variable, or the state `compose up` wrote.
public struct Endpoints: Sendable {
    public private(set) var byService: [String: [String]] = [:]
    /// Where the endpoints came from, for error messages.
    public private(set) var source = ""
    /// The token calls carry (`authorization: Bearer …`) where their method needs one (`RPCClient.credentials`):
    /// `$MENAGERIE_TOKEN`, else `$MENAGERIE_ADMIN_TOKEN`,
    /// else the admin token `compose up` keeps in its state (`admin-token`, readable by its owner only), found as
    /// the endpoints are — so the operator beside the stack acts as its admin; nil: anonymous calls.
    public private(set) var token: String?
    /// Where `token` came from: the variable's name, or the stack's state (then it goes only to the stack's endpoints).
    public private(set) var tokenSource: TokenSource?
    /// The addresses of the stack's own state (its `endpoints` file), whatever overrode them: the stack's admin token
    /// goes only to these, and a token may go to these (and loopback) on plaintext.
    public private(set) var stackAddresses: Set<String> = []
    /// TLS for every call (`ClientTLSOptions`), nil for plaintext.
    public var tls: TLSCredentials?

    /// Where a token came from, for what may carry it and for the hint a refused call gets.
    public enum TokenSource: Sendable, Equatable {
        /// An environment variable the operator set: goes to any endpoint named (over TLS, or to loopback and the stack's).
        case variable(String)
        /// The admin token of compose's state: only to the endpoints of that state.
        case stackState
    }

    /// Resolves endpoints: flags win, then the environment, then the compose state.
    public init(
        flags: [String], stateDirectory: String?, environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws {
        let state = stateDirectory ?? environment["MENAGERIE_STATE_DIR"]
        (token, tokenSource) = Self.token(stateDirectory: state, environment: environment) ?? (nil, nil)
        let stateFile = Self.stateFile(explicit: state)
        let stackServices =
            stateFile.flatMap { try? String(contentsOf: $0, encoding: .utf8) }.map(Self.parseState) ?? [:]
        stackAddresses = Set(stackServices.values.joined())
        if !flags.isEmpty {
            for flag in flags { try add(assignment: flag) }
            source = "--endpoint flags"
        } else if let variable = environment["MENAGERIE_ENDPOINTS"], !variable.isEmpty {
            // `zoo=127.0.0.1:7100,127.0.0.1:7101;ocr=127.0.0.1:7200`
            for assignment in variable.split(separator: ";") { try add(assignment: String(assignment)) }
            source = "MENAGERIE_ENDPOINTS"
        } else if let stateFile {
            // No file yet means nothing was started there: no endpoints, said clearly when one is needed.
            source = stateFile.path
            byService = stackServices
        }
    }

    /// The state's `endpoints` file: `SERVICE HOST:PORT …` a line, `#` comments.
    private static func parseState(_ text: String) -> [String: [String]] {
        var services: [String: [String]] = [:]
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            let fields = line.split(separator: " ")
            guard fields.count >= 2 else { continue }
            services[String(fields[0]), default: []].append(String(fields[1]))
        }
        return services
    }

    /// Every service with endpoints, those of compose's services file first in its order, then the others by name.
    public func services(listed: [String] = ServiceList.names()) -> [String] {
        listed + byService.keys.filter { !listed.contains($0) }.sorted()
    }

    private mutating func add(assignment: String) throws {
        let parts = assignment.split(separator: "=", maxSplits: 1)
        guard parts.count == 2, !parts[0].isEmpty else {
            throw RPCError(.invalidArgument, "endpoint '\(assignment)' is not SERVICE=HOST:PORT[,HOST:PORT…]")
        }
        for address in parts[1].split(separator: ",") {
            // Checked now, so a typo is INVALID_ARGUMENT for every command (`status` would list it as UNREACHABLE).
            _ = try Endpoint(parsing: String(address))
            byService[String(parts[0]), default: []].append(String(address))
        }
    }

    /// A client for every known instance of `service`: NOT_FOUND when `service` is none of the stack's
    /// (`known`, from compose's services file) and has no endpoint, UNAVAILABLE when it has none now.
    public func client(for service: String, known: [String] = ServiceList.names()) throws -> RPCClient {
        guard let addresses = byService[service], !addresses.isEmpty else {
            if !known.isEmpty, !known.contains(service) {
                // Not a service of this stack at all (a typo): NOT_FOUND, not a stack that is down.
                throw RPCError(
                    .notFound,
                    "no service named \(service): the stack's services are \(known.joined(separator: ", "))"
                        + (byService.isEmpty
                            ? "" : "; endpoints are known for \(byService.keys.sorted().joined(separator: ", "))"))
            }
            throw RPCError(
                .unavailable,
                "no endpoint known for \(service): start the stack with compose/compose up, or pass --endpoint \(service)=HOST:PORT"
                    + (source.isEmpty ? "" : " (looked in \(source))"))
        }
        // The stack's admin token is the stack's: an endpoint named on the command line that is not one of its own
        // — a listener anyone on the host may have opened — never gets it (it did, on a public method too).
        let carried = tokenSource == .stackState && !addresses.allSatisfy(stackAddresses.contains) ? nil : token
        return RPCClient(
            transports: try addresses.map { address in
                let transport = try TCPClientTransport(endpoint: address, tls: tls)
                return tls == nil && !mayCarryTokenInPlaintext(address)
                    ? TokenRefusingTransport(transport, reason: plaintextRefusal(address)) : transport
            },
            credentials: carried.map { ["authorization": "Bearer \($0)"] } ?? [:])
    }

    /// Whether a token may go to `address` unencrypted: on loopback it never leaves the host, and the stack's own
    /// addresses (its nodes' bridge) are where its operator put it. Anywhere else anyone on the path reads it.
    public func mayCarryTokenInPlaintext(_ address: String) -> Bool {
        if stackAddresses.contains(address) { return true }
        guard let endpoint = try? Endpoint(parsing: address) else { return false }
        return endpoint.isLoopback
    }

    private func plaintextRefusal(_ address: String) -> String {
        "refusing to send a token over plaintext to \(address), which is neither loopback nor one of the stack's endpoints "
            + "(anyone on the path could read it): call it over TLS (--tls-ca, or MENAGERIE_TLS_DIR), or through a tunnel to a loopback address"
    }

    /// See `token`.    /// See `token`.
    static func token(stateDirectory: String?, environment: [String: String]) -> (String, TokenSource)? {
        for name in ["MENAGERIE_TOKEN", "MENAGERIE_ADMIN_TOKEN"] {
            if let value = environment[name], !value.isEmpty { return (value, .variable(name)) }
        }
        let file =
            stateDirectory.map { URL(fileURLWithPath: $0).appendingPathComponent("admin-token") }
            ?? UpwardSearch.find(
                "compose/.state/admin-token", from: [UpwardSearch.workingDirectory, UpwardSearch.executableDirectory])
        guard let file, let text = try? String(contentsOf: file, encoding: .utf8),
            let token = text.split(whereSeparator: \.isNewline).first.map(String.init)
        else { return nil }
        return (token, .stackState)
    }

    /// What a call refused for want of a token should say: which variable this command reads, and why the stack's
    /// admin token did not go with it.
    public func unauthenticatedHint(service: String) -> String {
        let addresses = byService[service] ?? []
        if tokenSource == .stackState, !addresses.allSatisfy(stackAddresses.contains) {
            return
                "the stack's admin token goes only to the stack's own endpoints, and \(addresses.joined(separator: ",")) is none of them: set MENAGERIE_TOKEN to send a token there"
        }
        switch tokenSource {
        case .variable(let name): return "the gateway sent $\(name)"
        case .stackState: return "the gateway sent the stack's admin token: set MENAGERIE_TOKEN to call as another user"
        case nil: return "set MENAGERIE_TOKEN (the gateway sends it where a method needs a token)"
        }
    }

    /// The compose state's endpoint list: in `explicit`, else in `compose/.state` found by the upward search
    /// from the working directory and the gateway executable.
    private static func stateFile(explicit: String?) -> URL? {
        if let explicit { return URL(fileURLWithPath: explicit).appendingPathComponent("endpoints") }
        return UpwardSearch.find(
            "compose/.state/endpoints", from: [UpwardSearch.workingDirectory, UpwardSearch.executableDirectory])
    }
}
