import Base
import Foundation
import RPC
import ServiceKit
import Storage
import Synchronization
import TestSupport
import Testing

/// `ServiceRunner.run` in process, for what needs no signal: a failed setup and a failed background
/// service come back as thrown failures (the executable picks the exit status), and the environment
/// carries the database path. (Signals are tested against a real executable in JobsTests.)
@Suite(.serialized) struct ServiceRunnerTests {
    @Test func aFailedSetupIsThrownNotExited() async throws {
        let scratch = try ScratchDirectory()
        struct NoDatabase: Error, CustomStringConvertible { var description: String { "no database today" } }
        await #expect {
            try await ServiceRunner.run(name: "test", options: try scratch.options()) { _ in throw NoDatabase() }
        } throws: { error in
            guard case .startup(let reason) = error as? ServiceRunner.Failure else { return false }
            return reason == "no database today"
        }
    }

    /// A background service that throws stops the service: its sibling is cancelled (and returns), the
    /// server stops, and `run` throws naming the failed service.
    @Test func aFailingBackgroundServiceStopsTheRest() async throws {
        let scratch = try ScratchDirectory()
        let sibling = Sibling()
        let before = ContinuousClock.now
        await #expect {
            try await ServiceRunner.run(name: "test", options: try scratch.options()) { _ in
                AppServices(rpc: [], background: [sibling, Failing()])
            }
        } throws: { error in
            guard case .backgroundService(let name, let reason) = error as? ServiceRunner.Failure else { return false }
            return name == "failing" && reason.contains("it broke")
        }
        #expect(sibling.hasStopped)
        #expect(ContinuousClock.now - before < .seconds(5), "stopped without waiting for the grace period")
    }

    /// Returning before being asked to stop is a failure too (a schedule that quietly ended).
    @Test func aBackgroundServiceThatEndsEarlyStopsTheService() async throws {
        let scratch = try ScratchDirectory()
        await #expect {
            try await ServiceRunner.run(name: "test", options: try scratch.options()) { _ in
                AppServices(rpc: [], background: [Ending()])
            }
        } throws: { error in
            guard case .backgroundService(let name, let reason) = error as? ServiceRunner.Failure else { return false }
            return name == "ending" && reason == "ended before the service stopped"
        }
    }

    @Test func theDatabaseIsNamedAfterTheServiceUnlessGiven() async throws {
        let scratch = try ScratchDirectory()
        let seen = Mutex<[String]>([])
        for extra in [[], ["--database", "/elsewhere/shared.sqlite"]] {
            _ = try? await ServiceRunner.run(name: "test", options: try scratch.options(extra)) { environment in
                seen.withLock { $0.append(environment.databasePath) }
                throw CancellationError()
            }
        }
        #expect(
            seen.withLock { $0 } == [
                scratch.url.appendingPathComponent("data/test.sqlite").path, "/elsewhere/shared.sqlite",
            ])
    }
}

extension ServiceRunnerTests {
    /// With --cluster the service's database is the dqlite cluster's (here a cluster of one node, this process's),
    /// and it survives a restart: dqlite keeps it in memory and rebuilds it from the node's Raft log on disk.
    @Test func withClusterTheDatabaseIsReplicatedAndOutlivesARestart() async throws {
        let scratch = try ScratchDirectory()
        let address = "127.0.0.1:\(try RawSocket.freePortBlock(count: 1))"
        let migrations = [Migration(1, "items") { try $0.execute("CREATE TABLE items (name TEXT)") }]
        let counts = Mutex<[Int]>([])
        for _ in 0..<2 {
            _ = try? await ServiceRunner.run(
                name: "test", options: try scratch.options(["--cluster", address, "--cluster-bind", address])
            ) { environment in
                #expect(environment.cluster?.node.address == address)
                let database = try environment.openDatabase(migrations: migrations)
                try database.write { try $0.execute("INSERT INTO items (name) VALUES ('lion')") }
                let count = try database.read { try $0.queryOne("SELECT count(*) FROM items")?.int(0) ?? 0 }
                counts.withLock { $0.append(count) }
                throw CancellationError()
            }
        }
        #expect(counts.withLock { $0 } == [1, 2])
        #expect(FileManager.default.fileExists(atPath: scratch.url.appendingPathComponent("data/dqlite").path))
        #expect(!FileManager.default.fileExists(atPath: scratch.url.appendingPathComponent("data/test.sqlite").path))
    }
}

extension ServiceRunnerTests {
    /// A service that never asks for its database through `openDatabase` would keep its data in the file with
    /// `--cluster` given: it refuses to start instead.
    @Test func aServiceThatCannotRunOnAClusterRefusesCluster() async throws {
        let scratch = try ScratchDirectory()
        let address = "127.0.0.1:\(try RawSocket.freePortBlock(count: 1))"
        await #expect {
            try await ServiceRunner.run(
                name: "test", options: try scratch.options(["--cluster", address, "--cluster-bind", address])
            ) {
                environment in
                _ = try Database(path: environment.databasePath, migrations: [])
                return AppServices(rpc: [])
            }
        } throws: { error in
            guard case .startup(let reason) = error as? ServiceRunner.Failure else { return false }
            return reason.contains("cannot run on a dqlite cluster yet")
        }
    }
}

private final class ScratchDirectory: Sendable {
    let url = FileManager.default.temporaryDirectory.appendingPathComponent("ServiceRunnerTests-\(UUID().uuidString)")

    init() throws { try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true) }

    func options(_ extra: [String] = []) throws -> ServiceOptions {
        try ServiceOptions.parse(
            ["--port", "0", "--data-dir", url.appendingPathComponent("data").path, "--log-level", "error"] + extra)
    }

    deinit { try? FileManager.default.removeItem(at: url) }
}

private struct Failing: BackgroundService {
    struct Broke: Error, CustomStringConvertible { var description: String { "it broke" } }
    var name: String { "failing" }
    func run() async throws {
        try await Task.sleep(for: .milliseconds(100))
        throw Broke()
    }
}

private struct Ending: BackgroundService {
    var name: String { "ending" }
    func run() async {}
}

private final class Sibling: BackgroundService {
    private let stopped = Atomic<Bool>(false)
    var hasStopped: Bool { stopped.load(ordering: .acquiring) }
    var name: String { "sibling" }
    func run() async {
        await waitUntilCancelled()
        stopped.store(true, ordering: .releasing)
    }
}
