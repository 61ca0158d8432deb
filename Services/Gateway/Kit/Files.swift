import Foundation

/// A file named on the command line that cannot be used: a missing or unreadable input exits 66 (EX_NOINPUT),
/// an output that cannot be written 73 (EX_CANTCREAT), each with its own message, not a usage error — the
/// command line was right, the file system disagrees.
public struct FileError: Error, CustomStringConvertible {
    public enum Kind: Sendable { case missing, unreadable, notWritable }
    public let kind: Kind
    public let path: String
    public let reason: String
    /// What the file is for, e.g. `--words`: named in the message.
    public let role: String?

    public init(_ kind: Kind, path: String, reason: String, role: String? = nil) {
        self.kind = kind
        self.path = path
        self.reason = reason
        self.role = role
    }

    public var description: String {
        let file = role.map { "\($0) \(path)" } ?? path
        return kind == .notWritable ? "cannot write \(file): \(reason)" : "cannot read \(file): \(reason)"
    }

    public var exitCode: Int32 { kind == .notWritable ? GatewayExit.cannotCreate : GatewayExit.noInput }

    /// The Connect code name `--json` reports it with.
    public var connectCode: String {
        switch kind {
        case .missing: "not_found"
        case .unreadable, .notWritable: "permission_denied"
        }
    }
}

/// Input files, checked where a command validates its options (before it connects) and read when it runs.
public enum InputFile {
    /// Throws `FileError` unless `path` is a readable file (or, with `directory`, a readable directory); `role`
    /// (e.g. `--words`) is named in the message.
    public static func check(_ path: String, directory: Bool = false, role: String? = nil) throws {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
            throw FileError(.missing, path: path, reason: directory ? "no such directory" : "no such file", role: role)
        }
        if isDirectory.boolValue != directory {
            throw FileError(
                .unreadable, path: path, reason: directory ? "not a directory" : "is a directory", role: role)
        }
        guard FileManager.default.isReadableFile(atPath: path) else {
            throw FileError(.unreadable, path: path, reason: "permission denied", role: role)
        }
    }

    /// The file's bytes; `FileError` when it is missing or cannot be read.
    public static func read(_ path: String, role: String? = nil) throws -> Data {
        try check(path, role: role)
        do { return try Data(contentsOf: URL(fileURLWithPath: path)) } catch {
            throw FileError(.unreadable, path: path, reason: error.localizedDescription, role: role)
        }
    }
}
