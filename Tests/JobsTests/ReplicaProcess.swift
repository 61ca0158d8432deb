import Foundation
import RPC
import RPCWire
import Schema
import TestSupport
import Transport

/// One `jobs-test-service` process (a replica) and a client for it.
final class ReplicaProcess: @unchecked Sendable {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    static let binDirectory =
        ProcessInfo.processInfo.environment["MENAGERIE_BIN_DIR"] ?? root.appendingPathComponent(".build/debug").path

    let process = Process()
    let port: Int
    let client: RPCClient

    /// Starts a replica on `port` using the database at `database`, and waits until it answers.
    init(port: Int, database: String, directory: URL, extraArguments: [String] = []) async throws {
        self.port = port
        process.executableURL = URL(fileURLWithPath: "\(Self.binDirectory)/jobs-test-service")
        process.arguments =
            [
                "--port", "\(port)", "--data-dir", directory.appendingPathComponent("data-\(port)").path,
                "--database", database, "--log-level", "warning",
            ] + extraArguments
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        client = RPCClient(transports: [try TCPClientTransport(endpoint: "127.0.0.1:\(port)")])
        let giveUp = ContinuousClock.now + TestTime.scaled(.seconds(30))
        while true {
            if let answer = try? await client.unary(
                RpcV1.Health.check, RpcV1.HealthCheckRequest(),
                options: CallOptions(timeout: TestTime.scaled(.seconds(1)))),
                answer.pid == Int64(process.processIdentifier)
            {
                return
            }
            guard process.isRunning, ContinuousClock.now < giveUp else {
                stop()
                throw ReplicaFailed(description: "jobs-test-service on port \(port) did not start")
            }
            try await Task.sleep(for: .milliseconds(50))
        }
    }

    /// `kill -9`.
    func kill9() {
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        client.close()
    }

    func stop() {
        if process.isRunning {
            process.terminate()
            process.waitUntilExit()
        }
        client.close()
    }

    deinit { stop() }
}

struct ReplicaFailed: Error, CustomStringConvertible {
    let description: String
}
