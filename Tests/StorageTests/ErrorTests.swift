import Foundation
import Storage
import StorageTestSupport
import Testing

@Suite struct ErrorTests {
    private static let schema = Migration(1, "schema") { connection in
        try connection.executeScript(
            """
            CREATE TABLE owners (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);
            CREATE TABLE pets (
                id INTEGER PRIMARY KEY,
                owner INTEGER NOT NULL REFERENCES owners(id),
                legs INTEGER CHECK (legs >= 0)
            );
            INSERT INTO owners (id, name) VALUES (1, 'ada');
            """)
    }

    @Test(arguments: [
        ("INSERT INTO owners (name) VALUES ('ada')", Int32(2067), "UNIQUE"),  // SQLITE_CONSTRAINT_UNIQUE
        ("INSERT INTO pets (owner, legs) VALUES (42, 4)", 787, "FOREIGN KEY"),  // SQLITE_CONSTRAINT_FOREIGNKEY
        ("INSERT INTO owners (name) VALUES (NULL)", 1299, "NOT NULL"),  // SQLITE_CONSTRAINT_NOTNULL
        ("INSERT INTO pets (owner, legs) VALUES (1, -1)", 275, "CHECK"),  // SQLITE_CONSTRAINT_CHECK
        ("INSERT INTO owners (id, name) VALUES (1, 'bob')", 1555, "UNIQUE"),  // SQLITE_CONSTRAINT_PRIMARYKEY
    ])
    func constraintViolationsAreDistinguishable(sql: String, code: Int32, mentions: String) throws {
        let database = try Database.scratch(migrations: [Self.schema])
        let error = #expect(throws: StorageError.self) { try database.write { try $0.execute(sql) } }
        #expect(error?.kind == .constraint)
        #expect(error?.code == code)
        #expect(error?.message.contains(mentions) == true)
        #expect(error?.sql == sql)
        #expect(error?.description.contains(sql) == true)
    }

    @Test func syntaxErrorIsAPrepareError() throws {
        let database = try Database.scratch()
        let error = #expect(throws: StorageError.self) { try database.read { try $0.query("SELEC 1") } }
        #expect(error?.kind == .prepare)
        #expect(error?.code == 1)  // SQLITE_ERROR
        #expect(error?.sql == "SELEC 1")
    }

    @Test func wrongArgumentCountIsMisuse() throws {
        let database = try Database.scratch()
        let error = #expect(throws: StorageError.self) { try database.read { try $0.query("SELECT ?, ?", [1]) } }
        #expect(error?.kind == .misuse)
    }

    @Test func executeTakesExactlyOneStatement() throws {
        let database = try Database.scratch()
        let error = #expect(throws: StorageError.self) {
            try database.write { try $0.execute("CREATE TABLE a (x); CREATE TABLE b (x)") }
        }
        #expect(error?.kind == .misuse)
        let tables = try database.read { try $0.query("SELECT 1; -- a trailing comment is fine") }
        #expect(tables.count == 1)
    }

    @Test(arguments: [5, 100, 4096, 65536])
    func garbageFileIsCorrupt(size: Int) async throws {
        try await withTemporaryDatabasePath { path in
            let garbage = Data((0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) })
            try garbage.write(to: URL(fileURLWithPath: path))
            let error = #expect(throws: StorageError.self) { try Database(path: path, migrations: [itemsMigration]) }
            #expect(error?.kind == .corrupt)
            #expect(error?.code == 26)  // SQLITE_NOTADB
            #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == garbage)
        }
    }

    @Test func unopenablePathIsAnOpenError() async throws {
        try await withTemporaryDatabasePath { path in
            let error = #expect(throws: StorageError.self) {
                try Database(path: path + "/missing-directory/db.sqlite", migrations: [])
            }
            #expect(error?.kind == .open)
            #expect(error?.code == 14)  // SQLITE_CANTOPEN
        }
    }

    @Test func decodingChecksTypesAndColumns() throws {
        let database = try Database.scratch()
        let row = try #require(
            try database.read { try $0.queryOne("SELECT 'lion' AS name, NULL AS age, 3.5 AS weight") })
        #expect(try row.value("name", as: String.self) == "lion")
        #expect(try row.value("age", as: Int?.self) == nil)
        #expect(try row.value("NAME", as: String.self) == "lion")
        #expect(throws: StorageError(.typeMismatch, message: "column \"name\" holds text, not Int")) {
            try row.value("name", as: Int.self)
        }
        #expect((try? row.value("age", as: Int.self)) == nil)
        #expect((try? row.value("weight", as: Int.self)) == nil)  // 3.5 is not an integer
        let missing = #expect(throws: StorageError.self) { try row.value("species", as: String.self) }
        #expect(missing?.kind == .misuse)
        #expect(row["species"] == .null)
    }
}
