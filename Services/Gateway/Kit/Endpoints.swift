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
    /// TLS for every call (`ClientTLSOptions`), nil for plaintext.
    public var tls: TLSCredentials?

    /// Resolves endpoints: flags win, then the environment, then the compose state.
    public init(flags: [String], stateDirectory: String?, environment: [String: String] = ProcessInfo.processInfo.environment) throws {
        token = Self.token(stateDirectory: stateDirectory ?? environment["MENAGERIE_STATE_DIR"], environment: environment)
        if !flags.isEmpty {
            for flag in flags { try add(assignment: flag) }
            source = "--endpoint flags"
        } else if let variable = environment["MENAGERIE_ENDPOINTS"], !variable.isEmpty {
            // `zoo=127.0.0.1:7100,127.0.0.1:7101;ocr=127.0.0.1:7200`
            for assignment in variable.split(separator: ";") { try add(assignment: String(assignment)) }
            source = "MENAGERIE_ENDPOINTS"
        } else if let file = Self.stateFile(explicit: stateDirectory ?? environment["MENAGERIE_STATE_DIR"]) {
            source = file.path
            // No file yet means nothing was started there: no endpoints, said clearly when one is needed.
            guard let text = try? String(contentsOf: file, encoding: .utf8) else { return }
            for line in text.split(separator: "\n") where !line.hasPrefix("#") {
                let fields = line.split(separator: " ")
                guard fields.count >= 2 else { continue }
                byService[String(fields[0]), default: []].append(String(fields[1]))
            }
        }
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
                    .notFound, "no service named \(service): the stack's services are \(known.joined(separator: ", "))"
                        + (byService.isEmpty ? "" : "; endpoints are known for \(byService.keys.sorted().joined(separator: ", "))"))
            }
            throw RPCError(
                .unavailable,
                "no endpoint known for \(service): start the stack with compose/compose up, or pass --endpoint \(service)=HOST:PORT"
                    + (source.isEmpty ? "" : " (looked in \(source))"))
        }
        return RPCClient(
            transports: try addresses.map { try TCPClientTransport(endpoint: $0, tls: tls) },
            credentials: token.map { ["authorization": "Bearer \($0)"] } ?? [:])
    }

    /// See `token`.
    static func token(stateDirectory: String?, environment: [String: String]) -> String? {
        for name in ["MENAGERIE_TOKEN", "MENAGERIE_ADMIN_TOKEN"] {
            if let value = environment[name], !value.isEmpty { return value }
        }
        let file = stateDirectory.map { URL(fileURLWithPath: $0).appendingPathComponent("admin-token") }
            ?? UpwardSearch.find("compose/.state/admin-token", from: [UpwardSearch.workingDirectory, UpwardSearch.executableDirectory])
        guard let file, let text = try? String(contentsOf: file, encoding: .utf8) else { return nil }
        return text.split(whereSeparator: \.isNewline).first.map(String.init)
    }

    /// The compose state's endpoint list: in `explicit`, else in `compose/.state` found by the upward search
    /// from the working directory and the gateway executable.
    private static func stateFile(explicit: String?) -> URL? {
        if let explicit { return URL(fileURLWithPath: explicit).appendingPathComponent("endpoints") }
        return UpwardSearch.find("compose/.state/endpoints", from: [UpwardSearch.workingDirectory, UpwardSearch.executableDirectory])
    }
}
