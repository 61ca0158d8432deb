import Foundation

/// Finds a file of the source tree from wherever an executable runs: executables live in the package's
/// `.build`, so the tree is above them; a developer runs them from somewhere inside it. Used for compose's
/// services file and its state (the zoo's sample data is a resource bundle beside the executable).
public enum UpwardSearch {
    /// The directory of the running executable (symbolic links resolved).
    public static var executableDirectory: URL {
        URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent()
    }

    /// The current working directory.
    public static var workingDirectory: URL { URL(fileURLWithPath: FileManager.default.currentDirectoryPath) }

    /// `relativePath` under each start directory and each directory above it (the root excluded), start by start.
    public static func candidates(_ relativePath: String, from starts: [URL]) -> [URL] {
        var candidates: [URL] = []
        for start in starts {
            var directory = start.standardizedFileURL
            while directory.path != "/" {
                candidates.append(directory.appendingPathComponent(relativePath))
                directory = directory.deletingLastPathComponent()
            }
        }
        return candidates
    }

    /// The first of `candidates(relativePath, from: starts)` that `accept` takes, by default the first that exists.
    public static func find(
        _ relativePath: String, from starts: [URL] = [executableDirectory, workingDirectory],
        where accept: (URL) -> Bool = { FileManager.default.fileExists(atPath: $0.path) }
    ) -> URL? {
        candidates(relativePath, from: starts).first(where: accept)
    }
}
