import Foundation
import GatewayKit
import RPC
import Testing
import Transport

/// The parts every command group shares: the service list, endpoint resolution, output and progress.
@Suite struct GatewayKitTests {
    @Test func theServicesFileIsSectionsOfKeysWithArgumentsPerService() throws {
        let text = """
            # comment
            [zoo]
            port = 07100
            data = .data/zoo
            arg = --refresh=0 2 * * 6
            \targ=--refresh-source=../data # not a comment\r

              [ocr]\t
            port=7200
            replicas = 0

            """
        #expect(
            try ServiceList.parse(text) == [
                ServiceSettings(
                    name: "zoo", port: 7100, replicas: 1, data: ".data/zoo",
                    arguments: ["--refresh=0 2 * * 6", "--refresh-source=../data # not a comment"]),
                ServiceSettings(name: "ocr", port: 7200, replicas: 0, data: ".data/ocr"),
            ])
        #expect(
            ServiceList.render(try ServiceList.parse(text)) == """
                [zoo]
                port = 7100
                replicas = 1
                data = .data/zoo
                arg = --refresh=0 2 * * 6
                arg = --refresh-source=../data # not a comment

                [ocr]
                port = 7200
                replicas = 0
                data = .data/ocr

                """)
    }

    /// `nodes` places a service on nodes of `compose up --nodes N`, in the order written; none: every node.
    @Test func theNodesKeyPlacesAServiceOnTheNodesItLists() throws {
        let services = try ServiceList.parse("[zoo]\nport = 7100\nnodes = 3, 1\t,02\n[ocr]\nport = 7200\n")
        #expect(services.map(\.nodes) == [[3, 1, 2], []])
        #expect(
            ServiceList.render(services)
                == "[zoo]\nport = 7100\nreplicas = 1\ndata = .data/zoo\nnodes = 3,1,2\n\n[ocr]\nport = 7200\nreplicas = 1\ndata = .data/ocr\n"
        )
    }

    /// The manifest's keys beyond where and how many: what compose installs, whether the service clusters, its
    /// proto package and deploy files; written back by `render` only when set.
    @Test func aSectionNamesItsProtoModelsClusterAndDeployFiles() throws {
        let text = """
            [ocr]
            port = 7200
            proto = menagerie.ocr.v1
            models = ppocr\tsevenseg
            cluster = yes
            blobs = no
            container = ../deploy/containers/ocr.Containerfile
            kubernetes = ../deploy/kubernetes/ocr.yaml
            [zoo]
            port = 7100
            cluster = no
            """
        let services = try ServiceList.parse(text)
        #expect(
            services == [
                ServiceSettings(
                    name: "ocr", port: 7200, proto: "menagerie.ocr.v1", models: ["ppocr", "sevenseg"], cluster: true,
                    container: "../deploy/containers/ocr.Containerfile", kubernetes: "../deploy/kubernetes/ocr.yaml"),
                ServiceSettings(name: "zoo", port: 7100),
            ])
        #expect(
            ServiceList.render(services) == """
                [ocr]
                port = 7200
                replicas = 1
                data = .data/ocr
                proto = menagerie.ocr.v1
                models = ppocr sevenseg
                cluster = yes
                container = ../deploy/containers/ocr.Containerfile
                kubernetes = ../deploy/kubernetes/ocr.yaml

                [zoo]
                port = 7100
                replicas = 1
                data = .data/zoo

                """)
        #expect(try ServiceList.parse(ServiceList.render(services)) == services)
    }

    /// The keys the deploy files are rendered from, read and written back as they were.
    @Test func theDeployKeysAreReadAndRenderedBack() throws {
        let text =
            "[ocr]\nport = 7200\npackages = libuv1  libstdc++6\tzlib1g\npods = 3\nresources = 0.5 512Mi 2Gi\nvolume = 2Gi\n"
        let services = try ServiceList.parse(text)
        var expected = ServiceSettings(name: "ocr", port: 7200)
        expected.packages = ["libuv1", "libstdc++6", "zlib1g"]
        expected.pods = 3
        expected.resources = PodResources(cpu: "0.5", memory: "512Mi", memoryLimit: "2Gi")
        expected.volume = "2Gi"
        #expect(services == [expected])
        #expect(
            ServiceList.render(services) == """
                [ocr]
                port = 7200
                replicas = 1
                data = .data/ocr
                packages = libuv1 libstdc++6 zlib1g
                pods = 3
                resources = 0.5 512Mi 2Gi
                volume = 2Gi

                """)
        #expect(try ServiceList.parse(ServiceList.render(services)) == services)
    }

    /// The shipped file names what compose, the gateway and the deploy scripts used to list in code of their own.
    @Test func theShippedFileIsTheManifest() throws {
        let file = try #require(ServiceList.file(environment: [:]))
        let services = try ServiceList.parse(try String(contentsOf: file, encoding: .utf8))
        #expect(services.filter(\.cluster).map(\.name) == ["ocr", "health", "classification"])
        #expect(services.filter(\.blobs).map(\.name) == ["classification"])
        #expect(services.map(\.models) == [[], ["ppocr", "sevenseg"], [], ["feature-print"]])
        let root = file.deletingLastPathComponent().deletingLastPathComponent()
        for service in services {
            // Its proto package is one Proto/ declares.
            let proto = try #require(service.proto, "\(service.name) names no proto package")
            let path = root.appendingPathComponent("Proto/" + proto.replacingOccurrences(of: ".", with: "/"))
            let declared = try FileManager.default.contentsOfDirectory(at: path, includingPropertiesForKeys: nil).filter
            { $0.pathExtension == "proto" }
            .contains { (try? String(contentsOf: $0, encoding: .utf8))?.contains("\npackage \(proto);") == true }
            #expect(declared, "no .proto in \(path.path) declares package \(proto)")
            for path in [service.container, service.kubernetes] {
                let path = try #require(path, "\(service.name) names no deploy file")
                #expect(
                    FileManager.default.fileExists(
                        atPath: file.deletingLastPathComponent().appendingPathComponent(path).path), "\(path)")
            }
        }
    }

    /// Every way a services file can be wrong is refused with its line and what is wrong there.
    @Test func aServicesFileComposeWouldRefuseIsAnErrorNamingTheLine() {
        let cases: [(String, Int, String)] = [
            (
                "zoo 7100 1 .data/zoo", 1,
                "'zoo 7100 1 .data/zoo' is the old one-line format; write it as [zoo] with port = 7100, replicas = 1, data = .data/zoo on lines of their own"
            ),
            (
                "[zoo]\nport = 7100\ntls = on", 3,
                "unknown key 'tls' in [zoo] (known: port, replicas, data, nodes, arg, proto, models, cluster, blobs, container, kubernetes, packages, pods, resources, volume)"
            ),
            ("[zoo]\nport = 71x", 2, "port must be a number 1-65535 (got '71x')"),
            ("[zoo]\nport = 0", 2, "port must be a number 1-65535 (got '0')"),
            ("[zoo]\nport = 65536", 2, "port must be a number 1-65535 (got '65536')"),
            ("[zoo]\nport = 1\nreplicas = -1", 3, "replicas must be a number 0-99999 (got '-1')"),
            ("[zoo]\nport = 1\nreplicas = 100000", 3, "replicas must be a number 0-99999 (got '100000')"),
            ("[zoo]\nreplicas = 2\n", 1, "[zoo] sets no port"),
            ("[zoo]\nport = 1\nport = 2", 3, "port is set twice in [zoo]"),
            ("[zoo]\nport = 1\n[ocr]\nport = 2\n[zoo]", 5, "[zoo] appears twice (first on line 1)"),
            ("port = 1", 1, "'port' comes before any [SERVICE] section"),
            ("[z o]", 1, "'[z o]' is not a service name (letters, digits, _ and -)"),
            ("[zoo]\nport = 1\narg =", 3, "arg needs a value (one command-line argument)"),
            ("[zoo]\nport = 1\ndata =  ", 3, "data needs a directory"),
            ("[zoo]\nport 7100", 2, "expected [SERVICE] or KEY = VALUE, got 'port 7100'"),
            ("[zoo]\nport = 1\nnodes =", 3, "nodes needs a list of node numbers (nodes = 1,2)"),
            ("[zoo]\nport = 1\nnodes = 1,,2", 3, "nodes must be node numbers 1-99 separated by commas (got '1,,2')"),
            ("[zoo]\nport = 1\nnodes = 100", 3, "nodes must be node numbers 1-99 separated by commas (got '100')"),
            ("[zoo]\nport = 1\nnodes = 0", 3, "nodes must be node numbers 1-99 separated by commas (got '0')"),
            ("[zoo]\nport = 1\nnodes = 2, 02", 3, "node 2 is listed twice in [zoo]'s nodes"),
            ("[zoo]\nport = 1\nnodes = 1\nnodes = 2", 4, "nodes is set twice in [zoo]"),
            ("[zoo]\nport = 1\ncluster = true", 3, "cluster must be yes or no (got 'true')"),
            (
                "[zoo]\nport = 1\nblobs = yes", 1,
                "[zoo] keeps its blobs on its nodes (blobs = yes) and has no cluster (cluster = yes)"
            ),
            (
                "[zoo]\nport = 1\nmodels = ppocr tesseract", 3,
                "unknown model 'tesseract' in [zoo] (known: feature-print, ppocr, sevenseg)"
            ),
            ("[zoo]\nport = 1\nmodels = ppocr  ppocr", 3, "model ppocr is listed twice in [zoo]'s models"),
            (
                "[zoo]\nport = 1\nmodels =", 3,
                "models needs the names of what compose installs (models = feature-print ppocr sevenseg)"
            ),
            (
                "[zoo]\nport = 1\nproto = menagerie..v1", 3,
                "proto must be a protobuf package, words joined by dots (proto = menagerie.zoo.v1; got 'menagerie..v1')"
            ),
            ("[zoo]\nport = 1\ncontainer =", 3, "container needs a file (relative to this file's folder)"),
            ("[zoo]\nport = 1\nkubernetes = a\nkubernetes = b", 4, "kubernetes is set twice in [zoo]"),
            // What its deploy files are rendered from.
            (
                "[zoo]\nport = 1\npackages = libuv1 LibSSL", 3,
                "packages must be Debian package names (packages = libuv1 libssl3; got 'libuv1 LibSSL')"
            ),
            ("[zoo]\nport = 1\npods = 0", 3, "pods must be a number 1-999 (got '0')"),
            ("[zoo]\nport = 1\npods = 1000", 3, "pods must be a number 1-999 (got '1000')"),
            (
                "[zoo]\nport = 1\nresources = 250m 256Mi", 3,
                "resources must be a CPU request, a memory request and a memory limit (resources = 250m 256Mi 1Gi; got '250m 256Mi')"
            ),
            (
                "[zoo]\nport = 1\nresources = 250m 256MB 1Gi", 3,
                "resources must be a CPU request, a memory request and a memory limit (resources = 250m 256Mi 1Gi; got '250m 256MB 1Gi')"
            ),
            ("[zoo]\nport = 1\nvolume = 2 Gi", 3, "volume must be a size (volume = 2Gi; got '2 Gi')"),
            ("[zoo]\nport = 1\nvolume = Gi", 3, "volume must be a size (volume = 2Gi; got 'Gi')"),
        ]
        for (text, line, message) in cases {
            let error = #expect(throws: ServicesFileError.self, "\(text)") {
                try ServiceList.parse(text, file: "s.conf")
            }
            #expect(error == ServicesFileError(file: "s.conf", line: line, message: message), "\(text)")
        }
    }

    @Test func theServicesFileComesFromTheEnvironmentElseTheSourceTree() throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("services-\(UUID().uuidString).conf")
        try "[b]\nport = 1\n[a]\nport = 2\n".write(to: file, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: file) }
        #expect(ServiceList.names(environment: ["MENAGERIE_COMPOSE_CONFIG": file.path]) == ["b", "a"])
        // The test runs from the package's .build: the upward search finds compose/services.conf of this tree.
        let found = try #require(ServiceList.file(environment: [:]))
        #expect(found.path.hasSuffix("compose/services.conf"))
        #expect(ServiceList.names(environment: [:]) == ["zoo", "ocr", "health", "classification"])
    }

    @Test func endpointsListServicesInTheFilesOrderThenByName() throws {
        let endpoints = try Endpoints(
            flags: ["zeta=127.0.0.1:1", "ocr=127.0.0.1:2,127.0.0.1:3", "alpha=[::1]:4", "zoo=localhost:5"],
            stateDirectory: nil,
            environment: [:])
        #expect(endpoints.services(listed: ["zoo", "ocr", "health"]) == ["zoo", "ocr", "health", "alpha", "zeta"])
        #expect(endpoints.byService["ocr"] == ["127.0.0.1:2", "127.0.0.1:3"])
        for bad in ["zoo", "=127.0.0.1:1", "zoo=127.0.0.1", "zoo=example.org:80", "zoo=127.0.0.1:70000"] {
            #expect(throws: RPCError.self, "\(bad)") {
                try Endpoints(flags: [bad], stateDirectory: nil, environment: [:])
            }
        }
        let fromEnvironment = try Endpoints(
            flags: [], stateDirectory: nil, environment: ["MENAGERIE_ENDPOINTS": "zoo=127.0.0.1:1;ocr=127.0.0.1:2"])
        #expect(fromEnvironment.byService == ["zoo": ["127.0.0.1:1"], "ocr": ["127.0.0.1:2"]])
        let missing = #expect(throws: RPCError.self) { try fromEnvironment.client(for: "health") }
        #expect(missing?.code == .unavailable)
    }

    /// The stack's admin token (its state) is the stack's: an override that is not one of its endpoints gets none, and
    /// the UNAUTHENTICATED hint says so and names MENAGERIE_TOKEN; a variable's token is named as that variable.
    @Test func theStacksAdminTokenStaysWithTheStacksEndpoints() throws {
        let state = FileManager.default.temporaryDirectory.appendingPathComponent("gateway-state-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: state, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: state) }
        try "mnt_admin\n".write(to: state.appendingPathComponent("admin-token"), atomically: true, encoding: .utf8)
        try "zoo 10.237.42.11:7100\n".write(
            to: state.appendingPathComponent("endpoints"), atomically: true, encoding: .utf8)
        let own = try Endpoints(flags: [], stateDirectory: state.path, environment: [:])
        #expect(own.tokenSource == .stackState && own.token == "mnt_admin")
        #expect(try own.client(for: "zoo").credentials["authorization"] == "Bearer mnt_admin")
        #expect(own.mayCarryTokenInPlaintext("10.237.42.11:7100"))
        let foreign = try Endpoints(flags: ["zoo=127.0.0.1:12997"], stateDirectory: state.path, environment: [:])
        #expect(try foreign.client(for: "zoo").credentials.isEmpty)
        #expect(foreign.unauthenticatedHint(service: "zoo").contains("MENAGERIE_TOKEN"))
        #expect(
            !foreign.mayCarryTokenInPlaintext("10.237.42.12:7100")
                && foreign.mayCarryTokenInPlaintext("127.0.0.1:12997"))
        let chosen = try Endpoints(
            flags: ["zoo=127.0.0.1:12997"], stateDirectory: state.path, environment: ["MENAGERIE_TOKEN": "mnt_user"])
        #expect(try chosen.client(for: "zoo").credentials["authorization"] == "Bearer mnt_user")
        #expect(chosen.unauthenticatedHint(service: "zoo").contains("$MENAGERIE_TOKEN"))
    }

    @Test func exitCodesFollowTheStatus() {
        #expect(GatewayExit.code(for: RPCError(.invalidArgument, "")) == 3)
        #expect(GatewayExit.code(for: RPCError(.unavailable, "")) == 14)
        #expect(GatewayExit.code(for: RPCError(.ok, "")) == 1)
    }

    @Test func tablesAlignEveryColumnButTheLast() {
        #expect(
            formatTable(["ID", "NAME"], [["1", "Lev"], ["100", "Žirafa"]]) == "ID   NAME\n1    Lev\n100  Žirafa\n")
    }

    @Test func progressIsARedrawnBarOnATerminalAndLinesOtherwise() {
        final class Sink: @unchecked Sendable { var text = "" }
        let terminal = Sink(), pipe = Sink()
        let bar = ProgressDisplay(isTerminal: true) { terminal.text += $0 }
        let lines = ProgressDisplay(isTerminal: false) { pipe.text += $0 }
        for display in [bar, lines] {
            display.update(fraction: 0.5, message: "parsing")
            display.update(fraction: 2, message: "done")
            display.finish()
        }
        #expect(
            terminal.text
                == "\r[###############               ]  50% parsing\u{1B}[K\r[##############################] 100% done\u{1B}[K\n"
        )
        #expect(pipe.text == "50% parsing\n100% done\n")
    }
}

/// The one endpoint parser (transports, the raw echo client, `--endpoint`).
@Suite struct EndpointTests {
    @Test func parsesNumericAddressesAndLocalhost() throws {
        #expect(try Endpoint(parsing: "127.0.0.1:7100") == Endpoint(parsing: "127.0.0.1:7100"))
        let v6 = try Endpoint(parsing: "[::1]:7100")
        #expect(v6.host == "::1" && v6.port == 7100 && v6.description == "[::1]:7100")
        #expect(try Endpoint(parsing: "localhost:0").port == 0)
        for bad in [
            "", "7100", "127.0.0.1", "127.0.0.1:", "127.0.0.1:x", "example.org:80", "127.0.0.1:65536", "127.0.0.1:-1",
        ] {
            let error = #expect(throws: RPCError.self, "\(bad)") { try Endpoint(parsing: bad) }
            #expect(error?.code == .invalidArgument)
        }
    }
}
