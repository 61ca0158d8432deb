import Foundation
import TestSupport
import Testing

/// Issue 9 #15: a SIGTERM while a service starts up (before it serves) ends it with status 0, as one
/// while serving does after draining, not killed by the signal.
@Suite(.timeLimit(.minutes(1))) struct StartupSignalTests {
    @Test func sigtermWhileStartingExitsZero() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "startup-signal-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let log = directory.appendingPathComponent("service.log")
        _ = FileManager.default.createFile(atPath: log.path, contents: nil)
        let handle = try FileHandle(forWritingTo: log)
        defer { try? handle.close() }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "\(ReplicaProcess.binDirectory)/jobs-test-service")
        process.arguments = ["--port", "0", "--data-dir", directory.appendingPathComponent("data").path]
        process.environment = ProcessInfo.processInfo.environment.merging(["JOBS_TEST_STARTUP_DELAY_MS": "20000"]) {
            $1
        }
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = handle
        process.standardError = handle
        try process.run()
        defer { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }
        func logText() -> String { (try? String(contentsOf: log, encoding: .utf8)) ?? "" }
        // Its signal handling is in place before its services are made, where the delay is. Polled for 10 s, scaled.
        let polls = Int(200 * TestTime.scale)
        for _ in 0..<polls where !logText().contains("delaying startup") && process.isRunning {
            try await Task.sleep(for: .milliseconds(50))
        }
        try #require(
            logText().contains("delaying startup"), "the service did not reach its startup delay: \(logText())")
        kill(process.processIdentifier, SIGTERM)
        for _ in 0..<polls where process.isRunning { try await Task.sleep(for: .milliseconds(50)) }
        try #require(!process.isRunning, "SIGTERM while starting did not end the service")
        #expect(process.terminationReason == .exit, "ended by a signal, not by exiting")
        #expect(process.terminationStatus == 0)
        #expect(logText().contains("received SIGTERM while starting"), "\(logText())")
        #expect(!logText().contains("started: pid"))
    }
}
