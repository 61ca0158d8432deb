import Base
import Dqlite
import Foundation
import Storage
import TestSupport
import Testing

/// `Database` on a real three-node dqlite cluster in this process: the same API as on a file.
@Suite(.serialized) struct ClusterDatabaseTests {
    /// Three nodes on free loopback ports, removed afterwards.
    final class Cluster {
        let addresses: [String]
        let directory: URL
        var replicas: [DqliteReplica?] = []

        init() throws {
            let base = try RawSocket.freePortBlock(count: 3)
            addresses = (0..<3).map { "127.0.0.1:\(base + $0)" }
            directory = FileManager.default.temporaryDirectory.appendingPathComponent(
                "ClusterDatabaseTests-\(UUID().uuidString)")
            for address in addresses {
                replicas.append(
                    try DqliteReplica(
                        addresses: addresses, ownAddress: address,
                        dataDirectory: directory.appendingPathComponent(
                            address.replacingOccurrences(of: ":", with: "_")
                        ).path,
                        database: "test", networkLatency: .milliseconds(10), leaderWait: TestTime.scaled(.seconds(20))))
            }
        }

        func client() throws -> DqliteClient {
            try DqliteClient(
                addresses: addresses, database: "test", callTimeout: TestTime.scaled(.seconds(2)),
                leaderWait: TestTime.scaled(.seconds(20)))
        }

        func stopLeader() throws -> UInt64 {
            let leader = try #require(try client().leader())
            try replicas[Int(leader.id) - 1]?.stop()
            replicas[Int(leader.id) - 1] = nil
            return leader.id
        }

        deinit {
            for replica in replicas { try? replica?.stop() }
            try? FileManager.default.removeItem(at: directory)
        }
    }

    @Test func migrationsRunOncePerClusterWhenReplicasOpenTogether() async throws {
        let cluster = try Cluster()
        let runs = Counter()
        let migrations = [
            Migration(1, "create items") { connection in
                runs.increment()
                try connection.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE)")
            },
            Migration(2, "seed") { try $0.execute("INSERT INTO items (name) VALUES ('lion')") },
        ]
        let clients = try (0..<3).map { _ in try cluster.client() }
        let databases = try await withThrowingTaskGroup(of: Database.self) { group in
            for client in clients { group.addTask { try Database(cluster: client, migrations: migrations) } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(runs.count == 1)
        for database in databases {
            #expect(try itemCount(database) == 1)
            #expect(try await database.read { try $0.queryOne("PRAGMA user_version")?.int(0) } == 2)
        }
    }

    @Test func transactionsConstraintsAndRowsBehaveAsOnAFile() throws {
        let cluster = try Cluster()
        let database = try Database(cluster: try cluster.client(), migrations: [itemsMigration])
        let id = try database.write { connection in
            try connection.execute("INSERT INTO items (name) VALUES (?)", ["lion"])
            #expect(connection.changes == 1)
            return connection.lastInsertRowID
        }
        #expect(id == 1)
        #expect { try database.write { try $0.execute("INSERT INTO items (name) VALUES ('lion')") } } throws: { error in
            (error as? StorageError)?.kind == .constraint
        }
        #expect(throws: TestFailure()) {
            try database.write { connection in
                try connection.execute("INSERT INTO items (name) VALUES ('tiger')")
                throw TestFailure()
            }
        }
        #expect(try itemCount(database) == 1)
        let statementRows = try database.read { connection in
            try connection.prepare("SELECT name FROM items WHERE id = ?").query([id]).map { $0.string("name") }
        }
        #expect(statementRows == ["lion"])
    }

    @Test func readsFollowTheNewLeaderAndWritesResumeAfterIt() throws {
        let cluster = try Cluster()
        let database = try Database(cluster: try cluster.client(), migrations: [itemsMigration])
        try database.write { try $0.execute("INSERT INTO items (name) VALUES ('lion')") }
        let versionBefore = try database.dataVersion
        let stopped = try cluster.stopLeader()
        #expect(try itemCount(database) == 1)  // retried on the new leader
        // The pooled writer session was on the old leader; its BEGIN fails before the closure runs, so the
        // write starts again on the new leader.
        try database.write { try $0.execute("INSERT INTO items (name) VALUES ('tiger')") }
        #expect(try itemCount(database) == 2)
        #expect(try database.dataVersion != versionBefore)
        #expect(try cluster.client().leader()?.id != stopped)
    }

    /// A statement a caller holds (`Connection.prepare`) stays valid while the connection's cache starts over: the
    /// cache finalized it on the leader with the others, and dqlite gave its id to the next statement prepared, so
    /// running it ran another statement (or crashed the node on the empty slot).
    @Test func aHeldStatementOutlivesTheCacheStartingOver() throws {
        let cluster = try Cluster()
        let database = try Database(cluster: try cluster.client(), migrations: [itemsMigration])
        try database.write { connection in
            let insert = try connection.prepare("INSERT INTO items (name) VALUES (?)")
            // More distinct statements than the cache keeps (128): it starts over while `insert` is held.
            for index in 0..<130 { _ = try connection.queryOne("SELECT \(index)") }
            try insert.execute(["lion"])
        }
        #expect(try itemCount(database) == 1)
    }

    @Test func storageErrorsOfALostLeaderAreCategorized() {
        #expect(StorageError(.unavailable, message: "").category == .unavailable)
        #expect(StorageError(.outcomeUnknown, message: "").category == .deadlineExceeded)
    }
}
