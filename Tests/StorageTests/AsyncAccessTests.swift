import Foundation
import Storage
import StorageTestSupport
import Synchronization
import TestSupport
import Testing
import WorkLane

/// `try await read { }` / `write { }`: the same transactions as the synchronous API, on the database's own
/// threads.
@Suite struct AsyncAccessTests {
    @Test func writesAndReadsOffTheCallersThread() async throws {
        try await withTemporaryDatabasePath { path in
            let database = try Database(path: path, migrations: [itemsMigration], readers: 2)
            let writerThread = try await database.write { connection -> String in
                try connection.execute("INSERT INTO items (name) VALUES (?)", ["lion"])
                return WorkLane.currentPoolName ?? ""
            }
            let (count, readerThread) = try await database.read { connection in
                (try connection.queryOne("SELECT count(*) FROM items")?.int(0), WorkLane.currentPoolName ?? "")
            }
            #expect(count == 1)
            #expect(writerThread == "storage-writer")
            #expect(readerThread == "storage-reader")
        }
    }

    /// Many tasks at once: every write commits, every read sees a consistent total, and none of it runs on
    /// the cooperative pool (which has only a couple of threads here and would otherwise be starved).
    @Test func concurrentTasks() async throws {
        try await withTemporaryDatabasePath { path in
            let database = try Database(path: path, migrations: [Self.accounts], readers: 3)
            let totals = try await withThrowingTaskGroup(of: Int?.self) { group in
                for step in 0..<100 {
                    group.addTask {
                        try await database.write { connection in
                            let from = step % 10 + 1, to = (step * 3 + 1) % 10 + 1
                            try connection.execute("UPDATE accounts SET balance = balance - 5 WHERE id = ?", [from])
                            try connection.execute("UPDATE accounts SET balance = balance + 5 WHERE id = ?", [to])
                        }
                        return nil
                    }
                    group.addTask {
                        try await database.read { try $0.queryOne("SELECT sum(balance) FROM accounts")?.int(0) }
                    }
                }
                return try await group.reduce(into: [Int]()) { if let total = $1 { $0.append(total) } }
            }
            #expect(totals.count == 100)
            #expect(totals.allSatisfy { $0 == 1000 })
        }
    }

    @Test func anErrorRollsTheWriteBack() async throws {
        let database = try Database.scratch(migrations: [itemsMigration])
        await #expect(throws: TestFailure.self) {
            try await database.write { connection in
                try connection.execute("INSERT INTO items (name) VALUES ('lion')")
                throw TestFailure()
            }
        }
        await #expect(throws: StorageError.self) {
            try await database.write { connection in
                try connection.execute("INSERT INTO items (name) VALUES ('tiger')")
                try connection.execute("INSERT INTO items (name) VALUES ('tiger')")  // UNIQUE
            }
        }
        #expect(try await database.read { try $0.queryOne("SELECT count(*) FROM items")?.int(0) } == 0)
    }

    /// A write cancelled while it waits for the writer thread never runs.
    @Test func aCancelledQueuedWriteNeverRuns() async throws {
        try await withTemporaryDatabasePath { path in
            let database = try Database(path: path, migrations: [itemsMigration])
            let holding = Gate(), release = Gate()
            let holder = Task {
                try await database.write { _ in
                    holding.open()
                    release.wait()
                }
            }
            await holding.opened()
            let ran = Mutex(false)
            let queued = Task {
                try await database.write { connection in
                    ran.withLock { $0 = true }
                    try connection.execute("INSERT INTO items (name) VALUES ('lion')")
                }
            }
            try await Task.sleep(for: .milliseconds(50))
            queued.cancel()
            await #expect(throws: CancellationError.self) { try await queued.value }
            release.open()
            try await holder.value
            #expect(try await database.read { try $0.queryOne("SELECT count(*) FROM items")?.int(0) } == 0)
            #expect(!ran.withLock { $0 })
        }
    }

    /// A write cancelled while its closure runs is rolled back: a cancelled write never commits.
    @Test func aWriteCancelledWhileRunningRollsBack() async throws {
        try await withTemporaryDatabasePath { path in
            let database = try Database(path: path, migrations: [itemsMigration])
            let inside = Gate(), proceed = Gate()
            let write = Task {
                try await database.write { connection in
                    try connection.execute("INSERT INTO items (name) VALUES ('lion')")
                    inside.open()
                    proceed.wait()
                }
            }
            await inside.opened()
            write.cancel()
            proceed.open()
            await #expect(throws: CancellationError.self) { try await write.value }
            #expect(try await database.read { try $0.queryOne("SELECT count(*) FROM items")?.int(0) } == 0)
            // The writer is free and the database usable afterwards.
            try await database.write { try $0.execute("INSERT INTO items (name) VALUES ('tiger')") }
            #expect(try await database.read { try $0.queryOne("SELECT count(*) FROM items")?.int(0) } == 1)
        }
    }

    /// Nesting is still caught on the database's threads.
    @Test func nestedAccessIsMisuse() async throws {
        let database = try Database.scratch(migrations: [itemsMigration])
        await #expect(throws: StorageError.self) {
            try await database.write { _ in try database.read { _ in 1 } }
        }
    }

    /// A migration track of its own: versions counted apart from `user_version`, applied once.
    @Test func namedMigrationTracks() async throws {
        try await withTemporaryDatabasePath { path in
            let database = try Database(path: path, migrations: [itemsMigration])
            let applied = Counter()
            let track = [
                Migration(1, "extra") { connection in
                    applied.increment()
                    try connection.execute("CREATE TABLE extra (id INTEGER PRIMARY KEY)")
                }
            ]
            try database.migrate(track, track: "extra")
            try database.migrate(track, track: "extra")
            let other = try Database(path: path, migrations: [itemsMigration])
            try other.migrate(track, track: "extra")
            #expect(applied.count == 1)
            #expect(try await database.read { try $0.queryOne("PRAGMA user_version")?.int(0) } == 1)
            let newer = [Migration(1, "extra") { _ in }, Migration(2, "more") { _ in }]
            try database.migrate(newer, track: "extra")
            #expect(throws: StorageError.self) {
                try database.migrate([Migration(1, "extra") { _ in }], track: "extra")
            }
        }
    }

    private static let accounts = Migration(1, "accounts") { connection in
        try connection.execute("CREATE TABLE accounts (id INTEGER PRIMARY KEY, balance INTEGER NOT NULL)")
        for id in 1...10 { try connection.execute("INSERT INTO accounts (id, balance) VALUES (?, 100)", [id]) }
    }
}
