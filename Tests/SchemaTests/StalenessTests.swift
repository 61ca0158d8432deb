import Foundation
import SchemaGenerator
import Testing

/// The committed generated files are exactly what Proto/generate.sh would write now.
@Suite(
    .enabled(
        if: Tool.protoc != nil && Tool.protocC != nil,
        "needs protoc and protoc-c (Debian: protobuf-compiler protobuf-c-compiler) to regenerate"))
struct StalenessTests {
    /// Runs the steps of Proto/generate.sh into a scratch directory: package-relative path → contents.
    static func regenerate() throws -> [String: [UInt8]] { try regenerateWithLayout().files }

    /// `regenerate()`, and where schema-gen placed each proto file's code (modules.conf's lines and the services').
    static func regenerateWithLayout() throws -> (files: [String: [UInt8]], layout: ModuleLayout) {
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent(
            "schema-staleness-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: scratch) }
        let protos = Package.protoFiles()
        let descriptorSet = scratch.appendingPathComponent("schema.desc")
        try Tool.protoc!.run(
            [
                "-I", Package.protoDirectory.path, "--descriptor_set_out=\(descriptorSet.path)", "--include_imports",
                "--include_source_info",
            ] + protos)
        let output = try SchemaGenerator.generate(
            descriptorSet: [UInt8](Data(contentsOf: descriptorSet)), layout: Package.moduleLayout())
        let layout = output.layout

        var files: [String: [UInt8]] = [:]
        for file in output.files { files[file.path] = Array(file.contents.utf8) }

        let protocCInput = scratch.appendingPathComponent("protoc-c.desc")
        try Data(output.protocCDescriptorSet).write(to: protocCInput)
        let cOutput = scratch.appendingPathComponent("c")
        try FileManager.default.createDirectory(at: cOutput, withIntermediateDirectories: true)
        // As generate.sh: the files schema-gen placed (the options file generates no code).
        try Tool.protocC!.run(
            ["--descriptor_set_in=\(protocCInput.path)", "--c_out=\(cOutput.path)"] + layout.entries.map(\.protoFile),
            in: scratch)
        for path in try relativeFiles(under: cOutput) {
            // protoc-c names its output after the proto file: menagerie/zoo/v1/zoo.pb-c.h.
            let protoFile = String(path.prefix(upTo: path.range(of: ".pb-c.")!.lowerBound)) + ".proto"
            files[try layout.entry(for: protoFile).cPath(ofProtocCOutput: path)] =
                try [UInt8](Data(contentsOf: cOutput.appendingPathComponent(path)))
        }
        return (files, layout)
    }

    static func relativeFiles(under directory: URL) throws -> [String] {
        let enumerator = FileManager.default.enumerator(atPath: directory.path)
        var files: [String] = []
        while let path = enumerator?.nextObject() as? String {
            var isDirectory: ObjCBool = false
            if FileManager.default.fileExists(
                atPath: directory.appendingPathComponent(path).path, isDirectory: &isDirectory),
                !isDirectory.boolValue
            {
                files.append(path)
            }
        }
        return files
    }

    @Test func committedFilesMatchAFreshGeneration() throws {
        let (generated, layout) = try Self.regenerateWithLayout()
        var committed: Set<String> = []
        for directory in layout.outputDirectories {
            for path in try Self.relativeFiles(under: Package.root.appendingPathComponent(directory))
            where Self.isGenerated(path) || GeneratedLists.directories.contains(directory) {
                committed.insert(directory + "/" + path)
            }
        }
        #expect(committed == Set(generated.keys), "generated files added or removed: run Proto/generate.sh")
        for (path, contents) in generated.sorted(by: { $0.key < $1.key }) {
            guard let onDisk = try? [UInt8](Data(contentsOf: Package.root.appendingPathComponent(path))) else {
                continue
            }
            #expect(Self.firstDifference(onDisk, contents) == nil, "\(path) is stale: run Proto/generate.sh")
        }
        #expect(generated.keys.contains("Shared/RPCWire/Generated/menagerie_rpc_v1_rpc.pb.swift"))
        #expect(generated.keys.contains("Shared/RPC/Generated/menagerie_rpc_v1_rpc.rpc.swift"))
        #expect(generated.keys.contains("Services/Zoo/API/Generated/menagerie_zoo_v1_zoo.rpc.swift"))
        #expect(generated.keys.contains("Shared/RPCWireProtoC/include/menagerie/rpc/v1/rpc.pb-c.h"))
        #expect(generated.keys.contains("Services/Zoo/ProtoC/ZooProtoC_registry.c"))
        #expect(generated.keys.contains(GeneratedLists.gatewayCommandGroups))
        #expect(generated.keys.contains(GeneratedLists.protoFiles))
    }

    /// What generate.sh writes (and so may remove) in the API modules' output directories; other files there are
    /// hand-written. Everything in the lists' directories (`GeneratedLists.directories`) is generated.
    static func isGenerated(_ path: String) -> Bool {
        path.hasSuffix(".pb.swift") || path.hasSuffix(".rpc.swift") || path.hasSuffix(".pb-c.c")
            || path.hasSuffix(".pb-c.h")
            || path.hasSuffix("_registry.c") || path.hasSuffix("_registry.h")
    }

    /// The first line where the committed and the generated text differ, or nil when they are equal.
    static func firstDifference(_ committed: [UInt8], _ generated: [UInt8]) -> String? {
        guard committed != generated else { return nil }
        let old = String(decoding: committed, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false)
        let new = String(decoding: generated, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false)
        let line = (0..<min(old.count, new.count)).first { old[$0] != new[$0] } ?? min(old.count, new.count)
        let committedLine = line < old.count ? String(old[line]) : "<end of file>"
        let generatedLine = line < new.count ? String(new[line]) : "<end of file>"
        return "line \(line + 1): committed \"\(committedLine)\", generated \"\(generatedLine)\""
    }

    @Test func generationIsDeterministic() throws {
        #expect(try Self.regenerate() == Self.regenerate())
    }
}
