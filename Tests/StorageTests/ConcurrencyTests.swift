import Foundation
import Storage
import StorageTestSupport
import TestSupport
import Testing

@Suite struct ConcurrencyTests {
    private static let accounts = Migration(1, "accounts") { connection in
        try connection.execute("CREATE TABLE accounts (id INTEGER PRIMARY KEY, balance INTEGER NOT NULL)")
        try connection.execute("CREATE TABLE transfers (id INTEGER PRIMARY KEY, amount INTEGER NOT NULL)")
        for id in 1...10 { try connection.execute("INSERT INTO accounts (id, balance) VALUES (?, 100)", [id]) }
    }

    /// Many tasks read while others transfer money: every read sees a consistent total.
    @Test(arguments: [false, true])
    func concurrentReadersAndWriters(inMemory: Bool) async throws {
        try await withTemporaryDatabasePath { path in
            let database =
                inMemory
                ? try Database.scratch(migrations: [Self.accounts])
                : try Database(path: path, migrations: [Self.accounts], readers: 3)
            let totals = try await withThrowingTaskGroup(of: [Int].self) { group in
                for writer in 0..<4 {
                    group.addTask {
                        for step in 0..<50 {
                            try database.write { connection in
                                let from = (writer + step) % 10 + 1
                                let to = (writer * 3 + step) % 10 + 1
                                let amount = step % 7 + 1
                                try connection.execute(
                                    "UPDATE accounts SET balance = balance - ? WHERE id = ?", [amount, from])
                                try connection.execute(
                                    "UPDATE accounts SET balance = balance + ? WHERE id = ?", [amount, to])
                                try connection.execute("INSERT INTO transfers (amount) VALUES (?)", [amount])
                            }
                        }
                        return []
                    }
                }
                for _ in 0..<12 {
                    group.addTask {
                        try (0..<50).map { _ in
                            try database.read { connection in
                                let first = try connection.queryOne("SELECT sum(balance) FROM accounts")?.int(0) ?? 0
                                let rows = try connection.query("SELECT balance FROM accounts")
                                return first + rows.compactMap { $0.int(0) }.reduce(0, +)
                            }
                        }
                    }
                }
                return try await group.reduce(into: []) { $0 += $1 }
            }
            #expect(totals.count == 600)
            #expect(totals.allSatisfy { $0 == 2000 })
            let transfers = try await database.read { try $0.queryOne("SELECT count(*) FROM transfers")?.int(0) }
            #expect(transfers == 200)
        }
    }

    /// Two `Database` instances on one file behave like two replicas of a service.
    @Test func replicasSeeEachOthersCommitsAndDataVersion() async throws {
        try await withTemporaryDatabasePath { path in
            let first = try Database(path: path, migrations: [itemsMigration])
            let second = try Database(path: path, migrations: [itemsMigration])
            let firstBefore = try first.dataVersion
            let secondBefore = try second.dataVersion
            _ = try second.read { try $0.query("SELECT * FROM items") }
            #expect(try second.dataVersion == secondBefore)  // reads change nothing

            try first.write { try $0.execute("INSERT INTO items (name) VALUES ('from first')") }
            #expect(try second.dataVersion != secondBefore)
            #expect(try first.dataVersion != firstBefore)  // its own commits count too
            let seen = try second.read { try $0.queryOne("SELECT name FROM items")?.string(0) }
            #expect(seen == "from first")

            let secondAfter = try second.dataVersion
            try second.write { try $0.execute("INSERT INTO items (name) VALUES ('from second')") }
            #expect(try itemCount(first) == 2)
            #expect(try second.dataVersion != secondAfter)
        }
    }

    @Test func inMemoryDataVersionMovesOnCommit() throws {
        let database = try Database.scratch(migrations: [itemsMigration])
        let before = try database.dataVersion
        #expect(try database.dataVersion == before)
        try database.write { try $0.execute("INSERT INTO items (name) VALUES ('x')") }
        #expect(try database.dataVersion != before)
    }

    /// Another replica holding the write lock past the busy timeout gives `.busy`, quickly and cleanly.
    @Test func writerBlockedPastTheTimeoutGetsBusy() async throws {
        try await withTemporaryDatabasePath { path in
            let holder = try Database(path: path, migrations: [itemsMigration])
            let impatient = try Database(path: path, migrations: [itemsMigration], busyTimeout: .milliseconds(100))
            let clock = ContinuousClock()
            let (error, waited) = try holder.write { connection in
                try connection.execute("INSERT INTO items (name) VALUES ('held')")
                let start = clock.now
                let error = #expect(throws: StorageError.self) {
                    try impatient.write { try $0.execute("INSERT INTO items (name) VALUES ('blocked')") }
                }
                return (error, clock.now - start)
            }
            #expect(error?.kind == .busy)
            #expect(error?.code == 5)  // SQLITE_BUSY
            #expect(waited >= .milliseconds(90))
            #expect(waited < TestTime.scaled(.seconds(3)))
            #expect(try itemCount(impatient) == 1)
            try impatient.write { try $0.execute("INSERT INTO items (name) VALUES ('later')") }
            #expect(try itemCount(holder) == 2)
        }
    }

    /// Within the busy timeout a writer waits for the other replica to commit, then succeeds.
    @Test func writerWaitsForAnotherReplicaWithinTheTimeout() async throws {
        try await withTemporaryDatabasePath { path in
            let holder = try Database(path: path, migrations: [itemsMigration])
            let patient = try Database(
                path: path, migrations: [itemsMigration], busyTimeout: TestTime.scaled(.seconds(10)))
            let holding = DispatchSemaphore(value: 0)
            let finished = DispatchSemaphore(value: 0)
            let holderThread = Thread {
                try? holder.write { connection in
                    try connection.execute("INSERT INTO items (name) VALUES ('first')")
                    holding.signal()
                    Thread.sleep(forTimeInterval: 0.3)
                }
                finished.signal()
            }
            holderThread.start()
            holding.wait()
            let order = try patient.write { connection in
                try connection.execute("INSERT INTO items (name) VALUES ('second')")
                return try connection.query("SELECT name FROM items ORDER BY id").compactMap { $0.string(0) }
            }
            finished.wait()
            #expect(order == ["first", "second"])
        }
    }
}
