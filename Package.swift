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
        .target(name: "HealthCore", dependencies: ["Storage"], path: "Services/Health/Core"),
        .executableTarget(name: "health", dependencies: ["ServiceKit"], path: "Services/Health/App"),
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
        .testTarget(name: "HealthCoreTests", dependencies: ["HealthCore", "Storage"], path: "Tests/HealthCoreTests"),
        .testTarget(name: "IntegrationTests", dependencies: ["RPC", "Transport", "Schema", "ZooCore", "TestSupport"], path: "Tests/IntegrationTests"),
    ]
)
