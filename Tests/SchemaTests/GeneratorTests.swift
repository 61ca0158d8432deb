import Foundation
import Testing

@testable import SchemaGenerator

/// schema-gen's naming rules, and its errors for proto features the bridge does not support.
@Suite struct GeneratorTests {
    @Test func naming() {
        #expect(Naming.lowerCamelCase("call_id") == "callID")
        #expect(Naming.lowerCamelCase("timeout_micros") == "timeoutMicros")
        #expect(Naming.lowerCamelCase("avatar_url") == "avatarURL")
        #expect(Naming.lowerCamelCase("latency_p50_ms") == "latencyP50Ms")
        #expect(Naming.lowerCamelCase("SERVICE_UNKNOWN") == "serviceUnknown")
        #expect(Naming.lowerCamelCase("GetStats") == "getStats")
        #expect(Naming.lowerCamelCase("HTTPGet") == "httpGet")
        #expect(Naming.lowerCamelCase("id") == "id")
        #expect(Naming.namespace(ofPackage: "menagerie.zoo.v1") == "ZooV1")
        #expect(Naming.namespace(ofPackage: "menagerie.rpc.v1") == "RpcV1")
        #expect(Naming.namespace(ofPackage: "solo") == "Solo")
        #expect(Naming.enumCaseName("FRAME_KIND_REQUEST", enumName: "FrameKind") == "request")
        #expect(Naming.enumCaseName("SERVING_STATUS_NOT_SERVING", enumName: "ServingStatus") == "notServing")
        #expect(Naming.enumCaseName("HTTP_STATUS_OK", enumName: "HTTPStatus") == "ok")
        #expect(Naming.enumCaseName("LEVEL_2", enumName: "Level") == "level2")
        #expect(Naming.enumCaseName("OTHER", enumName: "Level") == "other")
        #expect(Naming.escaped("default") == "`default`")
        #expect(Naming.escaped("kind") == "kind")
        #expect(
            Naming.protobufCDescriptor(ofMessage: "menagerie.rpc.v1.HealthCheckRequest")
                == "menagerie__rpc__v1__health_check_request__descriptor")
        #expect(
            Naming.protobufCDescriptor(ofMessage: "menagerie.fixtures.v1.Envelope.Inner")
                == "menagerie__fixtures__v1__envelope__inner__descriptor")
        #expect(SchemaGenerator.swiftFileName(for: "menagerie/rpc/v1/rpc.proto") == "menagerie_rpc_v1_rpc.pb.swift")
    }

    @Test func malformedDescriptorSetsAreRejected() {
        #expect(throws: GeneratorError.self) {
            try SchemaGenerator.generate(descriptorSet: [0x0A, 0x05, 0x01], layout: Self.layout)
        }
        #expect(throws: GeneratorError.self) {
            try SchemaGenerator.generate(descriptorSet: [0x0F], layout: Self.layout)
        }
    }

    /// Places the scratch `test.proto` (and `other.proto`, for the tests of imports between modules).
    static let layout = ModuleLayout(entries: [
        .init(
            protoFile: "test.proto", swiftModule: "TestAPI", swiftDirectory: "T/API", cModule: "TestProtoC",
            cDirectory: "T/ProtoC"),
        .init(
            protoFile: "other.proto", swiftModule: "OtherAPI", swiftDirectory: "O/API", cModule: "OtherProtoC",
            cDirectory: "O/ProtoC"),
    ])

    @Test func modulesConfIsParsed() throws {
        let layout = try ModuleLayout(
            parsing: """
                # comment
                a/x.proto  XAPI  S/X/API  XProtoC  S/X/ProtoC   # trailing comment
                a/r.proto  RWire S/RW     RWireC   S/RWC        RPC  S/RPC/Generated

                """)
        #expect(layout.entries.count == 2)
        #expect(try layout.entry(for: "a/x.proto").serviceModule == "XAPI")
        #expect(try layout.entry(for: "a/r.proto").serviceDirectory == "S/RPC/Generated")
        #expect(
            try layout.entry(for: "a/x.proto").cPath(ofProtocCOutput: "a/x.pb-c.h") == "S/X/ProtoC/include/a/x.pb-c.h")
        #expect(try layout.entry(for: "a/x.proto").cPath(ofProtocCOutput: "a/x.pb-c.c") == "S/X/ProtoC/a/x.pb-c.c")
        #expect(throws: GeneratorError.self) { try ModuleLayout(parsing: "a/x.proto XAPI dir") }
        #expect(throws: GeneratorError.self) { try ModuleLayout(parsing: "a/x.proto A B C D\na/x.proto A B C D") }
        #expect(throws: GeneratorError.self) { try layout.entry(for: "a/unlisted.proto") }
    }

    /// Each file's code goes to its module; a file imports the modules of the files it imports; a C target's
    /// registry has a name of its own; a file the layout does not place is refused.
    @Test(.enabled(if: Tool.protoc != nil, "needs protoc to build descriptor sets"))
    func filesGoToTheirModules() throws {
        let output = try generate(
            "syntax = \"proto3\"; package m.t.v1; import \"other.proto\"; message M { m.o.v1.O other = 1; }",
            other: "syntax = \"proto3\"; package m.o.v1; message O { int32 a = 1; }")
        let paths = Set(output.files.map(\.path))
        #expect(
            paths.isSuperset(of: [
                "T/API/test.pb.swift", "O/API/other.pb.swift", "T/ProtoC/TestProtoC_registry.c",
                "T/ProtoC/include/TestProtoC_registry.h",
                "O/ProtoC/OtherProtoC_registry.c",
            ]))
        let test = try #require(output.files.first { $0.path == "T/API/test.pb.swift" }).contents
        #expect(test.contains("import OtherAPI\n"))
        #expect(test.contains("internal import TestProtoC\n"))
        #expect(test.contains("MessageSchema(named: protoName, descriptor: TestProtoC_message_descriptor(protoName))"))
        let registry = try #require(output.files.first { $0.path == "O/ProtoC/OtherProtoC_registry.c" }).contents
        #expect(registry.contains("&m__o__v1__o__descriptor"))
        #expect(!registry.contains("m__t__v1"))
        let unplaced = ModuleLayout(entries: [Self.layout.entries[0]])
        #expect(throws: GeneratorError.self) {
            try generate(
                "syntax = \"proto3\"; package m.t.v1; import \"other.proto\";",
                other: "syntax = \"proto3\"; package m.o.v1;", layout: unplaced)
        }
    }

    /// A service's proto needs no line in modules.conf: its package `menagerie.NAME.vN` goes to the one service folder
    /// named NAME in any case, whose spelling names the modules; a line of modules.conf still wins, and a package no
    /// folder (or two) could hold is refused naming both ways to place it.
    @Test func aServiceProtoIsPlacedByItsFolder() throws {
        let layout = ModuleLayout(
            entries: Self.layout.entries,
            serviceFolders: ["Services/OCR", "Services/Zoo", "Tests/Services/Guestbook", "Tests/Services/zoo"])
        #expect(
            try layout.entry(for: "menagerie/ocr/v1/ocr.proto", package: "menagerie.ocr.v1")
                == ModuleLayout.Entry(
                    protoFile: "menagerie/ocr/v1/ocr.proto", swiftModule: "OCRAPI",
                    swiftDirectory: "Services/OCR/API/Generated", cModule: "OCRProtoC",
                    cDirectory: "Services/OCR/ProtoC",
                    service: "OCR"))
        let guestbook = try layout.entry(
            for: "menagerie/guestbook/v1/guestbook.proto", package: "menagerie.guestbook.v1")
        #expect(
            guestbook.swiftDirectory == "Tests/Services/Guestbook/API/Generated" && guestbook.service == "Guestbook")
        #expect(try layout.entry(for: "test.proto", package: "menagerie.ocr.v1").swiftModule == "TestAPI")
        #expect(throws: GeneratorError.self) { try layout.entry(for: "a.proto", package: "menagerie.parrot.v1") }
        #expect(throws: GeneratorError.self) { try layout.entry(for: "a.proto", package: "other.ocr.v1") }
        #expect(throws: GeneratorError.self) { try layout.entry(for: "a.proto", package: "menagerie.zoo.v1") }
        #expect(throws: GeneratorError.self) { try layout.entry(for: "menagerie/ocr/v1/ocr.proto") }
    }

    /// The service's code goes to its folder, and the lists name it: its command group for the gateway, its messages
    /// for ProtoJSONInteropTests.
    @Test(.enabled(if: Tool.protoc != nil, "needs protoc to build descriptor sets"))
    func aServiceIsListedForTheGatewayAndTheTests() throws {
        let output = try generate(
            "syntax = \"proto3\"; package menagerie.parrot.v1; message Word { string text = 1; }",
            layout: ModuleLayout(entries: [], serviceFolders: ["Services/Parrot"]))
        let paths = Set(output.files.map(\.path))
        #expect(
            paths.isSuperset(of: [
                "Services/Parrot/API/Generated/test.pb.swift", "Services/Parrot/ProtoC/ParrotProtoC_registry.c",
            ]))
        #expect(output.layout.services == ["Parrot"])
        #expect(
            output.layout.lines
                == "test.proto ParrotAPI Services/Parrot/API/Generated ParrotProtoC Services/Parrot/ProtoC\n")
        let groups = try #require(output.files.first { $0.path == GeneratedLists.gatewayCommandGroups }).contents
        #expect(groups.contains("import ParrotCLI\n") && groups.contains("ParrotCommands.self,"))
        let files = try #require(output.files.first { $0.path == GeneratedLists.protoFiles }).contents
        #expect(files.contains("import ParrotAPI\n") && files.contains("ParrotV1.testProtoFile,"))
    }

    /// The import of the method options (menagerie/rpc/v1/options.proto), which every file with services needs.
    static let options = "import \"menagerie/rpc/v1/options.proto\";"
    /// The option every rpc needs, as a method body.
    static let isPublic = "{ option (menagerie.rpc.v1.access) = ACCESS_PUBLIC; }"

    /// Runs protoc on one `.proto` source and the generator on the result.
    func generate(_ source: String, other: String? = nil, layout: ModuleLayout = Self.layout) throws
        -> SchemaGenerator.Output
    {
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("schema-gen-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: scratch) }
        try Data(source.utf8).write(to: scratch.appendingPathComponent("test.proto"))
        if let other { try Data(other.utf8).write(to: scratch.appendingPathComponent("other.proto")) }
        try Tool.protoc!.run(
            [
                "-I", scratch.path, "-I", Package.protoDirectory.path, "--descriptor_set_out=\(scratch.path)/set.desc",
                "--include_imports", "--include_source_info", "test.proto",
            ])
        return try SchemaGenerator.generate(
            descriptorSet: [UInt8](Data(contentsOf: scratch.appendingPathComponent("set.desc"))), layout: layout)
    }

    static let rejected: [(source: String, reason: String)] = [
        ("syntax = \"proto2\"; package p.v1; message M { optional int32 a = 1; }", "only proto3"),
        ("syntax = \"proto3\"; message M { int32 a = 1; }", "a package is required"),
        ("syntax = \"proto3\"; package p.v1; message M { oneof choice { int32 a = 1; string b = 2; } }", "oneof"),
        ("syntax = \"proto3\"; package p.v1; message M { map<string, int32> counts = 1; }", "map fields"),
        ("syntax = \"proto3\"; package p.v1; enum E { option allow_alias = true; E_A = 0; E_B = 0; }", "enum aliases"),
        (
            "syntax = \"proto3\"; package p.v1; message M {} service S { rpc Register(M) returns (M); }",
            "register is taken"
        ),
        ("syntax = \"proto3\"; package p.v1; message String {}", "reserved"),
        ("syntax = \"proto3\"; package p.v1; message M {} service S { rpc Name(M) returns (M); }", "name is taken"),
        ("syntax = \"proto3\"; package p.v1; enum E { E_UNRECOGNIZED = 0; }", "reserved"),
    ]

    @Test(.enabled(if: Tool.protoc != nil, "needs protoc to build descriptor sets"), arguments: rejected)
    func unsupportedFeaturesAreRejected(_ source: String, _ reason: String) throws {
        let error = #expect(throws: GeneratorError.self) { try generate(source) }
        #expect(error?.description.contains(reason) == true, "\(error.map(String.init(describing:)) ?? "no error")")
    }

    @Test(.enabled(if: Tool.protoc != nil, "needs protoc to build descriptor sets"))
    func everyCallKindIsDescribed() throws {
        let output = try generate(
            """
            syntax = "proto3";
            package p.v1;
            \(Self.options)
            message M {}
            service S {
              rpc One(M) returns (M) \(Self.isPublic)
              rpc Down(M) returns (stream M) \(Self.isPublic)
              rpc Up(stream M) returns (M) \(Self.isPublic)
              rpc Both(stream M) returns (stream M) \(Self.isPublic)
            }
            """)
        let swift = try #require(output.files.first { $0.path.hasSuffix("test.pb.swift") }).contents
        #expect(swift.contains("path: \"/p.v1.S/One\", serverStreaming: false,"))
        #expect(swift.contains("path: \"/p.v1.S/Down\", serverStreaming: true,"))
        #expect(swift.contains("path: \"/p.v1.S/Up\", clientStreaming: true, serverStreaming: false,"))
        #expect(swift.contains("path: \"/p.v1.S/Both\", clientStreaming: true, serverStreaming: true,"))
    }

    @Test(.enabled(if: Tool.protoc != nil, "needs protoc to build descriptor sets"))
    func protocCInputTurnsOptionalIntoPlainOneofs() throws {
        let output = try generate(
            """
            syntax = "proto3";
            package p.v1;
            message M { optional int32 a = 1; message N { optional string b = 1; } }
            """)
        let files = try decodeFileDescriptorSet(output.protocCDescriptorSet)
        let message = try #require(files.first?.messages.first)
        #expect(message.fields.map(\.isProto3Optional) == [false])
        #expect(message.fields.map(\.oneofIndex) == [0])
        #expect(message.messages.first?.fields.map(\.isProto3Optional) == [false])
        #expect(message.oneofCount == 1)
        let swift = try #require(output.files.first { $0.path.hasSuffix(".pb.swift") })
        #expect(swift.contents.contains("public var a: Int32? = nil"))
        #expect(swift.contents.contains("public var b: String? = nil"))
    }

    /// The four call kinds in a service protocol, its registration and its client. Client and bidirectional
    /// streaming are checked as text here: no committed proto uses them yet, so nothing else compiles them.
    @Test(.enabled(if: Tool.protoc != nil, "needs protoc to build descriptor sets"))
    func serviceAPIHasEveryCallKind() throws {
        let output = try generate(
            """
            syntax = "proto3";
            package m.p.v1;
            \(Self.options)
            message Q {}
            message A {}
            service Kinds {
              // Answers once.
              rpc One(Q) returns (A) \(Self.isPublic)
              rpc Down(Q) returns (stream A) \(Self.isPublic)
              rpc Up(stream Q) returns (A) \(Self.isPublic)
              rpc Both(stream Q) returns (stream A) \(Self.isPublic)
            }
            """)
        let api = try #require(output.files.first { $0.path == "T/API/test.rpc.swift" })
        let text = api.contents
        for expected in [
            "extension PV1.Kinds {",
            "public protocol ServiceProtocol: RPCService {",
            "/// Answers once.",
            "func one(request: PV1.Q, context: ServerContext) async throws -> PV1.A",
            "func down(request: PV1.Q, response: ResponseWriter<PV1.A>, context: ServerContext) async throws",
            "func up(requests: RequestStream<PV1.Q>, context: ServerContext) async throws -> PV1.A",
            "func both(requests: RequestStream<PV1.Q>, response: ResponseWriter<PV1.A>, context: ServerContext) async throws",
            "extension PV1.Kinds.ServiceProtocol {",
            "router.unary(PV1.Kinds.one) { request, context in",
            "try await self.one(request: request, context: context)",
            "router.serverStreaming(PV1.Kinds.down) { request, response, context in",
            "try await self.down(request: request, response: response, context: context)",
            "router.clientStreaming(PV1.Kinds.up) { requests, context in",
            "try await self.up(requests: requests, context: context)",
            "router.bidirectionalStreaming(PV1.Kinds.both) { requests, response, context in",
            "try await self.both(requests: requests, response: response, context: context)",
            "public init(wrapping rpcClient: RPCClient) {",
            "public protocol ClientProtocol: Sendable {",
            "func one(_ request: PV1.Q, options: CallOptions) async throws -> PV1.A\n",
            "public struct Client: ClientProtocol {",
            "public func one(_ request: PV1.Q, options: CallOptions) async throws -> PV1.A {",
            "extension PV1.Kinds.ClientProtocol {",
            "public func one(_ request: PV1.Q) async throws -> PV1.A {",
            "try await one(request, options: CallOptions())",
            "try await rpcClient.unary(PV1.Kinds.one, request, options: options)",
            "public func down(_ request: PV1.Q, options: CallOptions) -> any AsyncSequence<PV1.A, any Error> {",
            "rpcClient.serverStreaming(PV1.Kinds.down, request, options: options)",
            "requests: @escaping @Sendable (RequestWriter<PV1.Q>) async throws -> Void",
            "try await rpcClient.clientStreaming(PV1.Kinds.up, options: options, requests: requests)",
            "responses: @escaping @Sendable (ResponseStream<PV1.A>) async throws -> Result",
            "try await rpcClient.bidirectionalStreaming(PV1.Kinds.both, options: options, requests: requests, responses: responses)",
        ] {
            #expect(text.contains(expected), "missing: \(expected)")
        }
        let swift = try #require(output.files.first { $0.path.hasSuffix("test.pb.swift") })
        #expect(swift.contents.contains("path: \"/m.p.v1.Kinds/Up\", clientStreaming: true, serverStreaming: false"))
        #expect(swift.contents.contains("path: \"/m.p.v1.Kinds/Both\", clientStreaming: true, serverStreaming: true"))
        #expect(swift.contents.contains("path: \"/m.p.v1.Kinds/Down\", serverStreaming: true"))
        // A proto file without services has no service API file.
        let plain = try generate("syntax = \"proto3\"; package p.v1; message M {}")
        #expect(!plain.files.contains { $0.path.hasSuffix(".rpc.swift") })
    }

    /// The method options reach the method descriptors; protoc-c's copy of the set has neither the options file nor
    /// descriptor.proto nor the options (so its C is what it was without them), and keeps the other imports.
    @Test(.enabled(if: Tool.protoc != nil, "needs protoc to build descriptor sets"))
    func methodOptionsAreCarriedAndLeftOutOfProtocCInput() throws {
        let output = try generate(
            """
            syntax = "proto3";
            package p.v1;
            import "other.proto";
            \(Self.options)
            message M {}
            service S {
              rpc Read(M) returns (M) {
                option idempotency_level = NO_SIDE_EFFECTS;
                option (menagerie.rpc.v1.access) = ACCESS_PUBLIC;
                option (menagerie.rpc.v1.max_request_bytes) = 65536;
              }
              rpc Mine(M) returns (M) { option (menagerie.rpc.v1.access) = ACCESS_USER; }
              rpc Import(stream M) returns (M) { option (menagerie.rpc.v1.access) = ACCESS_ADMIN; }
            }
            """, other: "syntax = \"proto3\"; package m.o.v1; message O {}")
        let swift = try #require(output.files.first { $0.path == "T/API/test.pb.swift" }).contents
        #expect(
            swift.contains(
                "path: \"/p.v1.S/Read\", serverStreaming: false, idempotent: true, sideEffectFree: true, access: .public, maxRequestBytes: 65536)"
            ))
        #expect(swift.contains("path: \"/p.v1.S/Mine\", serverStreaming: false, idempotent: false, access: .user)"))
        #expect(
            swift.contains(
                "path: \"/p.v1.S/Import\", clientStreaming: true, serverStreaming: false, idempotent: false, access: .admin)"
            ))
        // Nothing is generated for the options file, and no module is imported for it.
        #expect(!output.files.contains { $0.path.contains("options") })
        #expect(!swift.contains("import RPCWire"))

        let files = try decodeFileDescriptorSet(output.protocCDescriptorSet)
        #expect(Set(files.map(\.name)) == ["test.proto", "other.proto"])
        let test = try #require(files.first { $0.name == "test.proto" })
        #expect(test.dependencies == ["other.proto"])
        #expect(test.services.first?.methods.map(\.access) == [nil, nil, nil])
        #expect(test.services.first?.methods.map(\.maxRequestBytes) == [nil, nil, nil])
        #expect(test.services.first?.methods.first?.idempotencyLevel == 1)
    }

    /// Every rpc says who may call it: one without a level fails the generation (it would otherwise open or close a
    /// method by accident), and so do a level options.proto does not define and an option schema-gen does not know.
    @Test(.enabled(if: Tool.protoc != nil, "needs protoc to build descriptor sets"))
    func anRPCWithoutAnAccessLevelIsRefused() throws {
        let missing = #expect(throws: GeneratorError.self) {
            try generate(
                """
                syntax = "proto3"; package p.v1; \(Self.options) message M {}
                service S { rpc Fine(M) returns (M) \(Self.isPublic) rpc Forgotten(M) returns (M); }
                """)
        }
        #expect(
            missing?.description.contains("p.v1.S.Forgotten: no access level") == true, "\(String(describing: missing))"
        )
        let unspecified = #expect(throws: GeneratorError.self) {
            try generate(
                """
                syntax = "proto3"; package p.v1; \(Self.options) message M {}
                service S { rpc Open(M) returns (M) { option (menagerie.rpc.v1.access) = ACCESS_UNSPECIFIED; } }
                """)
        }
        #expect(
            unspecified?.description.contains("p.v1.S.Open: access level 0") == true,
            "\(String(describing: unspecified))")
        let unknownOption = #expect(throws: GeneratorError.self) {
            try generate(
                """
                syntax = "proto3"; package p.v1; import "google/protobuf/descriptor.proto";
                extend google.protobuf.MethodOptions { string http_path = 50199; }
                """)
        }
        #expect(
            unknownOption?.description.contains("http_path = 50199") == true, "\(String(describing: unknownOption))")
    }

    /// A method's REST routes (`http_get`) reach its descriptor in declaration order; a route that is no path, has a
    /// `{field}` before its last segment, or is bound to two methods fails the generation.
    @Test(.enabled(if: Tool.protoc != nil, "needs protoc to build descriptor sets"))
    func httpGetRoutesAreCarriedAndCheckedLikeOtherOptions() throws {
        let output = try generate(
            """
            syntax = "proto3"; package p.v1; \(Self.options) message M {}
            service S {
              rpc One(M) returns (M) {
                option (menagerie.rpc.v1.access) = ACCESS_PUBLIC;
                option (menagerie.rpc.v1.http_get) = "/api/things/{id}";
                option (menagerie.rpc.v1.http_get) = "/api/things-too/{id}";
              }
              rpc Other(M) returns (M) \(Self.isPublic)
            }
            """)
        let swift = try #require(output.files.first { $0.path == "T/API/test.pb.swift" }).contents
        #expect(swift.contains("access: .public, httpGet: [\"/api/things/{id}\", \"/api/things-too/{id}\"])"))
        #expect(swift.contains("path: \"/p.v1.S/Other\", serverStreaming: false, idempotent: false, access: .public)"))

        for (route, complaint) in [
            ("api/things", "is not a route"), ("/api/{id}/more", "is not a route"), ("/api/a b", "is not a route"),
            ("/api//x", "is not a route"), ("/api/{}", "is not a route"),
        ] {
            let error = #expect(throws: GeneratorError.self) {
                try generate(
                    """
                    syntax = "proto3"; package p.v1; \(Self.options) message M {}
                    service S { rpc One(M) returns (M) {
                      option (menagerie.rpc.v1.access) = ACCESS_PUBLIC; option (menagerie.rpc.v1.http_get) = "\(route)"; } }
                    """)
            }
            #expect(error?.description.contains(complaint) == true, "\(route): \(String(describing: error))")
        }
        let twice = #expect(throws: GeneratorError.self) {
            try generate(
                """
                syntax = "proto3"; package p.v1; \(Self.options) message M {}
                service S {
                  rpc One(M) returns (M) { option (menagerie.rpc.v1.access) = ACCESS_PUBLIC; option (menagerie.rpc.v1.http_get) = "/x"; }
                  rpc Two(M) returns (M) { option (menagerie.rpc.v1.access) = ACCESS_PUBLIC; option (menagerie.rpc.v1.http_get) = "/x"; }
                }
                """)
        }
        #expect(
            twice?.description.contains("p.v1.S.Two: http_get \"/x\" is bound to another method too") == true,
            "\(String(describing: twice))")
    }
}
