// swift-tools-version:6.0
// Menagerie: Swift microservices speaking length-prefixed protobuf over libuv TCP.
import PackageDescription

let package = Package(
    name: "Menagerie",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "zoo", targets: ["zoo"]),
        .executable(name: "ocr", targets: ["ocr"]),
        .executable(name: "health", targets: ["health"]),
        .executable(name: "classification", targets: ["classification"]),
        .executable(name: "gateway", targets: ["gateway"]),
        .executable(name: "menagerie-bench", targets: ["menagerie-bench"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
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
        .systemLibrary(
            name: "CTesseract", path: "Shared/CTesseract", pkgConfig: "tesseract",
            providers: [.apt(["libtesseract-dev", "libleptonica-dev"])]),

        // MARK: libtorch behind a C API (only the classification service and its tests link it: a process that
        // links libtorch starts ~0.9 s slower, so the gateway and the other services must never depend on these)
        .target(
            name: "TorchShim", path: "Shared/TorchShim",
            cxxSettings: [
                .unsafeFlags(["-I/usr/include/torch/csrc/api/include", "-Wno-deprecated-declarations"]),
            ],
            linkerSettings: [
                .linkedLibrary("torch"), .linkedLibrary("torch_cpu"), .linkedLibrary("c10"),
            ]),
        .target(name: "Torch", dependencies: ["TorchShim"], path: "Shared/Torch"),
        // OpenCV's DNN module behind a C API, for ONNX models trained elsewhere (libtorch's package pulls OpenCV in).
        .target(
            name: "OpenCVShim", path: "Shared/OpenCVShim",
            cxxSettings: [.unsafeFlags(["-I/usr/include/opencv4"])],
            linkerSettings: [.linkedLibrary("opencv_dnn"), .linkedLibrary("opencv_core")]),
        .target(name: "OpenCVDNN", dependencies: ["OpenCVShim"], path: "Shared/OpenCVDNN"),
        // PNG and JPEG decoding (libpng's simplified API, libjpeg-turbo) behind a tiny C API.
        .target(
            name: "CImageCodecs", path: "Shared/CImageCodecs",
            linkerSettings: [.linkedLibrary("png16"), .linkedLibrary("jpeg")]),

        // MARK: Schema: protobuf-c output generated from Proto/, bridged to Swift values
        .target(name: "MenagerieProtoC", dependencies: ["CProtobufC"], path: "Shared/MenagerieProtoC"),
        .target(name: "Schema", dependencies: ["MenagerieProtoC", "CProtobufC"], path: "Shared/Schema"),
        .target(name: "SchemaGenerator", path: "Proto/Generator/Library"),
        .executableTarget(name: "schema-gen", dependencies: ["SchemaGenerator"], path: "Proto/Generator/App"),

        // MARK: Runtime layers
        .target(name: "WorkLane", path: "Shared/WorkLane"),
        .target(name: "Storage", dependencies: ["CSQLite", "WorkLane"], path: "Shared/Storage"),
        // Logging, the version string, a heap, the upward search for the source tree: no dependencies.
        .target(name: "Base", path: "Shared/Base"),
        .target(name: "RPC", dependencies: ["Base", "Schema"], path: "Shared/RPC"),
        // Generated from Proto/ by schema-gen: a service protocol and a typed client per proto service.
        .target(name: "ServiceAPI", dependencies: ["RPC", "Schema"], path: "Shared/ServiceAPI"),
        .target(name: "Transport", dependencies: ["Base", "RPC", "Schema", "CLibUV"], path: "Shared/Transport"),
        // Jobs: the domain and persistence (no RPC), and the Jobs rpcs every service offers.
        .target(name: "Jobs", dependencies: ["Storage", "WorkLane"], path: "Shared/Jobs"),
        .target(name: "JobsService", dependencies: ["Jobs", "RPC", "Schema", "ServiceAPI", "ServiceKit"], path: "Shared/JobsService"),
        .target(
            name: "ServiceKit",
            dependencies: [
                "Base", "RPC", "Transport", "Storage", "WorkLane",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "Shared/ServiceKit"),

        // MARK: Domain libraries
        .target(name: "TextRecognition", dependencies: ["CTesseract", "WorkLane"], path: "Shared/TextRecognition"),

        // MARK: Services
        // Each service <Name>: Core (domain and persistence; never RPC or Schema), Service (handlers, validation,
        // proto conversions; conforms to the generated ServiceProtocol), App (the executable), CLI (`gateway <name>`).
        .target(name: "ZooCore", dependencies: ["Base", "Storage"], path: "Services/Zoo/Core"),
        .target(
            name: "ZooService", dependencies: ["ZooCore", "RPC", "Schema", "ServiceAPI", "Jobs", "JobsService"],
            path: "Services/Zoo/Service"),
        .executableTarget(
            name: "zoo", dependencies: ["ZooCore", "ZooService", "ServiceKit", "Base", "Jobs", "JobsService"], path: "Services/Zoo/App"),
        .target(name: "OCRCore", dependencies: ["Base", "Storage", "TextRecognition", "WorkLane"], path: "Services/OCR/Core"),
        .target(
            name: "OCRService",
            dependencies: ["OCRCore", "TextRecognition", "RPC", "Schema", "ServiceAPI", "Jobs", "JobsService", "WorkLane"],
            path: "Services/OCR/Service"),
        .executableTarget(
            name: "ocr", dependencies: ["OCRCore", "OCRService", "TextRecognition", "ServiceKit", "Jobs", "JobsService"],
            path: "Services/OCR/App"),
        .target(name: "HealthCore", dependencies: ["Base", "Storage"], path: "Services/Health/Core"),
        .target(
            name: "HealthService", dependencies: ["HealthCore", "RPC", "Schema", "ServiceAPI", "WorkLane"], path: "Services/Health/Service"),
        .executableTarget(
            name: "health", dependencies: ["HealthCore", "HealthService", "ServiceKit", "Base"], path: "Services/Health/App"),
        .target(
            name: "ClassificationCore", dependencies: ["Base", "Storage", "Torch", "OpenCVDNN", "CImageCodecs"],
            path: "Services/Classification/Core"),
        .target(
            name: "ClassificationService",
            dependencies: ["ClassificationCore", "Torch", "RPC", "Schema", "ServiceAPI", "ServiceKit", "Jobs", "JobsService"],
            path: "Services/Classification/Service"),
        .executableTarget(
            name: "classification",
            dependencies: ["ClassificationCore", "ClassificationService", "ServiceKit", "Jobs", "JobsService", "Torch", "Storage"],
            path: "Services/Classification/App"),
        .target(
            name: "ClassificationCLI",
            dependencies: [
                .product(name: "ArgumentParser", package: "swift-argument-parser"), "GatewayKit", "RPC", "Schema", "ServiceAPI",
            ],
            path: "Services/Classification/CLI"),
        .target(
            name: "HealthCLI",
            dependencies: [
                "HealthCore", "HealthService", "GatewayKit", "RPC", "Schema", "ServiceAPI",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "Services/Health/CLI"),
        .target(
            name: "ZooCLI",
            dependencies: [
                "GatewayKit", "RPC", "Schema", "ServiceAPI", .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "Services/Zoo/CLI"),
        .target(
            name: "OCRCLI",
            dependencies: [
                "GatewayKit", "RPC", "Schema", "ServiceAPI", .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "Services/OCR/CLI"),

        // MARK: Gateway: GatewayKit is what every service's command group shares; App assembles the groups.
        .target(
            name: "GatewayKit",
            dependencies: [
                "Base", "RPC", "Transport", "Schema", "ServiceAPI",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "Services/Gateway/Kit"),
        .executableTarget(
            name: "gateway",
            dependencies: [
                "GatewayKit", "ZooCLI", "OCRCLI", "HealthCLI", "ClassificationCLI", "RPC", "Transport", "Schema", "ServiceAPI",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "Services/Gateway/App"),

        // MARK: Benchmarks
        .executableTarget(
            name: "menagerie-bench",
            dependencies: [
                "RPC", "Transport", "Schema", "CLibUV", "ZooCore", "ZooService", "RPCTesting", "OCRCore", "OCRService", "OCRTestSupport",
                "TextRecognition", "WorkLane", "ServiceAPI", "HealthCore", "HealthService",
                // The classification suite trains and serves in process, so this executable links libtorch.
                "ClassificationCore", "ClassificationService", "Jobs", "ServiceKit", "Torch",
            ],
            path: "Tests/Benchmarks"),

        // MARK: Tests
        // A service running test jobs, for the tests that kill a replica (built by `swift build --build-tests`).
        .executableTarget(
            name: "jobs-test-service", dependencies: ["ServiceKit", "Jobs", "JobsService", "Storage", "Schema", "RPC"],
            path: "Tests/JobsTestService"),
        .testTarget(name: "WorkLaneTests", dependencies: ["WorkLane", "TestSupport"], path: "Tests/WorkLaneTests"),
        .testTarget(
            name: "JobsTests",
            dependencies: ["Jobs", "JobsService", "Storage", "WorkLane", "RPC", "Schema", "Transport", "TestSupport"],
            path: "Tests/JobsTests"),
        .testTarget(name: "SchemaTests", dependencies: ["Schema", "SchemaGenerator", "TestSupport"], path: "Tests/SchemaTests",
            exclude: ["protojson_samples.py"]),
        .testTarget(name: "StorageTests", dependencies: ["Storage", "WorkLane", "TestSupport"], path: "Tests/StorageTests"),
        .target(name: "TestSupport", path: "Tests/TestSupport"),
        // Test-only and benchmark-only parts of the RPC stack (Echo, the in-process transport, the
        // raw echo floor), kept out of the production modules.
        .target(name: "RPCTesting", dependencies: ["RPC", "Transport", "Schema"], path: "Tests/RPCTesting"),
        // What the RPC and transport tests share: a harness over both transports, faulty services.
        .target(
            name: "RPCTestSupport", dependencies: ["RPC", "Transport", "Schema", "RPCTesting", "TestSupport"],
            path: "Tests/RPCTestSupport"),
        .testTarget(
            name: "RPCTests",
            dependencies: ["RPC", "Transport", "Schema", "TestSupport", "RPCTesting", "RPCTestSupport"],
            path: "Tests/RPCTests"),
        .testTarget(
            name: "TransportTests", dependencies: ["RPC", "Transport", "Schema", "TestSupport", "RPCTesting", "RPCTestSupport"],
            path: "Tests/TransportTests"),
        .testTarget(name: "ServiceKitTests", dependencies: ["ServiceKit", "RPC", "Schema", "Storage", "WorkLane", "Transport", "TestSupport", "RPCTesting"], path: "Tests/ServiceKitTests"),
        .testTarget(name: "GatewayKitTests", dependencies: ["GatewayKit", "RPC", "Transport", "Schema"], path: "Tests/GatewayKitTests"),
        .testTarget(name: "BaseTests", dependencies: ["Base"], path: "Tests/BaseTests"),
        .testTarget(name: "HealthCoreTests", dependencies: ["HealthCore", "Storage", "Base"], path: "Tests/HealthCoreTests"),
        .testTarget(
            name: "HealthServiceTests", dependencies: ["HealthCore", "HealthService", "ServiceAPI", "ServiceKit", "RPC", "Schema", "RPCTesting"],
            path: "Tests/HealthServiceTests"),
        .testTarget(name: "ZooCoreTests", dependencies: ["ZooCore", "Storage"], path: "Tests/ZooCoreTests"),
        .testTarget(
            name: "ZooServiceTests",
            dependencies: [
                "ZooCore", "ZooService", "ServiceAPI", "ServiceKit", "RPC", "Schema", "Jobs", "JobsService", "WorkLane", "RPCTesting",
            ],
            path: "Tests/ZooServiceTests"),
        .testTarget(name: "TextRecognitionTests", dependencies: ["TextRecognition", "WorkLane"], path: "Tests/TextRecognitionTests"),
        // What the OCR tests and the benchmark share: the shared pages, CER, the tesseract program, rendered pages.
        .target(name: "OCRTestSupport", dependencies: ["TextRecognition"], path: "Tests/OCRTestSupport"),
        .testTarget(
            name: "OCRCoreTests", dependencies: ["OCRCore", "TextRecognition", "Storage", "OCRTestSupport"], path: "Tests/OCRCoreTests"),
        .testTarget(
            name: "OCRServiceTests",
            dependencies: [
                "OCRCore", "OCRService", "ServiceAPI", "ServiceKit", "RPC", "Schema", "RPCTesting", "Jobs", "JobsService", "WorkLane",
                "Storage", "TextRecognition", "Transport", "TestSupport", "OCRTestSupport",
            ],
            path: "Tests/OCRServiceTests"),
        .testTarget(
            name: "ClassificationCoreTests", dependencies: ["ClassificationCore", "Torch", "OpenCVDNN", "Storage", "Base"],
            path: "Tests/ClassificationCoreTests"),
        .testTarget(
            name: "ClassificationServiceTests",
            dependencies: [
                "ClassificationCore", "ClassificationService", "Torch", "Jobs", "JobsService", "RPC", "RPCTesting", "Schema", "ServiceAPI",
                "ServiceKit",
            ],
            path: "Tests/ClassificationServiceTests"),
        .testTarget(
            name: "IntegrationTests",
            // Torch compiles the TorchScript modules the classification tests import (the test bundle links it anyway).
            dependencies: ["RPC", "Transport", "Schema", "ZooCore", "GatewayKit", "TestSupport", "OCRTestSupport", "TextRecognition", "Torch"],
            path: "Tests/IntegrationTests"),
    ],
    cxxLanguageStandard: .cxx17
)
