import Foundation
import SchemaGenerator

/// Paths of the package under test, found from this file's location.
enum Package {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    static let protoDirectory = root.appendingPathComponent("Proto")

    /// Where each proto file's generated code goes: Proto/modules.conf and the service folders, as schema-gen reads
    /// them.
    static func moduleLayout() throws -> ModuleLayout {
        try ServiceFolders.layout(packageRoot: root)
    }

    /// Every `.proto` under Proto/menagerie, as protoc names them (`menagerie/rpc/v1/rpc.proto`), sorted
    /// like generate.sh sorts them (byte order).
    static func protoFiles() -> [String] {
        let enumerator = FileManager.default.enumerator(atPath: protoDirectory.appendingPathComponent("menagerie").path)
        var files: [String] = []
        while let path = enumerator?.nextObject() as? String {
            if path.hasSuffix(".proto") { files.append("menagerie/" + path) }
        }
        return files.sorted { Array($0.utf8).lexicographicallyPrecedes(Array($1.utf8)) }
    }
}

/// An external command-line tool (protoc, protoc-c), found on PATH.
struct Tool: Sendable {
    let url: URL

    static let protoc = Tool(named: "protoc")
    static let protocC = Tool(named: "protoc-c")

    init(url: URL) { self.url = url }

    init?(named name: String) {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        guard
            let directory = path.split(separator: ":").first(where: {
                FileManager.default.isExecutableFile(atPath: "\($0)/\(name)")
            })
        else { return nil }
        url = URL(fileURLWithPath: "\(directory)/\(name)")
    }

    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    /// Runs the tool with `input` on stdin and returns stdout; throws with stderr when it fails.
    /// Files (not pipes) carry stdin and stdout so large outputs cannot deadlock.
    @discardableResult
    func run(_ arguments: [String], input: [UInt8] = [], in directory: URL? = nil) throws -> [UInt8] {
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("schema-tests-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: scratch) }
        let stdin = scratch.appendingPathComponent("stdin")
        let stdout = scratch.appendingPathComponent("stdout")
        let stderr = scratch.appendingPathComponent("stderr")
        try Data(input).write(to: stdin)
        try Data().write(to: stdout)
        try Data().write(to: stderr)

        let process = Process()
        process.executableURL = url
        process.arguments = arguments
        process.currentDirectoryURL = directory ?? scratch
        process.standardInput = try FileHandle(forReadingFrom: stdin)
        process.standardOutput = try FileHandle(forWritingTo: stdout)
        process.standardError = try FileHandle(forWritingTo: stderr)
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            let message = (try? String(contentsOf: stderr, encoding: .utf8)) ?? ""
            throw Failure(
                description:
                    "\(url.lastPathComponent) \(arguments.joined(separator: " ")) exited with \(process.terminationStatus): \(message)"
            )
        }
        return try [UInt8](Data(contentsOf: stdout))
    }
}
