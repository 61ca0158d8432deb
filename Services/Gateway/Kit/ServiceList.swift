import Base
import Foundation

/// One service of compose's services file: a `[name]` section and its `key = value` lines.
public struct ServiceSettings: Sendable, Equatable {
    public var name: String
    /// Replica i listens on `port + i`.
    public var port: Int
    /// How many replicas `compose up` starts (0: defined, started only by `compose scale`).
    public var replicas: Int
    /// The data directory as written: relative to the file's folder unless absolute.
    public var data: String
    /// Command-line arguments every replica gets, each `arg` line one argument, verbatim and in order.
    public var arguments: [String]
    /// The nodes of `compose up --nodes N` that run this service's replicas, as listed (empty: every node).
    /// One machine (`compose up` without `--nodes`) has no nodes and ignores it.
    public var nodes: [Int]

    public init(name: String, port: Int, replicas: Int = 1, data: String? = nil, arguments: [String] = [], nodes: [Int] = []) {
        self.name = name
        self.port = port
        self.replicas = replicas
        self.data = data ?? ".data/\(name)"
        self.arguments = arguments
        self.nodes = nodes
    }
}

/// A services file compose would refuse, with the line and what is wrong there: the same words compose prints.
public struct ServicesFileError: Error, Equatable, CustomStringConvertible {
    public var file: String
    public var line: Int
    public var message: String

    public init(file: String, line: Int, message: String) {
        self.file = file
        self.line = line
        self.message = message
    }

    public var description: String { "\(file):\(line): \(message)" }
}

/// The services of the stack, in the order of compose's services file: `MENAGERIE_COMPOSE_CONFIG`, else
/// `compose/services.conf` above the executable or the working directory. That file is the one list of
/// services; the gateway and the tests read it rather than keeping their own.
///
/// The format is read here and by compose/compose (bash) the same way, line for line and error for error
/// (ComposeTests holds them to it): `[service]` sections of `key = value` lines, `#` comment lines. A key
/// neither knows is an error, so a key added for one (TLS, placement on nodes…) must be added to both.
public enum ServiceList {
    /// The keys a section may set; `arg` may repeat.
    public static let keys = ["port", "replicas", "data", "nodes", "arg"]
    /// The highest node number `nodes` may name (and `compose up --nodes` start): node N's address is on a /24.
    public static let maxNode = 99

    /// The services file's path, or nil when none is found.
    public static func file(environment: [String: String] = ProcessInfo.processInfo.environment) -> URL? {
        if let explicit = environment["MENAGERIE_COMPOSE_CONFIG"], !explicit.isEmpty { return URL(fileURLWithPath: explicit) }
        return UpwardSearch.find("compose/services.conf")
    }

    /// The services named in the services file, in its order; empty when there is no file or compose would
    /// refuse it (compose says why).
    public static func names(environment: [String: String] = ProcessInfo.processInfo.environment) -> [String] {
        guard let file = file(environment: environment), let text = try? String(contentsOf: file, encoding: .utf8) else { return [] }
        return ((try? parse(text, file: file.path)) ?? []).map(\.name)
    }

    /// Reads a services file; `file` names it in errors.
    public static func parse(_ text: String, file: String = "services.conf") throws(ServicesFileError) -> [ServiceSettings] {
        var services: [ServiceSettings] = []
        var sectionLines: [String: Int] = [:]
        var seenKeys: Set<String> = []
        var current: (name: String, line: Int, port: Int?, replicas: Int, data: String?, arguments: [String], nodes: [Int])?

        func fail(_ line: Int, _ message: String) -> ServicesFileError { ServicesFileError(file: file, line: line, message: message) }
        func close() throws(ServicesFileError) {
            guard let section = current else { return }
            guard let port = section.port else { throw fail(section.line, "[\(section.name)] sets no port") }
            services.append(ServiceSettings(
                name: section.name, port: port, replicas: section.replicas, data: section.data, arguments: section.arguments,
                nodes: section.nodes))
        }

        // Lines as bash's `read` sees them: split at \n only, a trailing \r dropped.
        // (By bytes: "\r\n" is one Character, which a split at "\n" would not split.)
        for (offset, raw) in text.utf8.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false).enumerated() {
            let number = offset + 1
            var line = Substring(String(decoding: raw, as: UTF8.self))
            if line.hasSuffix("\r") { line = line.dropLast() }
            let trimmed = trim(line)
            if trimmed.isEmpty || trimmed.hasPrefix("#") { continue }
            if trimmed.hasPrefix("["), trimmed.hasSuffix("]") {
                let name = String(trimmed.dropFirst().dropLast())
                guard !name.isEmpty, name.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_" || $0 == "-") }) else {
                    throw fail(number, "'[\(name)]' is not a service name (letters, digits, _ and -)")
                }
                if let first = sectionLines[name] { throw fail(number, "[\(name)] appears twice (first on line \(first))") }
                try close()
                sectionLines[name] = number
                seenKeys = []
                current = (name, number, nil, 1, nil, [], [])
                continue
            }
            guard let equals = trimmed.firstIndex(of: "=") else {
                let fields = trimmed.split(whereSeparator: { $0 == " " || $0 == "\t" })
                if fields.count == 4 {
                    throw fail(number, "'\(trimmed)' is the old one-line format; write it as [\(fields[0])] with port = \(fields[1]), replicas = \(fields[2]), data = \(fields[3]) on lines of their own")
                }
                throw fail(number, "expected [SERVICE] or KEY = VALUE, got '\(trimmed)'")
            }
            let key = trim(trimmed[..<equals]), value = trim(trimmed[trimmed.index(after: equals)...])
            guard current != nil else { throw fail(number, "'\(key)' comes before any [SERVICE] section") }
            let section = current!.name
            guard keys.contains(key) else {
                throw fail(number, "unknown key '\(key)' in [\(section)] (known: \(keys.joined(separator: ", ")))")
            }
            if key != "arg", !seenKeys.insert(key).inserted { throw fail(number, "\(key) is set twice in [\(section)]") }
            switch key {
            case "port":
                guard value.count <= 5, value.allSatisfy(\.isASCIIDigit), let port = Int(value), (1...65535).contains(port) else {
                    throw fail(number, "port must be a number 1-65535 (got '\(value)')")
                }
                current!.port = port
            case "replicas":
                guard (1...5).contains(value.count), value.allSatisfy(\.isASCIIDigit), let replicas = Int(value) else {
                    throw fail(number, "replicas must be a number 0-99999 (got '\(value)')")
                }
                current!.replicas = replicas
            case "data":
                guard !value.isEmpty else { throw fail(number, "data needs a directory") }
                current!.data = value
            case "nodes":
                guard !value.isEmpty else { throw fail(number, "nodes needs a list of node numbers (nodes = 1,2)") }
                for item in value.split(separator: ",", omittingEmptySubsequences: false).map({ trim($0) }) {
                    guard (1...2).contains(item.count), item.allSatisfy(\.isASCIIDigit), let node = Int(item), (1...maxNode).contains(node) else {
                        throw fail(number, "nodes must be node numbers 1-\(maxNode) separated by commas (got '\(value)')")
                    }
                    guard !current!.nodes.contains(node) else { throw fail(number, "node \(node) is listed twice in [\(section)]'s nodes") }
                    current!.nodes.append(node)
                }
            default:
                guard !value.isEmpty else { throw fail(number, "arg needs a value (one command-line argument)") }
                current!.arguments.append(value)
            }
        }
        try close()
        return services
    }

    /// The services as `compose config` prints them: every key written out, in one order.
    public static func render(_ services: [ServiceSettings]) -> String {
        services.map { service in
            (["[\(service.name)]", "port = \(service.port)", "replicas = \(service.replicas)", "data = \(service.data)"]
                + (service.nodes.isEmpty ? [] : ["nodes = " + service.nodes.map(String.init).joined(separator: ",")])
                + service.arguments.map { "arg = \($0)" }).joined(separator: "\n") + "\n"
        }.joined(separator: "\n")
    }

    /// Spaces and tabs off both ends, as compose trims them.
    private static func trim<Text: StringProtocol>(_ text: Text) -> String {
        String(text.drop(while: { $0 == " " || $0 == "\t" }).reversed().drop(while: { $0 == " " || $0 == "\t" }).reversed())
    }
}

extension Character {
    fileprivate var isASCIIDigit: Bool { isASCII && isNumber }
}
