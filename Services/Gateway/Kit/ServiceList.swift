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
    /// Its API's protobuf package (`menagerie.zoo.v1`), nil when the file names none.
    public var proto: String?
    /// What compose installs before starting it, in order: each an installer of compose (`compose/compose NAME`)
    /// whose folder the replicas find in `MENAGERIE_NAME` (`feature-print` → `MENAGERIE_FEATURE_PRINT`).
    public var models: [String]
    /// Whether its replicas on several nodes keep its database in one dqlite cluster (`--cluster`).
    public var cluster: Bool
    /// Whether, clustered, its large payloads go by content hash to its nodes' disks (`--blob-peers`).
    public var blobs: Bool
    /// Its Containerfile and its Kubernetes manifest as written (relative to the file's folder), nil when none.
    public var container: String?
    public var kubernetes: String?
    /// What its deploy files are rendered from (`compose render`): the Debian packages its image installs, the pods of
    /// its Kubernetes manifest, their resources and their persistent volume (nil: none, its data dies with the pod).
    public var packages: [String] = []
    public var pods: Int = 1
    public var resources: PodResources?
    public var volume: String?

    public init(
        name: String, port: Int, replicas: Int = 1, data: String? = nil, arguments: [String] = [], nodes: [Int] = [],
        proto: String? = nil,
        models: [String] = [], cluster: Bool = false, blobs: Bool = false, container: String? = nil,
        kubernetes: String? = nil
    ) {
        self.name = name
        self.port = port
        self.replicas = replicas
        self.data = data ?? ".data/\(name)"
        self.arguments = arguments
        self.nodes = nodes
        self.proto = proto
        self.models = models
        self.cluster = cluster
        self.blobs = blobs
        self.container = container
        self.kubernetes = kubernetes
    }
}

/// What a pod asks of Kubernetes (`resources = CPU MEMORY LIMIT`): its CPU and memory requests and its memory limit,
/// each a Kubernetes quantity (`250m`, `256Mi`, `1Gi`).
public struct PodResources: Sendable, Equatable {
    public var cpu: String
    public var memory: String
    public var memoryLimit: String

    public init(cpu: String, memory: String, memoryLimit: String) {
        self.cpu = cpu
        self.memory = memory
        self.memoryLimit = memoryLimit
    }

    /// Whether `text` is a Kubernetes quantity compose writes: digits, an optional fraction, an optional suffix.
    public static func isQuantity(_ quantity: some StringProtocol) -> Bool {
        let text = String(quantity)
        let suffixes = ["Ki", "Mi", "Gi", "Ti", "m", "k", "M", "G", "T"]
        let number = suffixes.first { text.hasSuffix($0) }.map { text.dropLast($0.count) } ?? Substring(text)
        let parts = number.split(separator: ".", omittingEmptySubsequences: false)
        return (1...2).contains(parts.count) && number.count <= 8
            && parts.allSatisfy { !$0.isEmpty && $0.allSatisfy { $0.isASCII && $0.isNumber } }
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
/// This is the file's one parser: compose (`menagerie-compose`) and, through `compose list`, the deploy scripts
/// read it here. `[service]` sections of `key = value` lines, `#` comment
/// lines; a key it does not know is an error, so a key is added here (and to the file's header) only.
public enum ServiceList {
    /// `text` as a decimal number of 1 to `digits` ASCII digits within `range`, nil otherwise: the one rule for a
    /// section's ports and counts.
    static func decimal(_ text: String, digits: Int, in range: ClosedRange<Int>) -> Int? {
        guard (1...digits).contains(text.count), text.allSatisfy(\.isASCIIDigit), let number = Int(text),
            range.contains(number)
        else { return nil }
        return number
    }

    /// A value's words, split at spaces and tabs (`models`, `packages`, `resources`).
    static func words(_ text: String) -> [String] {
        text.split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init)
    }

    /// The keys a section may set; `arg` may repeat.
    public static let keys = [
        "port", "replicas", "data", "nodes", "arg", "proto", "models", "cluster", "blobs", "container", "kubernetes",
        "packages", "pods", "resources", "volume",
    ]
    /// The models compose knows how to install (`compose/compose NAME` installs one), which `models` may name.
    public static let installers = ["feature-print", "ppocr", "sevenseg"]
    /// The highest node number `nodes` may name (and `compose up --nodes` start): node N's address is on a /24.
    public static let maxNode = 99

    /// The services file's path, or nil when none is found.
    public static func file(environment: [String: String] = ProcessInfo.processInfo.environment) -> URL? {
        if let explicit = environment["MENAGERIE_COMPOSE_CONFIG"], !explicit.isEmpty {
            return URL(fileURLWithPath: explicit)
        }
        return UpwardSearch.find("compose/services.conf")
    }

    /// The services named in the services file, in its order; empty when there is no file or compose would
    /// refuse it (compose says why).
    public static func names(environment: [String: String] = ProcessInfo.processInfo.environment) -> [String] {
        guard let file = file(environment: environment), let text = try? String(contentsOf: file, encoding: .utf8)
        else { return [] }
        return ((try? parse(text, file: file.path)) ?? []).map(\.name)
    }

    /// Reads a services file; `file` names it in errors.
    public static func parse(_ text: String, file: String = "services.conf") throws(ServicesFileError)
        -> [ServiceSettings]
    {
        var services: [ServiceSettings] = []
        var sectionLines: [String: Int] = [:]
        var seenKeys: Set<String> = []
        var current: (line: Int, port: Int?, settings: ServiceSettings)?

        func fail(_ line: Int, _ message: String) -> ServicesFileError {
            ServicesFileError(file: file, line: line, message: message)
        }
        func close() throws(ServicesFileError) {
            guard var section = current else { return }
            let name = section.settings.name
            guard let port = section.port else { throw fail(section.line, "[\(name)] sets no port") }
            if section.settings.blobs, !section.settings.cluster {
                throw fail(
                    section.line,
                    "[\(name)] keeps its blobs on its nodes (blobs = yes) and has no cluster (cluster = yes)")
            }
            section.settings.port = port
            services.append(section.settings)
        }
        func yesOrNo(_ key: String, _ value: String, _ line: Int) throws(ServicesFileError) -> Bool {
            guard value == "yes" || value == "no" else { throw fail(line, "\(key) must be yes or no (got '\(value)')") }
            return value == "yes"
        }

        // Lines as bash's `read` sees them: split at \n only, a trailing \r dropped.
        // (By bytes: "\r\n" is one Character, which a split at "\n" would not split.)
        for (offset, raw) in text.utf8.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false)
            .enumerated()
        {
            let number = offset + 1
            var line = Substring(String(decoding: raw, as: UTF8.self))
            if line.hasSuffix("\r") { line = line.dropLast() }
            let trimmed = trim(line)
            if trimmed.isEmpty || trimmed.hasPrefix("#") { continue }
            if trimmed.hasPrefix("["), trimmed.hasSuffix("]") {
                let name = String(trimmed.dropFirst().dropLast())
                guard !name.isEmpty,
                    name.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_" || $0 == "-") })
                else {
                    throw fail(number, "'[\(name)]' is not a service name (letters, digits, _ and -)")
                }
                if let first = sectionLines[name] {
                    throw fail(number, "[\(name)] appears twice (first on line \(first))")
                }
                try close()
                sectionLines[name] = number
                seenKeys = []
                current = (number, nil, ServiceSettings(name: name, port: 0))
                continue
            }
            guard let equals = trimmed.firstIndex(of: "=") else {
                let fields = trimmed.split(whereSeparator: { $0 == " " || $0 == "\t" })
                if fields.count == 4 {
                    throw fail(
                        number,
                        "'\(trimmed)' is the old one-line format; write it as [\(fields[0])] with port = \(fields[1]), replicas = \(fields[2]), data = \(fields[3]) on lines of their own"
                    )
                }
                throw fail(number, "expected [SERVICE] or KEY = VALUE, got '\(trimmed)'")
            }
            let key = trim(trimmed[..<equals]), value = trim(trimmed[trimmed.index(after: equals)...])
            guard current != nil else { throw fail(number, "'\(key)' comes before any [SERVICE] section") }
            let section = current!.settings.name
            guard keys.contains(key) else {
                throw fail(number, "unknown key '\(key)' in [\(section)] (known: \(keys.joined(separator: ", ")))")
            }
            if key != "arg", !seenKeys.insert(key).inserted {
                throw fail(number, "\(key) is set twice in [\(section)]")
            }
            switch key {
            case "port":
                guard let port = decimal(value, digits: 5, in: 1...65535) else {
                    throw fail(number, "port must be a number 1-65535 (got '\(value)')")
                }
                current!.port = port
            case "replicas":
                guard let replicas = decimal(value, digits: 5, in: 0...99999) else {
                    throw fail(number, "replicas must be a number 0-99999 (got '\(value)')")
                }
                current!.settings.replicas = replicas
            case "data":
                guard !value.isEmpty else { throw fail(number, "data needs a directory") }
                current!.settings.data = value
            case "nodes":
                guard !value.isEmpty else { throw fail(number, "nodes needs a list of node numbers (nodes = 1,2)") }
                for item in value.split(separator: ",", omittingEmptySubsequences: false).map({ trim($0) }) {
                    guard (1...2).contains(item.count), item.allSatisfy(\.isASCIIDigit), let node = Int(item),
                        (1...maxNode).contains(node)
                    else {
                        throw fail(
                            number, "nodes must be node numbers 1-\(maxNode) separated by commas (got '\(value)')")
                    }
                    guard !current!.settings.nodes.contains(node) else {
                        throw fail(number, "node \(node) is listed twice in [\(section)]'s nodes")
                    }
                    current!.settings.nodes.append(node)
                }
            case "proto":
                let parts = value.split(separator: ".", omittingEmptySubsequences: false)
                guard !value.isEmpty,
                    parts.allSatisfy({
                        !$0.isEmpty && $0.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_") }
                    })
                else {
                    throw fail(
                        number,
                        "proto must be a protobuf package, words joined by dots (proto = menagerie.zoo.v1; got '\(value)')"
                    )
                }
                current!.settings.proto = value
            case "models":
                guard !value.isEmpty else {
                    throw fail(
                        number,
                        "models needs the names of what compose installs (models = \(installers.joined(separator: " ")))"
                    )
                }
                for model in words(value) {
                    guard installers.contains(model) else {
                        throw fail(
                            number,
                            "unknown model '\(model)' in [\(section)] (known: \(installers.joined(separator: ", ")))")
                    }
                    guard !current!.settings.models.contains(model) else {
                        throw fail(number, "model \(model) is listed twice in [\(section)]'s models")
                    }
                    current!.settings.models.append(model)
                }
            case "cluster":
                current!.settings.cluster = try yesOrNo(key, value, number)
            case "blobs":
                current!.settings.blobs = try yesOrNo(key, value, number)
            case "container", "kubernetes":
                guard !value.isEmpty else { throw fail(number, "\(key) needs a file (relative to this file's folder)") }
                if key == "container" {
                    current!.settings.container = value
                } else {
                    current!.settings.kubernetes = value
                }
            case "packages":
                let packages = words(value)
                guard !packages.isEmpty,
                    packages.allSatisfy({
                        $0.allSatisfy { $0.isASCII && ($0.isLowercase || $0.isNumber || "+-.".contains($0)) }
                    })
                else {
                    throw fail(
                        number, "packages must be Debian package names (packages = libuv1 libssl3; got '\(value)')")
                }
                current!.settings.packages = packages
            case "pods":
                guard let pods = decimal(value, digits: 3, in: 1...999) else {
                    throw fail(number, "pods must be a number 1-999 (got '\(value)')")
                }
                current!.settings.pods = pods
            case "resources":
                let parts = words(value)
                guard parts.count == 3, parts.allSatisfy(PodResources.isQuantity) else {
                    throw fail(
                        number,
                        "resources must be a CPU request, a memory request and a memory limit (resources = 250m 256Mi 1Gi; got '\(value)')"
                    )
                }
                current!.settings.resources = PodResources(cpu: parts[0], memory: parts[1], memoryLimit: parts[2])
            case "volume":
                guard PodResources.isQuantity(value) else {
                    throw fail(number, "volume must be a size (volume = 2Gi; got '\(value)')")
                }
                current!.settings.volume = value
            default:
                guard !value.isEmpty else { throw fail(number, "arg needs a value (one command-line argument)") }
                current!.settings.arguments.append(value)
            }
        }
        try close()
        return services
    }

    /// The services as `compose config` prints them: every key written out, in one order (those left at their
    /// default beyond port, replicas and data left out).
    public static func render(_ services: [ServiceSettings]) -> String {
        services.map { lines(of: $0).joined(separator: "\n") + "\n" }.joined(separator: "\n")
    }

    private static func lines(of service: ServiceSettings) -> [String] {
        var lines = [
            "[\(service.name)]", "port = \(service.port)", "replicas = \(service.replicas)", "data = \(service.data)",
        ]
        if !service.nodes.isEmpty { lines.append("nodes = " + service.nodes.map(String.init).joined(separator: ",")) }
        if let proto = service.proto { lines.append("proto = \(proto)") }
        if !service.models.isEmpty { lines.append("models = " + service.models.joined(separator: " ")) }
        if service.cluster { lines.append("cluster = yes") }
        if service.blobs { lines.append("blobs = yes") }
        if let container = service.container { lines.append("container = \(container)") }
        if let kubernetes = service.kubernetes { lines.append("kubernetes = \(kubernetes)") }
        if !service.packages.isEmpty { lines.append("packages = " + service.packages.joined(separator: " ")) }
        if service.pods != 1 { lines.append("pods = \(service.pods)") }
        if let resources = service.resources {
            lines.append("resources = \(resources.cpu) \(resources.memory) \(resources.memoryLimit)")
        }
        if let volume = service.volume { lines.append("volume = \(volume)") }
        return lines + service.arguments.map { "arg = \($0)" }
    }

    /// Spaces and tabs off both ends, as compose trims them.
    private static func trim<Text: StringProtocol>(_ text: Text) -> String {
        String(
            text.drop(while: { $0 == " " || $0 == "\t" }).reversed().drop(while: { $0 == " " || $0 == "\t" }).reversed()
        )
    }
}

extension Character {
    fileprivate var isASCIIDigit: Bool { isASCII && isNumber }
}
