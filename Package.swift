// swift-tools-version:6.0
// Menagerie: Swift microservices speaking length-prefixed protobuf over libuv TCP.
import PackageDescription

let argumentParser = Target.Dependency.product(name: "ArgumentParser", package: "swift-argument-parser")

/// The targets of one service `<Name>` (see ARCHITECTURE.md, "Adding a service"), each in `<root>/<Name>/<Part>` (`root` is
/// `Services`; a test-only service's is `Tests/Services`, so that nothing outside the tests builds it):
/// - `<Name>ProtoC` (`ProtoC`) and `<Name>API` (`API`): its proto package's protobuf-c code and generated Swift
///   (messages, service protocol, client protocol, typed client), placed there by Proto/generate.sh, which finds
///   the folder by the proto's package (`menagerie.<name>.v1`, the folder `<Name>` in any case); `imports` are the API modules of the protos its proto imports (`"Jobs"` for JobsAPI);
/// - `<Name>Core` (`Core`): the domain and its persistence; never RPC or the API module;
/// - `<Name>Service` (`Service`): handlers conforming to the generated `ServiceProtocol`;
/// - the executable `executable` (`App`) and `<Name>CLI` (`CLI`, the `gateway <name>` command group);
/// - the test targets `<Name>CoreTests` and `<Name>ServiceTests` in `Tests/`.
/// Each list adds the dependencies beyond what every service's part has. Its line in `services` below is all the
/// package needs: its product, the gateway's `<Name>CLI` and SchemaTests' `<Name>API` come from that list.
func service(
    _ name: String, executable: String, root: String = "Services", imports: [String] = [],
    core: [Target.Dependency] = [], service: [Target.Dependency] = [], app: [Target.Dependency] = [],
    cli: [Target.Dependency] = [], coreTests: [Target.Dependency] = [], serviceTests: [Target.Dependency] = [],
    appResources: [Resource]? = nil, coreResources: [Resource]? = nil, serviceResources: [Resource]? = nil
) -> Service {
    let folder = "\(root)/\(name)"
    let api = Target.Dependency(stringLiteral: "\(name)API")
    let importedAPIs = imports.map { Target.Dependency(stringLiteral: "\($0)API") }
    let jobs: [Target.Dependency] = imports.contains("Jobs") ? ["Jobs", "JobsService"] : []
    let targets: [Target] = [
        .target(
            name: "\(name)ProtoC", dependencies: ["CProtobufC"] + imports.map { .init(stringLiteral: "\($0)ProtoC") },
            path: "\(folder)/ProtoC"),
        .target(
            name: "\(name)API", dependencies: ["Schema", "RPC", .init(stringLiteral: "\(name)ProtoC")] + importedAPIs,
            path: "\(folder)/API"),
        .target(
            name: "\(name)Core", dependencies: ["Base", "Storage", "TLS"] + core, path: "\(folder)/Core",
            resources: coreResources),
        .target(
            name: "\(name)Service",
            dependencies: [.init(stringLiteral: "\(name)Core"), api, "RPC", "Schema"] + importedAPIs + jobs + service,
            path: "\(folder)/Service", resources: serviceResources),
        .executableTarget(
            name: executable,
            dependencies: [
                .init(stringLiteral: "\(name)Core"), .init(stringLiteral: "\(name)Service"), "ServiceKit", "Base",
                argumentParser,
            ]
                + ["Identity", "RPC"] + jobs + app,
            path: "\(folder)/App", resources: appResources),
        .target(
            name: "\(name)CLI",
            dependencies: ["GatewayKit", "RPC", "Schema", api, argumentParser] + importedAPIs + cli,
            path: "\(folder)/CLI"),
        .testTarget(
            name: "\(name)CoreTests",
            dependencies: [
                .init(stringLiteral: "\(name)Core"), "Storage", "StorageTestSupport", "Base", "TLS", "TestSupport",
            ] + coreTests,
            path: "Tests/\(name)CoreTests"),
        .testTarget(
            name: "\(name)ServiceTests",
            dependencies: [
                .init(stringLiteral: "\(name)Core"), .init(stringLiteral: "\(name)Service"), api, "RPC", "Schema",
                "RPCTesting", "TestSupport", "StorageTestSupport",
            ]
                + importedAPIs + jobs + serviceTests,
            path: "Tests/\(name)ServiceTests"),
    ]
    return Service(name: name, executable: root == "Services" ? executable : nil, targets: targets)
}

/// One service's name and targets, as `service(...)` declares them.
struct Service {
    let name: String
    /// Its executable, a product of the package; nil for a test-only service (whose root is not `Services`).
    let executable: String?
    let targets: [Target]
}

/// Every service, the test-only guestbook included: one `service(...)` each. Each production service's executable is
/// a product; the gateway links each one's `<Name>CLI` (their command groups are the list Proto/generate.sh writes
/// from the same folders), SchemaTests and IntegrationTests each one's `<Name>API`.
let services: [Service] = [
    // The zoo's sample data ships as a resource bundle (Menagerie_ZooCore.resources), which SwiftPM puts beside the
    // executables.
    // Its web page (Service/Web) is a resource of ZooService (Menagerie_ZooService.resources), served at `/`.
    service(
        "Zoo", executable: "zoo", imports: ["Jobs"], service: ["HTTP"], coreTests: ["Dqlite"],
        serviceTests: ["WorkLane", "RPCWire", "HTTP", "Storage", "Transport"],
        coreResources: [.copy("SampleData")], serviceResources: [.copy("Web")]),
    service(
        "OCR", executable: "ocr", imports: ["Jobs"],
        core: ["TextRecognition", "WorkLane", "PPOCR", "OpenCVDNN", "OCRPolicy"],
        service: ["TextRecognition", "WorkLane", "Allocator"],
        app: ["TextRecognition", "PPOCR", "SevenSegment"], cli: ["OCRPolicy"],
        coreTests: ["TextRecognition", "OCRTestSupport", "PPOCR", "SevenSegment"],
        serviceTests: ["WorkLane", "Storage", "TextRecognition", "Transport", "OCRTestSupport"]),
    service(
        "Health", executable: "health", core: ["Zip"], service: ["WorkLane", "HealthBridge", "Identity"],
        cli: ["HealthCore", "HealthBridge"],
        coreTests: ["Dqlite"], serviceTests: ["HealthBridge", "Identity"]),
    service(
        "Classification", executable: "classification", imports: ["Jobs"],
        core: ["Torch", "OpenCVDNN", "CImageCodecs", "BlobStore"], service: ["Torch", "WorkLane", "Zip"],
        app: ["Torch", "Storage", "BlobStore", "BlobsService", "Transport"],
        cli: ["CZlib"], coreTests: ["Torch", "OpenCVDNN", "BlobStore", "ClassificationTestSupport"],
        serviceTests: ["Torch", "WorkLane", "ClassificationCLI", "BlobStore"]),
    // A test-only service added by ARCHITECTURE.md's "Adding a service" path, so the suite keeps that path checked:
    // GuestbookServiceTests runs its executable, GuestbookStackTests runs it through compose, the gateway (whose
    // `guestbook` group only a services file listing it shows), HTTP and a dqlite cluster.
    service(
        "Guestbook", executable: "guestbook", root: "Tests/Services", imports: ["Jobs"],
        serviceTests: ["GuestbookCLI", "RPCWire", "Transport", argumentParser]),
]
/// Every service's generated API module (ZooAPI…), for the test targets that read every proto's messages.
let serviceAPIs = services.map { Target.Dependency(stringLiteral: "\($0.name)API") }

let package = Package(
    name: "Menagerie",
    platforms: [.macOS(.v15)],
    products: services.compactMap(\.executable).map { .executable(name: $0, targets: [$0]) } + [
        .executable(name: "gateway", targets: ["gateway"]),
        .executable(name: "menagerie-compose", targets: ["menagerie-compose"]),
        .executable(name: "menagerie-bench", targets: ["menagerie-bench"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0")
    ],
    targets: [
        // MARK: System libraries (wrapped once, in Shared/)
        .systemLibrary(
            name: "CLibUV", path: "Shared/CLibUV", pkgConfig: "libuv",
            providers: [.apt(["libuv1-dev"])]),
        .systemLibrary(
            name: "CProtobufC", path: "Shared/CProtobufC", pkgConfig: "libprotobuf-c",
            providers: [.apt(["libprotobuf-c-dev"])]),
        .systemLibrary(
            name: "CSQLite", path: "Shared/CSQLite", pkgConfig: "sqlite3",
            providers: [.apt(["libsqlite3-dev"])]),
        // zlib: HTTP's gzip bodies and the health import's reader of the Health app's export.zip.
        .systemLibrary(
            name: "CZlib", path: "Shared/CZlib", pkgConfig: "zlib",
            providers: [.apt(["zlib1g-dev"])]),
        // glibc's malloc.h (part of libc): the allocator tuning a service applies at start (ServiceKit).
        .systemLibrary(name: "CMalloc", path: "Shared/CMalloc"),
        // glibc's allocator asked to give memory back (its mmap threshold; free pages after large work).
        .target(name: "Allocator", dependencies: ["CMalloc"], path: "Shared/Allocator"),
        // OpenSSL 3: TLS under the transport (the TLS module wraps it).
        .systemLibrary(
            name: "CTLS", path: "Shared/CTLS", pkgConfig: "openssl",
            providers: [.apt(["libssl-dev"])]),
        // dqlite: SQLite replicated by Raft (the Dqlite module wraps the node and speaks its wire protocol).
        .systemLibrary(
            name: "CDqlite", path: "Shared/CDqlite", pkgConfig: "dqlite",
            providers: [.apt(["libdqlite-dev", "libraft-dev"])]),
        .systemLibrary(
            name: "CTesseract", path: "Shared/CTesseract", pkgConfig: "tesseract",
            providers: [.apt(["libtesseract-dev", "libleptonica-dev"])]),

        // MARK: libtorch behind a C API (only the classification service and its tests link it: a process that
        // links libtorch starts ~0.9 s slower, so the gateway and the other services must never depend on these)
        .target(
            name: "TorchShim", path: "Shared/TorchShim",
            cxxSettings: [
                .unsafeFlags(["-I/usr/include/torch/csrc/api/include", "-Wno-deprecated-declarations"])
            ],
            linkerSettings: [
                .linkedLibrary("torch"), .linkedLibrary("torch_cpu"), .linkedLibrary("c10"),
            ]),
        .target(name: "Torch", dependencies: ["TorchShim"], path: "Shared/Torch"),
        // OpenCV's DNN module behind a C API, for ONNX models trained elsewhere (libtorch's package pulls OpenCV in).
        .target(
            name: "OpenCVShim", path: "Shared/OpenCVShim",
            cxxSettings: [.unsafeFlags(["-I/usr/include/opencv4"])],
            linkerSettings: [
                .linkedLibrary("opencv_dnn"), .linkedLibrary("opencv_imgproc"), .linkedLibrary("opencv_core"),
            ]),
        .target(name: "OpenCVDNN", dependencies: ["OpenCVShim"], path: "Shared/OpenCVDNN"),
        // PaddleOCR's PP-OCR detection and recognition networks through OpenCVDNN: the OCR service's second engine.
        .target(name: "PPOCR", dependencies: ["Base", "OpenCVDNN", "TLS", "SevenSegment"], path: "Shared/PPOCR"),
        // Segment displays' digits: the cutter (shared with the trainer) and the glyph network through OpenCVDNN.
        .target(name: "SevenSegment", dependencies: ["Base", "OpenCVDNN", "TLS"], path: "Shared/SevenSegment"),
        // Trains the seven-segment glyph network with the classification service's own trainer and exports it as
        // ONNX, at install time (compose/compose sevenseg): libtorch stays out of the OCR service.
        .executableTarget(
            name: "sevenseg-train", dependencies: ["ClassificationCore", "SevenSegment", "Base", "TLS", "Torch"],
            path: "Services/Classification/tools/SevenSegmentTrainer"),
        // PNG, JPEG, WebP and HEIF decoding (libpng's simplified API, libjpeg-turbo, libwebp, libheif) behind a tiny C API.
        .target(
            name: "CImageCodecs", path: "Shared/CImageCodecs",
            linkerSettings: [
                .linkedLibrary("png16"), .linkedLibrary("jpeg"), .linkedLibrary("webp"), .linkedLibrary("heif"),
            ]),

        // MARK: Schema: the protobuf-c bridge every generated message uses (no messages of its own), and its generator
        .target(name: "Schema", dependencies: ["CProtobufC"], path: "Shared/Schema"),
        .target(name: "SchemaGenerator", path: "Proto/Generator/Library"),
        .executableTarget(name: "schema-gen", dependencies: ["SchemaGenerator"], path: "Proto/Generator/App"),

        // MARK: Runtime layers (no domain: none of these depends on a service's API module)
        .target(name: "WorkLane", dependencies: ["Base"], path: "Shared/WorkLane"),
        .target(name: "Storage", dependencies: ["Base", "CSQLite", "WorkLane", "Dqlite"], path: "Shared/Storage"),
        // A dqlite node in this process and a client of dqlite's wire protocol (no C client exists).
        .target(name: "Dqlite", dependencies: ["Base", "CDqlite", "TLS"], path: "Shared/Dqlite"),
        // Logging, the error categories, the version string, a heap, the upward search for the source tree: no dependencies.
        .target(name: "Base", path: "Shared/Base"),
        // rpc.proto: the envelope and the built-in services' messages (its service protocols are generated into RPC).
        .target(name: "RPCWireProtoC", dependencies: ["CProtobufC"], path: "Shared/RPCWireProtoC"),
        .target(name: "RPCWire", dependencies: ["Schema", "RPCWireProtoC"], path: "Shared/RPCWire"),
        .target(name: "RPC", dependencies: ["Base", "Schema", "RPCWire"], path: "Shared/RPC"),
        // HTTP/1.1 requests and responses, strictly parsed, and gzip: no RPC (Transport serves Connect over it).
        .target(name: "HTTP", dependencies: ["CZlib"], path: "Shared/HTTP"),
        // Zip archives read from their central directory, sizes checked before anything is inflated.
        .target(name: "Zip", dependencies: ["Base", "CZlib"], path: "Shared/Zip"),
        // TLS 1.3 sessions driven through memory buffers (OpenSSL behind a Swift API): no RPC, no sockets.
        .target(name: "TLS", dependencies: ["Base", "CTLS"], path: "Shared/TLS"),
        // Transport, by layer (ARCHITECTURE.md, "Transport"): libuv loops and TCP (the only module that links libuv); TLS
        // streams over them; the seam a protocol hands the server its calls through; the server core (call table, flow
        // control, workers), which knows no protocol; the protocols (our binary framing and its client; HTTP/1.1 and
        // Connect), which know no server internals; and the composition every service imports.
        .target(name: "TCP", dependencies: ["Base", "RPC", "CLibUV"], path: "Shared/TCP"),
        .target(name: "TLSStreams", dependencies: ["Base", "TCP", "TLS"], path: "Shared/TLSStreams"),
        .target(name: "ServerSeam", dependencies: ["RPC", "TCP"], path: "Shared/ServerSeam"),
        .target(
            name: "ServerCore", dependencies: ["Base", "RPC", "RPCWire", "TCP", "ServerSeam"], path: "Shared/ServerCore"
        ),
        .target(
            name: "Framing",
            dependencies: ["Base", "RPC", "RPCWire", "Schema", "TCP", "TLS", "TLSStreams", "ServerSeam"],
            path: "Shared/Framing"),
        .target(
            name: "Connect", dependencies: ["Base", "RPC", "Schema", "HTTP", "TCP", "ServerSeam"],
            path: "Shared/Connect"),
        .target(
            name: "Transport",
            dependencies: [
                "Base", "RPC", "RPCWire", "Schema", "HTTP", "TLS", "TCP", "TLSStreams", "ServerSeam", "ServerCore",
                "Framing", "Connect",
            ],
            path: "Shared/Transport"),
        // Jobs: the domain and persistence (no RPC), jobs.proto's API, and the Jobs rpcs every service with long work offers.
        .target(name: "Jobs", dependencies: ["Base", "Storage", "WorkLane"], path: "Shared/Jobs"),
        .target(name: "JobsProtoC", dependencies: ["CProtobufC"], path: "Shared/JobsProtoC"),
        .target(name: "JobsAPI", dependencies: ["Schema", "RPC", "JobsProtoC"], path: "Shared/JobsAPI"),
        .target(
            name: "JobsService", dependencies: ["Base", "Jobs", "Storage", "WorkLane", "RPC", "Schema", "JobsAPI"],
            path: "Shared/JobsService"),
        // Blobs: large payloads by content hash on each node's disk (BlobStore: no RPC), blobs.proto's API, and the
        // rpcs the replicas of a service serve each other with the store that replicates through them (BlobsService).
        .target(name: "BlobStore", dependencies: ["Base", "TLS"], path: "Shared/BlobStore"),
        .target(name: "BlobsProtoC", dependencies: ["CProtobufC"], path: "Shared/BlobsProtoC"),
        .target(name: "BlobsAPI", dependencies: ["Schema", "RPC", "BlobsProtoC"], path: "Shared/BlobsAPI"),
        .target(
            name: "BlobsService",
            dependencies: ["Base", "BlobStore", "BlobsAPI", "RPC", "Schema", "Transport", "WorkLane"],
            path: "Shared/BlobsService"),
        // Identity: the stack's users and tokens (a shared SQLite file), the token check and the server's guard.
        .target(name: "Identity", dependencies: ["Base", "RPC", "Schema", "Storage", "TLS"], path: "Shared/Identity"),
        .target(
            name: "ServiceKit",
            dependencies: [
                "Base", "RPC", "Transport", "Storage", "WorkLane", "HTTP", "Jobs", "Identity", "Dqlite", "Allocator",
                argumentParser,
            ],
            path: "Shared/ServiceKit"),

        // MARK: Domain libraries
        .target(
            name: "TextRecognition", dependencies: ["CTesseract", "CImageCodecs", "WorkLane"],
            path: "Shared/TextRecognition"),

        // MARK: Gateway: GatewayKit is what every service's command group shares; App assembles the groups.
        .target(
            name: "GatewayKit",
            dependencies: ["Base", "RPC", "RPCWire", "Transport", "Schema", "JobsAPI", argumentParser],
            path: "Services/Gateway/Kit"),
        .executableTarget(
            name: "gateway",
            // Every service's command group (the test-only guestbook's shown only when compose's services file lists it).
            dependencies: services.map { .init(stringLiteral: "\($0.name)CLI") } + [
                "GatewayKit", "RPC", "RPCWire", "Transport", "Schema",
                // Dqlite and Storage for `gateway cluster` (import, backup, restore, membership).
                "Identity", "Base", "Dqlite", "Storage", argumentParser,
            ],
            path: "Services/Gateway/App"),
        // compose's logic once the build is done (compose/compose hands over to it): the services file read by
        // GatewayKit's ServiceList, its one parser.
        .executableTarget(
            name: "menagerie-compose", dependencies: ["ComposeKit", "GatewayKit", "Base"],
            path: "Services/Gateway/Compose"),
        // What menagerie-compose decides without running anything (the services file as read, its arguments, ports and
        // placement, the deploy files it renders), apart so that ComposeKitTests test it in process.
        .target(name: "ComposeKit", dependencies: ["GatewayKit"], path: "Services/Gateway/ComposeKit"),

        // MARK: Benchmarks
        .executableTarget(
            name: "menagerie-bench",
            dependencies: [
                "RPC", "RPCWire", "Transport", "HTTP", "Schema", "ZooCore", "ZooService", "ZooAPI", "RPCTesting",
                "OCRCore",
                "OCRService", "OCRAPI", "OCRTestSupport", "TextRecognition", "PPOCR", "SevenSegment", "WorkLane",
                "HealthCore", "HealthService", "HealthAPI", "HealthBridge",
                // The classification suite trains and serves in process, so this executable links libtorch.
                "ClassificationCore", "ClassificationService", "ClassificationAPI", "ClassificationTestSupport", "Jobs",
                "JobsAPI", "ServiceKit", "Torch", "Identity", "Storage",
            ],
            path: "Tests/Benchmarks", exclude: ["peers"]),
        // Fixed counts of unary echo calls, server and client in separate processes, for callgrind and strace.
        .executableTarget(
            name: "rpc-profile", dependencies: ["RPC", "RPCWire", "Transport", "RPCTesting"], path: "Tests/RPCProfile",
            exclude: ["profile.sh"]),

        // MARK: Tests
        // Test-only protos (Proto/modules.conf places them here): schema fixtures, and the test jobs service's API.
        .target(name: "FixturesProtoC", dependencies: ["CProtobufC", "RPCWireProtoC"], path: "Tests/FixturesProtoC"),
        .target(
            name: "FixturesAPI", dependencies: ["Schema", "RPC", "RPCWire", "FixturesProtoC"], path: "Tests/FixturesAPI"
        ),
        .target(
            name: "JobsTestingProtoC", dependencies: ["CProtobufC", "JobsProtoC"], path: "Tests/JobsTestingProtoC"),
        .target(
            name: "JobsTestingAPI", dependencies: ["Schema", "RPC", "JobsAPI", "JobsTestingProtoC"],
            path: "Tests/JobsTestingAPI"),
        // A service running test jobs, for the tests that kill a replica (built by `swift build --build-tests`).
        .executableTarget(
            name: "jobs-test-service",
            dependencies: [
                "Base", "ServiceKit", "Jobs", "JobsService", "JobsAPI", "JobsTestingAPI", "Storage", "Schema", "RPC",
                "WorkLane",
                argumentParser,
            ],
            path: "Tests/JobsTestService"),
        .testTarget(name: "WorkLaneTests", dependencies: ["WorkLane", "TestSupport"], path: "Tests/WorkLaneTests"),
        .testTarget(
            name: "JobsTests",
            dependencies: [
                "Base", "Jobs", "JobsService", "JobsAPI", "JobsTestingAPI", "Storage", "WorkLane", "RPC", "RPCWire",
                "Schema",
                "Transport", "TestSupport",
            ],
            path: "Tests/JobsTests"),
        .testTarget(
            name: "SchemaTests",
            dependencies: serviceAPIs + [
                "Schema", "RPCWire", "JobsAPI", "BlobsAPI", "FixturesAPI", "JobsTestingAPI", "SchemaGenerator",
                "TestSupport",
            ],
            path: "Tests/SchemaTests", exclude: ["protojson_samples.py"]),
        // The zoo's visitor page in headless Chromium (drive_page.py), against the zoo executable.
        .testTarget(
            name: "WebPageTests", dependencies: ["TestSupport"], path: "Tests/WebPageTests", exclude: ["drive_page.py"]),
        .testTarget(
            name: "StorageTests",
            dependencies: ["Storage", "StorageTestSupport", "WorkLane", "TestSupport", "Dqlite", "Base"],
            path: "Tests/StorageTests"),
        // The tests' choice of storage backend (MENAGERIE_STORAGE_BACKEND) and the one-node dqlite cluster behind it.
        .target(
            name: "StorageTestSupport", dependencies: ["Storage", "Dqlite", "TestSupport"],
            path: "Tests/StorageTestSupport"),
        .testTarget(
            name: "BlobStoreTests",
            dependencies: [
                "BlobStore", "TLS", "BlobsAPI", "BlobsService", "Base", "RPC", "Transport", "WorkLane", "Identity",
                "TestSupport",
            ],
            path: "Tests/BlobStoreTests"),
        .testTarget(name: "DqliteTests", dependencies: ["Dqlite", "Base", "TestSupport"], path: "Tests/DqliteTests"),
        .target(name: "TestSupport", path: "Tests/TestSupport"),
        // Test-only and benchmark-only parts of the RPC stack (Echo, the in-process transport, the
        // raw echo floor), kept out of the production modules.
        .target(name: "RPCTesting", dependencies: ["RPC", "RPCWire", "Transport", "Schema"], path: "Tests/RPCTesting"),
        // What the RPC and transport tests share: a harness over both transports, faulty services.
        .target(
            name: "RPCTestSupport",
            dependencies: ["RPC", "RPCWire", "Transport", "Schema", "RPCTesting", "TestSupport"],
            path: "Tests/RPCTestSupport"),
        .testTarget(
            name: "RPCTests",
            dependencies: [
                "RPC", "RPCWire", "Transport", "Schema", "TestSupport", "RPCTesting", "RPCTestSupport", "Base",
                "Storage", "WorkLane",
            ],
            path: "Tests/RPCTests"),
        .testTarget(
            name: "TransportTests",
            dependencies: [
                "RPC", "RPCWire", "Transport", "TCP", "TLSStreams", "ServerSeam", "ServerCore", "Framing", "Connect",
                "Schema", "TestSupport",
                "RPCTesting", "RPCTestSupport", "HTTP", "TLS",
            ],
            path: "Tests/TransportTests"),
        .testTarget(
            name: "ServiceKitTests",
            dependencies: [
                "Base", "ServiceKit", "RPC", "RPCWire", "Schema", "Storage", "WorkLane", "Transport", "TestSupport",
                "RPCTesting",
            ],
            path: "Tests/ServiceKitTests"),
        .testTarget(
            name: "GatewayKitTests",
            dependencies: [
                "GatewayKit", "TestSupport", "RPC", "RPCWire", "JobsAPI", "OCRAPI", "ZooAPI", "Transport", "Schema",
            ],
            path: "Tests/GatewayKitTests"),
        .testTarget(
            name: "ComposeKitTests", dependencies: ["ComposeKit", "GatewayKit"], path: "Tests/ComposeKitTests"),
        .testTarget(name: "BaseTests", dependencies: ["Base"], path: "Tests/BaseTests"),
        .testTarget(
            name: "IdentityTests",
            dependencies: ["Identity", "RPC", "Schema", "Storage", "StorageTestSupport", "Base", "TestSupport"],
            path: "Tests/IdentityTests"),
        .testTarget(name: "HTTPTests", dependencies: ["HTTP"], path: "Tests/HTTPTests"),
        .testTarget(name: "TLSTests", dependencies: ["Base", "TLS", "TestSupport"], path: "Tests/TLSTests"),
        // The module graph's promises (no domain under the runtime, no other domain in a service), read from this file.
        .testTarget(name: "ArchitectureTests", path: "Tests/ArchitectureTests"),
        .testTarget(
            name: "PPOCRTests", dependencies: ["PPOCR", "OpenCVDNN", "TextRecognition", "SevenSegment", "OCRPolicy"],
            path: "Tests/PPOCRTests"),
        .testTarget(
            name: "TextRecognitionTests", dependencies: ["TextRecognition", "WorkLane", "OCRTestSupport"],
            path: "Tests/TextRecognitionTests"),
        // What the OCR tests and the benchmark share: the shared pages, CER, the tesseract program, rendered pages.
        .target(name: "OCRTestSupport", dependencies: ["TextRecognition"], path: "Tests/OCRTestSupport"),
        .target(
            name: "ClassificationTestSupport", dependencies: ["ClassificationCore"],
            path: "Tests/ClassificationTestSupport"),
        .testTarget(
            name: "IntegrationTests",
            // Torch compiles the TorchScript modules the classification tests import (the test bundle links it anyway).
            // The API modules read the gateway's --json output back as the responses' JSON mapping.
            // (GuestbookAPI also because docs/build-docs documents it, as ServiceKit and JobsService: built so that
            // DocsTests finds them in the bin directory.)
            dependencies: serviceAPIs + [
                "RPC", "Transport", "Schema", "ZooCore", "GatewayKit", "TestSupport", "OCRTestSupport",
                "TextRecognition", "Torch", "RPCWire", "Dqlite", "Storage", "ServiceKit", "JobsService",
            ],
            path: "Tests/IntegrationTests"),
    ]
        // MARK: Services (each one's targets from `services` above, and the libraries only some share)
        + services.flatMap(\.targets)
        // The record thresholds the service applies and the gateway's help states (no engine linked into the gateway).
        + [.target(name: "OCRPolicy", path: "Services/OCR/Policy")]
        // Domain ⇄ proto conversions and the device sync's adapter over the typed client: shared by the handlers and
        // the gateway, so `gateway health sync` links no server code.
        + [
            .target(
                name: "HealthBridge", dependencies: ["HealthCore", "HealthAPI", "RPC", "Schema"],
                path: "Services/Health/Bridge")
        ],
    cxxLanguageStandard: .cxx17
)
