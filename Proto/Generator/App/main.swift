// schema-gen: writes the generated API modules' sources from a FileDescriptorSet. Run by Proto/generate.sh.
import Foundation
import SchemaGenerator

let arguments = CommandLine.arguments
guard arguments.count == 6 else {
    FileHandle.standardError.write(Data("""
        usage: schema-gen DESCRIPTOR_SET PACKAGE_ROOT OUTPUT_ROOT PROTOC_C_DESCRIPTOR_SET LAYOUT
          DESCRIPTOR_SET            from protoc --descriptor_set_out --include_imports --include_source_info
          PACKAGE_ROOT              the package: its Proto/modules.conf and service folders (Services/NAME,
                                    Tests/Services/NAME) say which module each proto file's code goes to
          OUTPUT_ROOT               generated files go here, at their package-relative paths
          PROTOC_C_DESCRIPTOR_SET   written: the descriptor set to give protoc-c --descriptor_set_in
          LAYOUT                    written: where each proto file's code went, as modules.conf lines

        """.utf8))
    exit(2)
}

do {
    let descriptorSet = try [UInt8](Data(contentsOf: URL(fileURLWithPath: arguments[1])))
    let layout = try ServiceFolders.layout(packageRoot: URL(fileURLWithPath: arguments[2]))
    let output = try SchemaGenerator.generate(descriptorSet: descriptorSet, layout: layout)
    let root = URL(fileURLWithPath: arguments[3])
    for file in output.files {
        let url = root.appendingPathComponent(file.path)
        try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        try Data(file.contents.utf8).write(to: url)
    }
    try Data(output.protocCDescriptorSet).write(to: URL(fileURLWithPath: arguments[4]))
    try Data(output.layout.lines.utf8).write(to: URL(fileURLWithPath: arguments[5]))
} catch {
    FileHandle.standardError.write(Data("schema-gen: \(error)\n".utf8))
    exit(1)
}
