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
        // Logging, the version string, a heap, the upward search for the source tree: no dependencies.
        .target(name: "Base", path: "Shared/Base"),
        .target(name: "RPC", dependencies: ["Base", "Schema"], path: "Shared/RPC"),
        // Generated from Proto/ by schema-gen: a service protocol and a typed client per proto service.
        .target(name: "ServiceAPI", dependencies: ["RPC", "Schema"], path: "Shared/ServiceAPI"),
        .target(name: "Transport", dependencies: ["Base", "RPC", "Schema", "CLibUV"], path: "Shared/Transport"),
        .target(
            name: "ServiceKit",
            dependencies: [
                "Base", "RPC", "Transport", "Storage",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "Shared/ServiceKit"),

        // MARK: Services
        // Each service <Name>: Core (domain and persistence; never RPC or Schema), Service (handlers, validation,
        // proto conversions; conforms to the generated ServiceProtocol), App (the executable), CLI (`gateway <name>`).
        .target(name: "ZooCore", dependencies: ["Base", "Storage"], path: "Services/Zoo/Core"),
        .target(name: "ZooService", dependencies: ["ZooCore", "RPC", "Schema", "ServiceAPI"], path: "Services/Zoo/Service"),
        .executableTarget(name: "zoo", dependencies: ["ZooCore", "ZooService", "ServiceKit", "Base"], path: "Services/Zoo/App"),
        .executableTarget(name: "ocr", dependencies: ["ServiceKit"], path: "Services/OCR/App"),
        .target(name: "HealthCore", dependencies: ["Storage"], path: "Services/Health/Core"),
        .target(
            name: "HealthService", dependencies: ["HealthCore", "RPC", "Schema", "ServiceAPI"], path: "Services/Health/Service"),
        .executableTarget(
            name: "health", dependencies: ["HealthCore", "HealthService", "ServiceKit", "Base"], path: "Services/Health/App"),
        .executableTarget(name: "classification", dependencies: ["ServiceKit"], path: "Services/Classification/App"),
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
                "GatewayKit", "ZooCLI", "HealthCLI", "RPC", "Transport", "Schema", "ServiceAPI",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "Services/Gateway/App"),

        // MARK: Benchmarks
        .executableTarget(name: "menagerie-bench", dependencies: ["RPC", "Transport", "Schema", "ServiceAPI", "CLibUV", "ZooCore", "ZooService", "HealthCore", "HealthService"],
            path: "Tests/Benchmarks"),

        // MARK: Tests
        .testTarget(name: "SchemaTests", dependencies: ["Schema", "SchemaGenerator", "TestSupport"], path: "Tests/SchemaTests"),
        .testTarget(name: "StorageTests", dependencies: ["Storage"], path: "Tests/StorageTests"),
        .target(name: "TestSupport", path: "Tests/TestSupport"),
        .testTarget(name: "RPCTests", dependencies: ["RPC", "Transport", "Schema", "ServiceKit", "TestSupport"], path: "Tests/RPCTests"),
        .testTarget(name: "ServiceKitTests", dependencies: ["ServiceKit", "RPC", "Schema", "Storage"], path: "Tests/ServiceKitTests"),
        .testTarget(name: "GatewayKitTests", dependencies: ["GatewayKit", "RPC", "Transport"], path: "Tests/GatewayKitTests"),
        .testTarget(name: "BaseTests", dependencies: ["Base"], path: "Tests/BaseTests"),
        .testTarget(name: "HealthCoreTests", dependencies: ["HealthCore", "Storage"], path: "Tests/HealthCoreTests"),
        .testTarget(
            name: "HealthServiceTests", dependencies: ["HealthCore", "HealthService", "ServiceAPI", "ServiceKit", "RPC", "Schema"],
            path: "Tests/HealthServiceTests"),
        .testTarget(name: "ZooCoreTests", dependencies: ["ZooCore", "Storage"], path: "Tests/ZooCoreTests"),
        .testTarget(
            name: "ZooServiceTests", dependencies: ["ZooCore", "ZooService", "ServiceAPI", "ServiceKit", "RPC", "Schema"],
            path: "Tests/ZooServiceTests"),
        .testTarget(
            name: "IntegrationTests", dependencies: ["RPC", "Transport", "Schema", "ZooCore", "GatewayKit", "TestSupport"],
            path: "Tests/IntegrationTests"),
    ]
)
