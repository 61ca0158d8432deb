/// Generates the Swift value types (`Shared/Schema/Generated`), the service protocols and typed clients
/// (`Shared/ServiceAPI/Generated`) and the C descriptor registry
/// (`Shared/MenagerieProtoC`) from a `FileDescriptorSet` written by
/// `protoc --descriptor_set_out --include_imports --include_source_info`.
public enum SchemaGenerator {
    /// Everything generated from one descriptor set.
    public struct Output: Sendable {
        /// Files to write, with paths relative to the package root (see `SchemaLayout`).
        public let files: [GeneratedFile]
        /// The descriptor set to hand to `protoc-c --descriptor_set_in`: proto3 `optional` fields
        /// become one-field oneofs, since protoc-c 1.4 refuses them.
        public let protocCDescriptorSet: [UInt8]
    }

    /// Generates all files; throws `GeneratorError` for malformed input and for proto features
    /// the Schema bridge does not support (see `Proto/generate.sh`).
    public static func generate(descriptorSet: [UInt8]) throws -> Output {
        let files = try decodeFileDescriptorSet(descriptorSet)
        try validate(files)
        let types = SwiftTypeTable(files: files)
        var generated: [GeneratedFile] = []
        var declaredNamespaces: Set<String> = []
        for file in files {
            let namespace = Naming.namespace(ofPackage: file.package)
            let declaresNamespace = declaredNamespaces.insert(namespace).inserted
            generated.append(GeneratedFile(
                path: SchemaLayout.swiftDirectory + "/" + swiftFileName(for: file.name),
                contents: try SwiftEmitter(file: file, types: types).emit(declaringNamespace: declaresNamespace)))
            if !file.services.isEmpty {
                generated.append(GeneratedFile(
                    path: SchemaLayout.serviceAPIDirectory + "/" + serviceAPIFileName(for: file.name),
                    contents: try ServiceAPIEmitter(file: file, types: types).emit()))
            }
        }
        generated += CRegistryEmitter(files: files).emit()
        return Output(files: generated, protocCDescriptorSet: try protocCInput(from: descriptorSet))
    }

    /// `menagerie/rpc/v1/rpc.proto` → `menagerie_rpc_v1_rpc.pb.swift` (unique within the Schema module).
    static func swiftFileName(for protoPath: String) -> String {
        protoPath.droppingProtoExtension.replacingAll("/", with: "_") + ".pb.swift"
    }

    /// `menagerie/zoo/v1/zoo.proto` → `menagerie_zoo_v1_zoo.rpc.swift` (unique within the ServiceAPI module).
    static func serviceAPIFileName(for protoPath: String) -> String {
        protoPath.droppingProtoExtension.replacingAll("/", with: "_") + ".rpc.swift"
    }
}

/// One generated file.
public struct GeneratedFile: Sendable, Equatable {
    /// Relative to the package root.
    public let path: String
    public let contents: String
}

/// Where generated code lives, relative to the package root.
public enum SchemaLayout {
    /// The generated Swift files, one per `.proto` file.
    public static let swiftDirectory = "Shared/Schema/Generated"
    /// Per proto file with services: the service protocols and typed clients (module `ServiceAPI`).
    public static let serviceAPIDirectory = "Shared/ServiceAPI/Generated"
    /// protoc-c's `.c` files (in their `menagerie/...` subdirectories) and the registry.
    public static let protobufCSourceDirectory = "Shared/MenagerieProtoC"
    /// protoc-c's `.h` files (in their `menagerie/...` subdirectories) and the umbrella header.
    public static let protobufCHeaderDirectory = "Shared/MenagerieProtoC/include"
}

/// Why generation failed.
public enum GeneratorError: Error, CustomStringConvertible, Equatable {
    /// The descriptor set could not be decoded.
    case malformedDescriptor(String)
    /// The schema uses something the generator does not support.
    case unsupported(String)
    /// Two generated names collide, or a name is reserved by the generated code.
    case nameClash(String)

    public var description: String {
        switch self {
        case .malformedDescriptor(let detail): "malformed FileDescriptorSet: \(detail)"
        case .unsupported(let detail): "unsupported: \(detail)"
        case .nameClash(let detail): "name clash: \(detail)"
        }
    }
}

extension String {
    /// `a/b.proto` → `a/b`.
    var droppingProtoExtension: String {
        hasSuffix(".proto") ? String(dropLast(".proto".count)) : self
    }

    func replacingAll(_ target: Character, with replacement: String) -> String {
        split(separator: target, omittingEmptySubsequences: false).joined(separator: replacement)
    }
}
