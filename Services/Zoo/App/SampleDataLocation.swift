import Foundation
import ZooCore

/// Finds the bundled sample data: `Services/Zoo/SampleData` above the executable (it runs from the package's
/// `.build`), else above the working directory, else where the sources were when the executable was built.
enum SampleDataLocation {
    static let relativePath = "Services/Zoo/SampleData"

    static func find() -> URL? {
        var candidates: [URL] = []
        for start in [URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent(),
                      URL(fileURLWithPath: FileManager.default.currentDirectoryPath)] {
            var directory = start
            while directory.path != "/" {
                candidates.append(directory.appendingPathComponent(relativePath))
                directory = directory.deletingLastPathComponent()
            }
        }
        candidates.append(ZooDataSet.bundledSampleDirectory)
        return candidates.first { candidate in
            [ZooFileKind.animalsJSON, .lexiconCSV].contains {
                FileManager.default.fileExists(atPath: candidate.appendingPathComponent($0.fileName).path)
            }
        }
    }
}
