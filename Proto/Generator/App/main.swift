// schema-gen: writes the generated API modules' sources from a FileDescriptorSet. Run by Proto/generate.sh.
import Foundation
import SchemaGenerator

let arguments = CommandLine.arguments
guard arguments.count == 5 else {
    FileHandle.standardError.write(Data("""
        usage: schema-gen DESCRIPTOR_SET MODULES_CONF OUTPUT_ROOT PROTOC_C_DESCRIPTOR_SET
          DESCRIPTOR_SET            from protoc --descriptor_set_out --include_imports --include_source_info
          MODULES_CONF              Proto/modules.conf: which module each proto file's code goes to
          OUTPUT_ROOT               generated files go here, at their package-relative paths
          PROTOC_C_DESCRIPTOR_SET   written: the descriptor set to give protoc-c --descriptor_set_in

        """.utf8))
    exit(2)
}

do {
    let descriptorSet = try [UInt8](Data(contentsOf: URL(fileURLWithPath: arguments[1])))
    let layout = try ModuleLayout(parsing: String(decoding: Data(contentsOf: URL(fileURLWithPath: arguments[2])), as: UTF8.self))
    let output = try SchemaGenerator.generate(descriptorSet: descriptorSet, layout: layout)
    let root = URL(fileURLWithPath: arguments[3])
    for file in output.files {
        let url = root.appendingPathComponent(file.path)
        try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        try Data(file.contents.utf8).write(to: url)
    }
    try Data(output.protocCDescriptorSet).write(to: URL(fileURLWithPath: arguments[4]))
} catch {
    FileHandle.standardError.write(Data("schema-gen: \(error)\n".utf8))
    exit(1)
}
