import Dqlite
import Foundation
import Storage
import TestSupport
import Testing

/// The real `gateway cluster` commands against a real three-node dqlite cluster in this process: import, backup,
/// restore and membership, and the clear refusals of bad input (exit codes as the gateway's table says).
@Suite(.serialized) struct ClusterCommandsTests {
    final class Cluster {
        let addresses: [String]
        let spareAddress: String
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "ClusterCommandsTests-\(UUID().uuidString)")
        var replicas: [DqliteReplica] = []
        var spare: DqliteNode?

        init() throws {
            let base = try RawSocket.freePortBlock(count: 4)
            addresses = (0..<3).map { "127.0.0.1:\(base + $0)" }
            spareAddress = "127.0.0.1:\(base + 3)"
            for (index, address) in addresses.enumerated() {
                replicas.append(
                    try DqliteReplica(
                        addresses: addresses, ownAddress: address,
                        dataDirectory: directory.appendingPathComponent("node\(index + 1)").path,
                        database: "health", networkLatency: .milliseconds(10), leaderWait: TestTime.scaled(.seconds(20))
                    ))
            }
        }

        var list: String { addresses.joined(separator: ",") }

        func gateway(_ arguments: [String]) async throws -> (status: Int32, output: String) {
            try await Stack.run(
                "\(Stack.binDirectory)/gateway", ["cluster"] + arguments,
                environment: ProcessInfo.processInfo.environment)
        }

        deinit {
            try? spare?.stop()
            for replica in replicas { try? replica.stop() }
            try? FileManager.default.removeItem(at: directory)
        }
    }

    static let schema = [
        Migration(1, "samples") { connection in
            try connection.executeScript(
                """
                CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);
                CREATE TABLE samples (user_id INTEGER NOT NULL REFERENCES users (id), value REAL NOT NULL, start_ms INTEGER NOT NULL);
                CREATE INDEX samples_by_time ON samples (user_id, start_ms);
                """)
        }
    ]

    static func makeFile(_ path: String, samples: Int) throws {
        let database = try Database(path: path, migrations: schema)
        try database.write { connection in
            try connection.execute("INSERT INTO users (name) VALUES ('jana')")
            for index in 0..<samples {
                try connection.execute("INSERT INTO samples VALUES (1, ?, ?)", [Double(index), Int64(index) * 60_000])
            }
        }
    }

    static func sampleCount(_ path: String) throws -> Int {
        try Database.inspectReadOnly(fileAt: path) { try $0.queryOne("SELECT count(*) FROM samples")?.int(0) ?? -1 }
    }

    @Test func importBackupAndRestoreThroughTheGateway() async throws {
        let cluster = try Cluster()
        let file = cluster.directory.appendingPathComponent("health.sqlite").path
        try Self.makeFile(file, samples: 1000)

        let imported = try await cluster.gateway(["import", "health", file, "--cluster", cluster.list])
        #expect(imported.status == 0, "\(imported.output)")
        #expect(
            imported.output.contains("samples: 1000 rows")
                && imported.output.contains("imported 1001 rows in 2 tables"), "\(imported.output)")

        let again = try await cluster.gateway(["import", "health", file, "--cluster", cluster.list])
        #expect(
            again.status == 9 && again.output.contains("holds data") && again.output.contains("--replace"),
            "\(again.output)")

        let backup = cluster.directory.appendingPathComponent("backup.sqlite").path
        let backedUp = try await cluster.gateway(["backup", "health", backup, "--cluster", cluster.list, "--json"])
        #expect(backedUp.status == 0 && backedUp.output.contains("\"rows\": 1001"), "\(backedUp.output)")
        #expect(try Self.sampleCount(backup) == 1000)
        let overwrite = try await cluster.gateway(["backup", "health", backup, "--cluster", cluster.list])
        #expect(overwrite.status == 6 && overwrite.output.contains("exists"), "\(overwrite.output)")

        // Rows written after the backup are gone after the restore.
        let session = try cluster.replicas[0].client.connect()
        try session.execute("INSERT INTO samples VALUES (1, 1, 1)")
        session.close()
        let refused = try await cluster.gateway(["restore", "health", backup, "--cluster", cluster.list])
        #expect(refused.status == 9, "\(refused.output)")
        let restored = try await cluster.gateway(["restore", "health", backup, "--cluster", cluster.list, "--replace"])
        #expect(restored.status == 0 && restored.output.contains("restored 1001 rows"), "\(restored.output)")
        let count = try cluster.replicas[1].client.retryingRead { session throws(DqliteError) in
            try session.query("SELECT count(*) FROM samples")
        }
        #expect(count.rows == [[.integer(1000)]])
    }

    @Test func membersAddAndRemove() async throws {
        let cluster = try Cluster()
        let members = try await cluster.gateway(["members", "health", "--cluster", cluster.list])
        #expect(
            members.status == 0 && members.output.contains("voter") && members.output.contains("*"), "\(members.output)"
        )
        #expect(cluster.addresses.allSatisfy { members.output.contains($0) }, "\(members.output)")

        let spare = try DqliteNode(
            id: 4, address: cluster.spareAddress, dataDirectory: cluster.directory.appendingPathComponent("node4").path,
            networkLatency: .milliseconds(10))
        try spare.start()
        cluster.spare = spare
        let added = try await cluster.gateway(["add", "health", "4", cluster.spareAddress, "--cluster", cluster.list])
        #expect(added.status == 0, "\(added.output)")
        let four = try await cluster.gateway(["members", "health", "--cluster", cluster.list, "--json"])
        #expect(
            four.status == 0 && four.output.contains("\"id\": 4") && four.output.contains(cluster.spareAddress),
            "\(four.output)")

        let leader = try #require(try cluster.replicas[0].client.leader())
        let removed = try await cluster.gateway(["remove", "health", leader.address, "--cluster", cluster.list])
        #expect(removed.status == 0 && removed.output.contains("node \(leader.id)"), "\(removed.output)")
        let after = try cluster.replicas[0].client.members().map(\.id).sorted()
        #expect(after == [1, 2, 3, 4].filter { $0 != leader.id })
        let noMember = try await cluster.gateway(["remove", "health", leader.address, "--cluster", cluster.list])
        #expect(noMember.status == 0 && noMember.output.contains("nothing to do"), "\(noMember.output)")
    }

    @Test func badInputIsRefusedWithAClearError() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "ClusterCommandsTests-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        func gateway(_ arguments: [String]) async throws -> (status: Int32, output: String) {
            try await Stack.run("\(Stack.binDirectory)/gateway", ["cluster"] + arguments, environment: [:])
        }
        let text = directory.appendingPathComponent("notes.txt").path
        try Data("not a database".utf8).write(to: URL(fileURLWithPath: text))
        let empty = directory.appendingPathComponent("empty.sqlite").path
        _ = try Database(path: empty, migrations: [])
        let valid = directory.appendingPathComponent("valid.sqlite").path
        try Self.makeFile(valid, samples: 1)

        let badAddress = try await gateway(["import", "health", valid, "--cluster", "127.0.0.1:8000,nowhere"])
        #expect(badAddress.status == 3 && badAddress.output.contains("host:port"), "\(badAddress.output)")
        let badPort = try await gateway(["members", "health", "--cluster", "127.0.0.1:70000"])
        #expect(badPort.status == 3, "\(badPort.output)")
        let noCluster = try await gateway(["members", "health"])
        #expect(noCluster.status == 3 && noCluster.output.contains("--cluster"), "\(noCluster.output)")
        let badService = try await gateway(["members", "Health!", "--cluster", "127.0.0.1:1"])
        #expect(badService.status == 3, "\(badService.output)")
        let missing = try await gateway([
            "import", "health", directory.appendingPathComponent("nope.sqlite").path, "--cluster", "127.0.0.1:1",
        ])
        #expect(missing.status == 66 && missing.output.contains("no such file"), "\(missing.output)")
        let notDatabase = try await gateway(["import", "health", text, "--cluster", "127.0.0.1:1"])
        #expect(
            notDatabase.status == 3 && notDatabase.output.contains("not an SQLite database"), "\(notDatabase.output)")
        let notMenagerie = try await gateway(["import", "health", empty, "--cluster", "127.0.0.1:1"])
        #expect(
            notMenagerie.status == 9 && notMenagerie.output.contains("not a Menagerie database"),
            "\(notMenagerie.output)")
        let unreachable = try await gateway(["import", "health", valid, "--cluster", "127.0.0.1:1", "--timeout", "1"])
        #expect(unreachable.status == 14 && unreachable.output.contains("no leader"), "\(unreachable.output)")
        let noDirectory = try await gateway([
            "backup", "health", "/nonexistent/dir/b.sqlite", "--cluster", "127.0.0.1:1",
        ])
        #expect(noDirectory.status == 73, "\(noDirectory.output)")
    }
}
