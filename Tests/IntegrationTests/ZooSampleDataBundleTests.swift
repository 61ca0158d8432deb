import Foundation
import TestSupport
import Testing

/// The zoo's sample data ships as a SwiftPM resource bundle beside the executable: a `zoo` copied
/// elsewhere together with its `Menagerie_ZooCore.resources` reads the copy, not the source tree.
@Suite(.timeLimit(.minutes(1))) struct ZooSampleDataBundleTests {
    @Test func theSampleDataComesFromTheBundleBesideTheExecutable() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("zoo-bundle-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        for item in ["zoo", "Menagerie_ZooCore.resources"] {
            try FileManager.default.copyItem(
                at: URL(fileURLWithPath: Stack.binDirectory).appendingPathComponent(item),
                to: directory.appendingPathComponent(item))
        }
        let log = directory.appendingPathComponent("zoo.log")
        _ = FileManager.default.createFile(atPath: log.path, contents: nil)
        let handle = try FileHandle(forWritingTo: log)
        defer { try? handle.close() }
        let process = Process()
        process.executableURL = directory.appendingPathComponent("zoo")
        process.arguments = ["--port", "0", "--data-dir", directory.appendingPathComponent("data").path]
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = handle
        process.standardError = handle
        try process.run()
        defer { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }
        func logText() -> String { (try? String(contentsOf: log, encoding: .utf8)) ?? "" }
        for _ in 0..<Int(400 * TestTime.scale) where !logText().contains("started: pid") && process.isRunning {
            try await Task.sleep(for: .milliseconds(50))
        }
        let bundled = directory.appendingPathComponent("Menagerie_ZooCore.resources/SampleData").path
        #expect(logText().contains("loaded the sample data from \(bundled): "), "\(logText())")
        kill(process.processIdentifier, SIGTERM)
        for _ in 0..<Int(200 * TestTime.scale) where process.isRunning { try await Task.sleep(for: .milliseconds(50)) }
        #expect(process.terminationReason == .exit)
        #expect(process.terminationStatus == 0)
    }
}
