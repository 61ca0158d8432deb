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
        .target(name: "Storage", dependencies: ["CSQLite"], path: "Shared/Storage"),
        .target(name: "RPC", dependencies: ["Schema"], path: "Shared/RPC"),
        .target(name: "Transport", dependencies: ["RPC", "Schema", "CLibUV"], path: "Shared/Transport"),
        .target(
            name: "ServiceKit",
            dependencies: [
                "RPC", "Transport", "Storage",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "Shared/ServiceKit"),

        // MARK: Services
        .target(name: "ZooCore", dependencies: ["Storage", "Schema", "RPC"], path: "Services/Zoo/Core"),
        .executableTarget(name: "zoo", dependencies: ["ZooCore", "ServiceKit"], path: "Services/Zoo/App"),
        .executableTarget(name: "ocr", dependencies: ["ServiceKit"], path: "Services/OCR/App"),
        .executableTarget(name: "health", dependencies: ["ServiceKit"], path: "Services/Health/App"),
        .target(
            name: "ClassificationCore", dependencies: ["Storage", "Torch", "CImageCodecs"],
            path: "Services/Classification/Core"),
        .executableTarget(name: "classification", dependencies: ["ServiceKit"], path: "Services/Classification/App"),
        .executableTarget(
            name: "gateway",
            dependencies: [
                "RPC", "Transport", "Schema",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "Services/Gateway/App"),

        // MARK: Benchmarks
        .executableTarget(name: "menagerie-bench", dependencies: ["RPC", "Transport", "Schema", "CLibUV", "ZooCore"], path: "Tests/Benchmarks"),

        // MARK: Tests
        .testTarget(name: "SchemaTests", dependencies: ["Schema", "SchemaGenerator", "TestSupport"], path: "Tests/SchemaTests"),
        .testTarget(name: "StorageTests", dependencies: ["Storage"], path: "Tests/StorageTests"),
        .target(name: "TestSupport", path: "Tests/TestSupport"),
        .testTarget(name: "RPCTests", dependencies: ["RPC", "Transport", "Schema", "ServiceKit", "TestSupport"], path: "Tests/RPCTests"),
        .testTarget(name: "ZooTests", dependencies: ["ZooCore", "RPC", "Schema", "Storage"], path: "Tests/ZooTests"),
        .testTarget(name: "ClassificationCoreTests", dependencies: ["ClassificationCore", "Torch", "Storage"], path: "Tests/ClassificationCoreTests"),
        .testTarget(name: "IntegrationTests", dependencies: ["RPC", "Transport", "Schema", "ZooCore", "TestSupport"], path: "Tests/IntegrationTests"),
    ],
    cxxLanguageStandard: .cxx17
)
