import Foundation
import GatewayKit

/// What compose refuses or fails at, said as compose says it: `compose: MESSAGE` on stderr, exit status 1.
public struct ComposeFailure: Error, Equatable, CustomStringConvertible {
    public let message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

/// The services file as compose reads it: its services (GatewayKit's ServiceList parses it) and its folder,
/// where relative paths in it start and where the replicas run.
public struct Manifest: Sendable {
    public let file: URL
    public let services: [ServiceSettings]
    public var folder: URL { file.deletingLastPathComponent() }

    public init(file: URL, services: [ServiceSettings]) {
        self.file = file
        self.services = services
    }

    /// `MENAGERIE_COMPOSE_CONFIG` (compose/compose sets it), else compose/services.conf above the executable.
    public static func load(environment: [String: String] = ProcessInfo.processInfo.environment)
        throws(ComposeFailure) -> Manifest
    {
        guard let file = ServiceList.file(environment: environment) else {
            throw ComposeFailure("cannot find compose/services.conf")
        }
        guard let text = try? String(contentsOf: file, encoding: .utf8) else {
            throw ComposeFailure("cannot read the services file \(file.path)")
        }
        return try parse(text, file: file)
    }

    /// The services file's text read as the file at `file` (which names it in errors and roots its paths).
    public static func parse(_ text: String, file: URL) throws(ComposeFailure) -> Manifest {
        do {
            return Manifest(file: file, services: try ServiceList.parse(text, file: file.path))
        } catch {
            throw ComposeFailure(error.description)
        }
    }

    public var names: [String] { services.map(\.name) }

    /// The service named so, or the error compose gives for a name it does not know.
    public func service(_ name: String) throws(ComposeFailure) -> ServiceSettings {
        guard !name.isEmpty, let service = services.first(where: { $0.name == name }) else {
            throw ComposeFailure("unknown service '\(name)' (known: \(names.joined(separator: " ")))")
        }
        return service
    }

    /// A path the file names, made absolute against its folder.
    public func resolve(_ path: String) -> String {
        path.hasPrefix("/") ? path : folder.appendingPathComponent(path).path
    }

    /// The environment variable a model's folder is given to replicas in: `feature-print` → `MENAGERIE_FEATURE_PRINT`.
    public static func variable(ofModel model: String) -> String {
        "MENAGERIE_" + model.uppercased().replacingOccurrences(of: "-", with: "_")
    }
}
