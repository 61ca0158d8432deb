/// Generates, per proto file, the Swift value types and method descriptors, the service protocols and typed
/// clients, and per C target the descriptor registry, each into the module `ModuleLayout` places the file in (a
/// service's by convention, the others by `Proto/modules.conf`), plus the lists of every service and proto file
/// (`GeneratedLists`), from a `FileDescriptorSet` written by
/// `protoc --descriptor_set_out --include_imports --include_source_info`.
public enum SchemaGenerator {
    /// Everything generated from one descriptor set.
    public struct Output: Sendable {
        /// Files to write, with paths relative to the package root.
        public let files: [GeneratedFile]
        /// The descriptor set to hand to `protoc-c --descriptor_set_in`: proto3 `optional` fields
        /// become one-field oneofs, since protoc-c 1.4 refuses them; without the options files and their
        /// options (protobuf-c has no C for descriptor.proto), so only the files modules.conf places can be given to it.
        public let protocCDescriptorSet: [UInt8]
        /// Where each generated proto file's code went: the layout's lines for these files, and the convention's
        /// entries for the services' protos. generate.sh reads it back (as modules.conf lines) to run protoc-c.
        public let layout: ModuleLayout
    }

    /// Generates all files; throws `GeneratorError` for malformed input, for proto features the Schema bridge
    /// does not support (see `Proto/generate.sh`) and for a file `layout` does not place.
    public static func generate(descriptorSet: [UInt8], layout: ModuleLayout) throws -> Output {
        let decoded = try decodeFileDescriptorSet(descriptorSet)
        // Options files (and descriptor.proto, which they import) generate nothing: their options are read from the
        // methods that set them.
        for file in decoded where file.isOptionsFile { try validateOptionsFile(file) }
        let skipped = Set(decoded.filter { $0.isOptionsFile || $0.isDescriptorProto }.map(\.name))
        let files = decoded.filter { !skipped.contains($0.name) }
        try validate(files)
        let types = SwiftTypeTable(files: files)
        let resolved = ModuleLayout(entries: try files.map { try layout.entry(for: $0.name, package: $0.package) })
        let entries = try Dictionary(uniqueKeysWithValues: files.map { ($0.name, try resolved.entry(for: $0.name)) })
        var generated: [GeneratedFile] = []
        // A package's namespace enum (`JobsV1`) is declared once, by its first file; a file of the same package in
        // another module (a test-only proto) extends it, so it must import the declaring module.
        var namespaceModules: [String: String] = [:]
        var declaredNamespaceFiles: Set<String> = []
        for file in files {
            let entry = entries[file.name]!
            let namespace = Naming.namespace(ofPackage: file.package)
            let imported = file.dependencies.compactMap { entries[$0] }
            let declaringModule = namespaceModules[namespace, default: entry.swiftModule]
            namespaceModules[namespace] = declaringModule
            let declaresNamespace = declaringModule == entry.swiftModule && !declaredNamespaceFiles.contains(namespace)
            declaredNamespaceFiles.insert(namespace)
            guard declaringModule == entry.swiftModule || imported.contains(where: { $0.swiftModule == declaringModule }) else {
                throw GeneratorError.unsupported(
                    "\(file.name) is in \(entry.swiftModule), but its package \(file.package) is declared in \(declaringModule), "
                        + "which it does not import")
            }
            generated.append(GeneratedFile(
                path: entry.swiftDirectory + "/" + swiftFileName(for: file.name),
                contents: try SwiftEmitter(file: file, types: types, entry: entry, imports: imported)
                    .emit(declaringNamespace: declaresNamespace)))
            if !file.services.isEmpty {
                generated.append(GeneratedFile(
                    path: entry.serviceDirectory + "/" + serviceAPIFileName(for: file.name),
                    contents: try ServiceAPIEmitter(file: file, types: types, entry: entry, imports: imported).emit()))
            }
        }
        var filesByCModule: [String: (entry: ModuleLayout.Entry, files: [ProtoFile])] = [:]
        for file in files {
            let entry = entries[file.name]!
            filesByCModule[entry.cModule, default: (entry, [])].files.append(file)
        }
        for (_, group) in filesByCModule.sorted(by: { $0.key < $1.key }) {
            generated += CRegistryEmitter(entry: group.entry, files: group.files).emit()
        }
        generated += GeneratedLists.emit(files: files, layout: resolved)
        return Output(
            files: generated, protocCDescriptorSet: try protocCInput(from: descriptorSet, dropping: skipped), layout: resolved)
    }

    /// `menagerie/rpc/v1/rpc.proto` → `menagerie_rpc_v1_rpc.pb.swift`.
    static func swiftFileName(for protoPath: String) -> String {
        protoPath.droppingProtoExtension.replacingAll("/", with: "_") + ".pb.swift"
    }

    /// `menagerie/zoo/v1/zoo.proto` → `menagerie_zoo_v1_zoo.rpc.swift`.
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
