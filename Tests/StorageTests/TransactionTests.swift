import Storage
import StorageTestSupport
import Testing

@Suite struct TransactionTests {
    @Test func writeCommitsAndReturnsItsResult() throws {
        let database = try Database.scratch(migrations: [itemsMigration])
        let id = try database.write { connection in
            try connection.execute("INSERT INTO items (name) VALUES (?)", ["lion"])
            #expect(connection.changes == 1)
            return connection.lastInsertRowID
        }
        let name = try database.read { try $0.queryOne("SELECT name FROM items WHERE id = ?", [id])?.string("name") }
        #expect(name == "lion")
    }

    @Test func thrownErrorRollsBackAndIsRethrownUnchanged() throws {
        let database = try Database.scratch(migrations: [itemsMigration])
        #expect(throws: TestFailure()) {
            try database.write { connection in
                try connection.execute("INSERT INTO items (name) VALUES ('lion')")
                try connection.execute("INSERT INTO items (name) VALUES ('tiger')")
                throw TestFailure()
            }
        }
        #expect(try itemCount(database) == 0)
    }

    @Test func failingStatementRollsBackEarlierOnes() async throws {
        try await withTemporaryDatabasePath { path in
            let database = try Database(path: path, migrations: [itemsMigration])
            let error = #expect(throws: StorageError.self) {
                try database.write { connection in
                    try connection.execute("INSERT INTO items (name) VALUES ('lion')")
                    try connection.execute("INSERT INTO items (name) VALUES ('lion')")
                }
            }
            #expect(error?.kind == .constraint)
            #expect(try itemCount(database) == 0)
            // The writer is usable again afterwards.
            try database.write { try $0.execute("INSERT INTO items (name) VALUES ('lion')") }
            #expect(try itemCount(database) == 1)
        }
    }

    @Test func nestedAccessIsMisuseNotDeadlock() throws {
        let database = try Database.scratch(migrations: [itemsMigration])
        let kinds = try database.write { connection -> [StorageError.Kind?] in
            try connection.execute("INSERT INTO items (name) VALUES ('outer')")
            let nestedWrite = #expect(throws: StorageError.self) { try database.write { _ in } }
            let nestedRead = #expect(throws: StorageError.self) { try database.read { _ in } }
            return [nestedWrite?.kind, nestedRead?.kind]
        }
        #expect(kinds == [.misuse, .misuse])
        let writeInRead = #expect(throws: StorageError.self) {
            try database.read { _ in try database.write { _ in } }
        }
        #expect(writeInRead?.kind == .misuse)
        // The outer write committed and the database is still usable.
        #expect(try itemCount(database) == 1)
    }

    @Test func endingTheTransactionInsideTheClosureIsMisuse() throws {
        let database = try Database.scratch(migrations: [itemsMigration])
        let error = #expect(throws: StorageError.self) { try database.write { try $0.execute("COMMIT") } }
        #expect(error?.kind == .misuse)
        try database.write { try $0.execute("INSERT INTO items (name) VALUES ('after')") }
        #expect(try itemCount(database) == 1)
    }

    @Test func readTransactionsCannotWrite() throws {
        let database = try Database.scratch(migrations: [itemsMigration])
        let error = #expect(throws: StorageError.self) {
            try database.read { try $0.execute("INSERT INTO items (name) VALUES ('sneaky')") }
        }
        #expect(error?.code == 8)  // SQLITE_READONLY
        #expect(try itemCount(database) == 0)
    }

    @Test func connectionAndStatementAreUnusableAfterTheirClosure() throws {
        let database = try Database.scratch(migrations: [itemsMigration])
        let connection = try database.read { $0 }
        let statement = try database.read { try $0.prepare("SELECT count(*) FROM items") }
        #expect(throws: StorageError.self) { try connection.query("SELECT 1") }
        let error = #expect(throws: StorageError.self) { try statement.query() }
        #expect(error?.kind == .misuse)
    }

    /// A read sees one snapshot even when another replica commits in the middle of it.
    @Test func readSeesOneSnapshot() async throws {
        try await withTemporaryDatabasePath { path in
            let database = try Database(path: path, migrations: [itemsMigration])
            let replica = try Database(path: path, migrations: [itemsMigration])
            let (before, during) = try database.read { connection in
                let before = try connection.queryOne("SELECT count(*) FROM items")?.int(0)
                try replica.write { try $0.execute("INSERT INTO items (name) VALUES ('late')") }
                return (before, try connection.queryOne("SELECT count(*) FROM items")?.int(0))
            }
            #expect(before == 0)
            #expect(during == 0)
            #expect(try itemCount(database) == 1)
        }
    }

    @Test func preparedStatementIsReusedInALoop() throws {
        let database = try Database.scratch(migrations: [itemsMigration])
        try database.write { connection in
            let insert = try connection.prepare("INSERT INTO items (name) VALUES (?)")
            for index in 0..<1000 { try insert.execute(["item \(index)"]) }
            #expect(try connection.prepare("INSERT INTO items (name) VALUES (?)").sql == insert.sql)
        }
        let names = try database.read { connection in
            let lookup = try connection.prepare("SELECT name FROM items WHERE id = ?")
            return try [1, 500, 1000].map { try lookup.queryOne([$0])?.string(0) }
        }
        #expect(names == ["item 0", "item 499", "item 999"])
        #expect(try itemCount(database) == 1000)
    }

    @Test func queryOneReturnsNilWithoutRows() throws {
        let database = try Database.scratch(migrations: [itemsMigration])
        let row = try database.read { try $0.queryOne("SELECT * FROM items") }
        #expect(row == nil)
    }

    @Test func executeScriptRunsSeveralStatements() throws {
        let database = try Database.scratch()
        try database.write { try $0.executeScript("CREATE TABLE a (x); CREATE TABLE b (y); INSERT INTO a VALUES (1);") }
        let count = try database.read { try $0.queryOne("SELECT count(*) FROM a, sqlite_master")?.int(0) }
        #expect(count == 2)
    }

    @Test func inMemoryDatabasesAreIndependent() throws {
        let first = try Database.scratch(migrations: [itemsMigration])
        let second = try Database.scratch(migrations: [itemsMigration])
        try first.write { try $0.execute("INSERT INTO items (name) VALUES ('only here')") }
        #expect(try itemCount(first) == 1)
        #expect(try itemCount(second) == 0)
    }
}
