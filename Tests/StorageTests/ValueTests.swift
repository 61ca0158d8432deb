import Foundation
import Storage
import StorageTestSupport
import Testing

@Suite struct ValueTests {
    private static let valuesTable = Migration(1, "untyped values") {
        try $0.execute("CREATE TABLE v (id INTEGER PRIMARY KEY, x)")
    }

    private static let samples: [SQLValue] = [
        .null,
        .integer(0), .integer(-1), .integer(Int64.min), .integer(Int64.max),
        .real(3.25), .real(-0.5), .real(1e300), .real(Double.leastNonzeroMagnitude), .real(.infinity),
        .text(""), .text("plain"), .text("héllo wörld"), .text("日本語のテキスト"), .text("👩‍👩‍👧 family"),
        .text("e\u{301} combining"), .text("nul\u{0}inside"),
        .blob([]), .blob([0]), .blob([0, 255, 0, 128]),
    ]

    /// dqlite's wire format ends text at a NUL, so on that backend such text is refused (misuse), never cut.
    static let onDqlite = (try? StorageBackend.configured()) == .dqlite

    @Test func everyValueRoundTrips() throws {
        let database = try Database.scratch(migrations: [Self.valuesTable])
        let large = SQLValue.blob((0..<1_000_000).map { UInt8(truncatingIfNeeded: $0 &* 7) })
        var values = Self.samples + [large]
        if Self.onDqlite {
            values.removeAll { $0 == .text("nul\u{0}inside") }
            let refused = #expect(throws: StorageError.self) {
                try database.write { try $0.execute("INSERT INTO v (x) VALUES (?)", [SQLValue.text("nul\u{0}inside")]) }
            }
            #expect(refused?.kind == .misuse)
        }
        try database.write { connection in
            for value in values { try connection.execute("INSERT INTO v (x) VALUES (?)", [value]) }
        }
        let stored = try database.read { try $0.query("SELECT x FROM v ORDER BY id").map { $0[0] } }
        #expect(stored == values)
    }

    @Test func emptyValuesAreNotNull() throws {
        let database = try Database.scratch()
        let row = try #require(
            try database.read {
                try $0.queryOne(
                    "SELECT typeof(?1), length(?1), typeof(?2), length(?2), typeof(?3)", [[UInt8](), "", nil])
            })
        #expect(row.values == ["blob", 0, "text", 0, "null"])
        #expect(row.blob(0) == nil)  // the row holds the SQL values, not the arguments
    }

    @Test func swiftValuesBindAsExpected() throws {
        let database = try Database.scratch()
        let missing: Int? = nil
        let present: String? = "here"
        let row = try #require(
            try database.read {
                try $0.queryOne(
                    "SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?",
                    [true, false, 42, Int64.min, Int64.max, Int32.max, 2.5, "text", [UInt8]([1, 2]), missing, present])
            })
        #expect(
            row.values == [
                1, 0, 42, .integer(.min), .integer(.max), 2_147_483_647, 2.5, "text", .blob([1, 2]), nil, "here",
            ])
        #expect(row.bool(0) == true)
        #expect(row.bool(1) == false)
        #expect(row.int(2) == 42)
        #expect(row.int64(3) == Int64.min)
        #expect(row.int64(4) == Int64.max)
        #expect(row.double(6) == 2.5)
        #expect(row.string(7) == "text")
        #expect(row.blob(8) == [1, 2])
        #expect(row.int(9) == nil)
        #expect(row.string(10) == "here")
    }

    @Test func int64ExtremesSurviveArithmeticInSQL() throws {
        let database = try Database.scratch()
        let row = try #require(try database.read { try $0.queryOne("SELECT ? + 0, ? - 0", [Int64.max, Int64.min]) })
        #expect(row.int64(0) == Int64.max)
        #expect(row.int64(1) == Int64.min)
    }

    @Test func decodingConversions() {
        #expect(Int(sqlValue: .real(3)) == 3)
        #expect(Int(sqlValue: .real(3.5)) == nil)
        #expect(Int32(sqlValue: .integer(Int64(Int32.max) + 1)) == nil)
        #expect(Double(sqlValue: .integer(2)) == 2)
        #expect(Bool(sqlValue: .integer(7)) == true)
        #expect(Bool(sqlValue: .text("true")) == nil)
        #expect(String(sqlValue: .blob([65])) == nil)
        #expect([UInt8](sqlValue: .text("A")) == nil)
        #expect(Int?(sqlValue: .null) == .some(nil))
        #expect(Int?(sqlValue: .text("x")) == nil)
    }

    @Test func rowLooksUpColumnsByName() throws {
        let database = try Database.scratch()
        let row = try #require(try database.read { try $0.queryOne("SELECT 1 AS id, 'x' AS Name") })
        #expect(row.columnNames == ["id", "Name"])
        #expect(row["Name"] == "x")
        #expect(row["name"] == "x")
        #expect(row.int("id") == 1)
        #expect(row["nope"] == .null)
    }
}
