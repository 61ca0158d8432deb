import Base
import Foundation
import ZooCore

/// Finds the bundled sample data: `Services/Zoo/SampleData` above the executable (it runs from the package's
/// `.build`), else above the working directory, else where the sources were when the executable was built.
enum SampleDataLocation {
    static let relativePath = "Services/Zoo/SampleData"

    static func find() -> URL? {
        let candidates = UpwardSearch.candidates(relativePath, from: [UpwardSearch.executableDirectory, UpwardSearch.workingDirectory])
        return (candidates + [ZooDataSet.bundledSampleDirectory]).first { candidate in
            [ZooFileKind.animalsJSON, .lexiconCSV].contains {
                FileManager.default.fileExists(atPath: candidate.appendingPathComponent($0.fileName).path)
            }
        }
    }
}
