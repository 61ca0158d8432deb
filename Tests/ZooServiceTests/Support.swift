import Foundation
import Storage
import StorageTestSupport

@testable import ZooCore

/// A scratch directory removed when the value goes away.
final class ScratchDirectory: Sendable {
    let url = FileManager.default.temporaryDirectory.appendingPathComponent("zoo-service-tests-\(UUID().uuidString)")

    init() throws { try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true) }

    deinit { try? FileManager.default.removeItem(at: url) }

    var databasePath: String { url.appendingPathComponent("zoo.sqlite").path }
}

/// The bundled sample data, whole or cut down.
enum SampleFiles {
    static let directory = ZooDataSet.bundledSampleDirectory

    /// The sample lexicon CSV cut down to its header and first `count` animals.
    static func lexiconCSV(first count: Int) throws -> ZooSourceFile {
        let text = try String(
            contentsOf: directory.appendingPathComponent(ZooFileKind.lexiconCSV.fileName), encoding: .utf8)
        let lines = CSVParser.parse(text).prefix(count + 1).map { record in
            record.fields.map { "\"" + $0.replacingOccurrences(of: "\"", with: "\"\"") + "\"" }.joined(separator: ";")
        }
        return ZooSourceFile(
            kind: .lexiconCSV, name: ZooFileKind.lexiconCSV.fileName,
            content: Data((lines.joined(separator: "\n") + "\n").utf8))
    }
}

extension ZooLibrary {
    /// The library on `path`'s SQLite file, or (MENAGERIE_STORAGE_BACKEND=dqlite) on a dqlite database named after it:
    /// the zoo's suites run on both backends.
    convenience init(scratchAt path: String, walkingSpeed: Double = 1.2, recheckInterval: Duration = .milliseconds(50))
        throws
    {
        try self.init(
            database: .scratch(path: path, migrations: ZooSchema.migrations), walkingSpeed: walkingSpeed,
            recheckInterval: recheckInterval)
    }
}
