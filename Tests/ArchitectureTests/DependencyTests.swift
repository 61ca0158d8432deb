import Foundation
import Testing

/// The module graph as Package.swift declares it: what each layer may link. These are the promises of
/// ARCHITECTURE.md that a stray dependency would silently break (an OCR proto edit rebuilding the zoo, the gateway
/// linking libtorch).
@Suite struct DependencyTests {
    /// The package's root folder.
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    /// A target as `swift package dump-package` describes it.
    struct Target: Sendable {
        let name: String
        /// Its folder, from the package's root.
        let path: String
        /// The names of the targets (and products) it depends on directly.
        let dependencies: [String]
    }

    static let targets: [Target] = {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        // A scratch path of its own: the default .build is locked by the `swift test` running this.
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("architecture-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: scratch) }
        process.arguments = [
            "swift", "package", "--package-path", root.path, "--scratch-path", scratch.path, "dump-package",
        ]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        do { try process.run() } catch { return [] }
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0,
            let manifest = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
            let targets = manifest["targets"] as? [[String: Any]]
        else { return [] }
        return targets.compactMap { target -> Target? in
            guard let name = target["name"] as? String else { return nil }
            let dependencies = (target["dependencies"] as? [[String: Any]] ?? []).compactMap { dependency -> String? in
                for key in ["byName", "target", "product"] {
                    if let parts = dependency[key] as? [Any], let name = parts.first as? String { return name }
                }
                return nil
            }
            return Target(name: name, path: target["path"] as? String ?? "Sources/\(name)", dependencies: dependencies)
        }
    }()

    /// Target name → the names of the targets (and products) it depends on directly.
    static let graph: [String: [String]] = Dictionary(
        targets.map { ($0.name, $0.dependencies) }, uniquingKeysWith: { first, _ in first })

    /// Everything `target` links, directly or not.
    static func closure(of target: String) -> Set<String> {
        var seen: Set<String> = []
        var stack = graph[target] ?? []
        while let next = stack.popLast() {
            if seen.insert(next).inserted { stack += graph[next] ?? [] }
        }
        return seen
    }

    /// Every service, the test-only guestbook included: each name whose Core, Service, API and CLI targets Package.swift
    /// declares (what its `service(...)` line makes), so a new service keeps these promises without being listed here.
    static let services: [String] = targets.map(\.name).filter { $0.hasSuffix("Core") }.map { String($0.dropLast(4)) }
        .filter { name in ["Service", "API", "CLI"].allSatisfy { graph[name + $0] != nil } }.sorted()

    @Test func theManifestIsRead() {
        #expect(Self.graph["ZooService"] != nil, "swift package dump-package failed or has no ZooService target")
    }

    /// The services found by their targets are at least those compose's services file starts (and the guestbook):
    /// a rule keyed on the target names cannot drift into checking none of them.
    @Test func everyServiceOfTheServicesFileIsFoundByItsTargets() throws {
        let file = Self.root.appendingPathComponent("compose/services.conf")
        let text = try String(contentsOf: file, encoding: .utf8)
        let sections = text.split(separator: "\n").filter { $0.hasPrefix("[") && $0.hasSuffix("]") }
            .map { $0.dropFirst().dropLast().lowercased() }
        #expect(!sections.isEmpty, "no [service] section in \(file.path)")
        let found = Set(Self.services.map { $0.lowercased() })
        for section in sections + ["guestbook"] {
            #expect(
                found.contains(section),
                "[\(section)] has no Core, Service, API and CLI targets (found \(Self.services))")
        }
    }

    /// `swift build --target ZooService` compiles no OCR, health or classification code; likewise for each service.
    @Test(arguments: services)
    func aServiceLinksNoOtherDomain(service: String) {
        for part in ["Service", "Core", "API", "CLI"] {
            let linked = Self.closure(of: service + part)
            for other in Self.services where other != service {
                let foreign = linked.filter { $0.hasPrefix(other) }
                #expect(foreign.isEmpty, "\(service)\(part) links \(foreign.sorted())")
            }
        }
    }

    /// The runtime layers know no domain: a service's proto never rebuilds them.
    @Test(arguments: [
        "Schema", "RPCWire", "RPC", "Transport", "TCP", "TLSStreams", "ServerSeam", "ServerCore", "Framing", "Connect",
        "HTTP", "ServiceKit",
        "Storage", "WorkLane", "Base", "Jobs",
    ])
    func aRuntimeLayerLinksNoDomain(layer: String) {
        let linked = Self.closure(of: layer)
        let domains = linked.filter { name in Self.services.contains { name.hasPrefix($0) } || name.hasPrefix("JobsAPI")
        }
        #expect(domains.isEmpty, "\(layer) links \(domains.sorted())")
        #expect(Self.graph[layer] != nil)
    }

    /// A Core holds the domain: no RPC, no generated messages.
    @Test(arguments: services)
    func aCoreKnowsNoRPC(service: String) {
        let linked = Self.closure(of: service + "Core")
        let rpc = linked.filter {
            ["RPC", "RPCWire", "Schema", "Transport", "ServiceKit"].contains($0) || $0.hasSuffix("API")
        }
        #expect(rpc.isEmpty, "\(service)Core links \(rpc.sorted())")
    }

    /// The gateway links command groups and clients, no server handlers and no libtorch (which costs every
    /// process that links it ~0.9 s at start).
    @Test func theGatewayLinksNoServer() {
        let linked = Self.closure(of: "gateway")
        let servers = linked.filter {
            $0.hasSuffix("Service") || $0 == "ServiceKit" || $0.hasPrefix("Torch") || $0 == "TextRecognition"
        }
        #expect(servers.isEmpty, "gateway links \(servers.sorted())")
    }

    // MARK: Transport, by layer (ARCHITECTURE.md, "Transport, by layer")

    /// The protocols on the server's connections, and the streams under them.
    static let protocolModules = ["Framing", "Connect", "TLSStreams"]

    /// A protocol hands the server its calls through the seam (`ServerSeam`), never through the server core's types.
    @Test(arguments: protocolModules)
    func aProtocolLinksNoServerCore(module: String) {
        #expect(Self.graph[module] != nil, "\(module) is missing from Package.swift")
        #expect(!Self.closure(of: module).contains("ServerCore"), "\(module) links ServerCore")
    }

    /// The server core serves calls whatever protocol brought them: it links none, nor what they parse with.
    @Test func theServerCoreLinksNoProtocol() {
        #expect(Self.graph["ServerCore"] != nil, "ServerCore is missing from Package.swift")
        let linked = Self.closure(of: "ServerCore").filter {
            (Self.protocolModules + ["Transport", "HTTP", "TLS"]).contains($0)
        }
        #expect(linked.isEmpty, "ServerCore links \(linked.sorted())")
    }

    /// libuv is wrapped once: only the loop module (`TCP`) depends on `CLibUV`.
    @Test func onlyTheLoopModuleLinksLibUV() {
        let linking = Self.graph.filter { $0.value.contains("CLibUV") }.keys.sorted()
        #expect(linking == ["TCP"])
    }

    /// No Shared module is a monolith: each one's Swift sources are at most 3,000 lines.
    @Test func noSharedModuleExceedsThreeThousandLines() throws {
        let shared = Self.targets.filter { $0.path.hasPrefix("Shared/") }
        #expect(shared.count > 10, "no Shared targets found")
        for target in shared {
            let folder = Self.root.appendingPathComponent(target.path)
            guard let files = FileManager.default.enumerator(at: folder, includingPropertiesForKeys: nil) else {
                continue
            }
            var lines = 0
            for case let file as URL in files where file.pathExtension == "swift" {
                lines += try String(contentsOf: file, encoding: .utf8).split(
                    separator: "\n", omittingEmptySubsequences: false
                ).count
            }
            #expect(lines <= 3000, "\(target.name) (\(target.path)) has \(lines) lines of Swift")
        }
    }

    /// A test-only service stays in the tests: the production services link none of it, and the gateway only its
    /// command group (its CLI, the API it calls, their protobuf-c code), shown only to a stack whose services file
    /// lists it — never its Core, handlers or executable.
    @Test func nothingButTheTestsLinksTheTestOnlyService() {
        #expect(Self.graph["GuestbookCLI"] != nil, "the test-only service's targets are missing from Package.swift")
        for target in ["zoo", "ocr", "health", "classification", "menagerie-bench"] {
            let linked = Self.closure(of: target).filter { $0.hasPrefix("Guestbook") || $0 == "guestbook" }
            #expect(linked.isEmpty, "\(target) links \(linked.sorted())")
        }
        let linkedByGateway = Self.closure(of: "gateway").filter { $0.hasPrefix("Guestbook") || $0 == "guestbook" }
        #expect(linkedByGateway == Self.testServiceCommandGroup, "the gateway links \(linkedByGateway.sorted())")
    }

    /// What the gateway may link of the test-only service: its command group and what that calls through.
    static let testServiceCommandGroup: Set<String> = ["GuestbookCLI", "GuestbookAPI", "GuestbookProtoC"]

    // MARK: Test support stays in the tests

    /// No production module links test support: nothing under Shared/ or Services/ depends, even indirectly, on a
    /// target under Tests/ (the test-only service's own folder, Tests/Services, is itself a test target).
    @Test func noProductionModuleLinksTestSupport() {
        let testTargets = Set(Self.targets.filter { $0.path.hasPrefix("Tests/") }.map(\.name))
        let production = Self.targets.filter { $0.path.hasPrefix("Shared/") || $0.path.hasPrefix("Services/") }
        #expect(production.count > 20, "no production targets found")
        #expect(testTargets.contains("StorageTestSupport"))
        for target in production {
            // The gateway's one exception: the test-only service's command group (see above).
            let allowed = target.name == "gateway" ? Self.testServiceCommandGroup : []
            let linked = Self.closure(of: target.name).intersection(testTargets).subtracting(allowed)
            #expect(linked.isEmpty, "\(target.name) links \(linked.sorted())")
        }
    }

    /// The tests choose their storage backend (StorageTestSupport reads MENAGERIE_STORAGE_BACKEND); no production
    /// source reads that variable or holds the test dqlite node.
    @Test func noProductionSourceChoosesTheTestBackend() throws {
        for folder in ["Shared", "Services"] {
            guard
                let files = FileManager.default.enumerator(
                    at: Self.root.appendingPathComponent(folder), includingPropertiesForKeys: nil)
            else {
                Issue.record("no \(folder) folder")
                continue
            }
            for case let file as URL in files where file.pathExtension == "swift" {
                let text = try String(contentsOf: file, encoding: .utf8)
                for marker in ["MENAGERIE_STORAGE_BACKEND", "TestCluster"] {
                    #expect(!text.contains(marker), "\(file.path) mentions \(marker)")
                }
            }
        }
    }
}
