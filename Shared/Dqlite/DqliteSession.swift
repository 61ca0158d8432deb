/// A connection to the cluster's leader with one database open: statements run there, in order, one at a time.
/// Transactions (`BEGIN … COMMIT`) live on a session: run them all through the same one.
///
/// Not thread-safe; one thread uses a session at a time. After any `.notCommitted`, `.outcomeUnknown` or
/// `.noLeader` error the session is broken (`isBroken`): take a new one from the client.
public final class DqliteSession {
    private let connection: WireConnection
    private let databaseID: UInt32
    /// The leader this session talks to.
    public var leaderAddress: String { connection.address }
    /// Also once a call of another session on the same node went unanswered: this one would wait out its timeout.
    public var isBroken: Bool { connection.isBroken || connection.silence?.contains(connection.address) == true }

    /// A statement compiled on the leader, valid on the session that prepared it.
    public struct Prepared: Sendable, Hashable {
        let id: UInt32
        public let parameterCount: Int
    }

    init(connection: WireConnection, database: String) throws(DqliteError) {
        self.connection = connection
        var request = WireEncoder()
        request.string(database)
        request.uint64(0)  // flags: dqlite opens read-write, creating
        request.string("volatile")
        var response = try Self.call(
            connection, request.message(type: WireType.open), expecting: WireType.db, mayCommit: false)
        databaseID = try response.uint32()
    }

    public func close() { connection.close() }

    /// Runs one or more `;`-separated statements for their effect; the counts are the last statement's.
    ///
    /// `mayCommit` says whether the statement can commit (a COMMIT, or a write outside a transaction): when the
    /// leader is lost after such a statement was sent, the error is `.outcomeUnknown`; for a statement inside a
    /// transaction (`mayCommit: false`) it is `.notCommitted`, since losing the leader aborts the transaction.
    @discardableResult
    public func execute(_ sql: String, _ parameters: [DqliteValue] = [], mayCommit: Bool = true) throws(DqliteError)
        -> DqliteExecResult
    {
        var request = WireEncoder()
        request.uint64(UInt64(databaseID))
        request.string(sql)
        try request.parameters(parameters)
        return try result(of: request.message(type: WireType.execSQL), mayCommit: mayCommit)
    }

    /// Runs one statement and returns all its rows. Reads never commit, so a lost leader is `.notCommitted`.
    public func query(_ sql: String, _ parameters: [DqliteValue] = []) throws(DqliteError) -> DqliteRows {
        var request = WireEncoder()
        request.uint64(UInt64(databaseID))
        request.string(sql)
        try request.parameters(parameters)
        return try rows(of: request.message(type: WireType.querySQL))
    }

    /// Compiles one statement on the leader for repeated runs.
    public func prepare(_ sql: String) throws(DqliteError) -> Prepared {
        var request = WireEncoder()
        request.uint64(UInt64(databaseID))
        request.string(sql)
        var response = try Self.call(
            connection, request.message(type: WireType.prepare), expecting: WireType.stmt, mayCommit: false)
        _ = try response.uint32()  // the database id
        let id = try response.uint32()
        let count = try response.uint64()
        return Prepared(id: id, parameterCount: Int(count))
    }

    @discardableResult
    public func execute(_ statement: Prepared, _ parameters: [DqliteValue] = [], mayCommit: Bool = true)
        throws(DqliteError)
        -> DqliteExecResult
    {
        try result(of: statementRequest(WireType.exec, statement, parameters), mayCommit: mayCommit)
    }

    public func query(_ statement: Prepared, _ parameters: [DqliteValue] = []) throws(DqliteError) -> DqliteRows {
        try rows(of: statementRequest(WireType.query, statement, parameters))
    }

    public func finalize(_ statement: Prepared) throws(DqliteError) {
        var request = WireEncoder()
        request.uint32(databaseID)
        request.uint32(statement.id)
        _ = try Self.call(
            connection, request.message(type: WireType.finalize), expecting: WireType.empty, mayCommit: false)
    }

    private func statementRequest(_ type: UInt8, _ statement: Prepared, _ parameters: [DqliteValue]) throws(DqliteError)
        -> [UInt8]
    {
        guard parameters.count == statement.parameterCount else {
            throw DqliteError(
                .misuse, "the statement takes \(statement.parameterCount) parameters, \(parameters.count) given")
        }
        var request = WireEncoder()
        request.uint32(databaseID)
        request.uint32(statement.id)
        try request.parameters(parameters)
        return request.message(type: type)
    }

    private func result(of request: [UInt8], mayCommit: Bool) throws(DqliteError) -> DqliteExecResult {
        var response = try Self.call(connection, request, expecting: WireType.result, mayCommit: mayCommit)
        let lastInsertID = try response.int64()
        let rowsAffected = try response.uint64()
        return DqliteExecResult(lastInsertID: lastInsertID, rowsAffected: Int(clamping: rowsAffected))
    }

    /// Reads a ROWS answer and every further part of it. Each row starts with a header of 4-bit column types,
    /// padded to a word; a header whose first byte is 0xee ends a part (more follow in the next message, which
    /// repeats the column names), 0xff ends the rows.
    private func rows(of request: [UInt8]) throws(DqliteError) -> DqliteRows {
        var response = try Self.call(connection, request, expecting: WireType.rows, mayCommit: false)
        var rows: [[DqliteValue]] = []
        var columns: [String] = []
        while true {
            let count = try response.uint64()
            guard count <= 32_768 else { throw DqliteError(.protocolViolation, "a result of \(count) columns") }
            columns = []
            for _ in 0..<count { columns.append(try response.string()) }
            let headerSize = (Int(count) * 4 + 63) / 64 * wordSize
            // Rows until 0xff (the end: the only way out) or 0xee (more follow in the next response).
            while true {
                let marker = try response.peekUInt8()
                if marker == 0xff { return DqliteRows(columns: columns, rows: rows) }
                if marker == 0xee { break }
                guard count > 0 else { throw DqliteError(.protocolViolation, "a row without columns") }
                var types: [UInt8] = []
                for _ in 0..<headerSize {
                    let byte = try response.uint8()
                    types.append(byte & 0x0f)
                    types.append(byte >> 4)
                }
                var row: [DqliteValue] = []
                row.reserveCapacity(Int(count))
                for column in 0..<Int(count) { row.append(try Self.value(of: types[column], from: &response)) }
                rows.append(row)
            }
            response = try Self.receive(connection, expecting: WireType.rows)
        }
    }

    private static func value(of type: UInt8, from response: inout WireDecoder) throws(DqliteError) -> DqliteValue {
        switch type {
        case WireValueType.integer, WireValueType.unixTime, WireValueType.boolean: return .integer(try response.int64())
        case WireValueType.float: return .real(try response.double())
        case WireValueType.text, WireValueType.iso8601: return .text(try response.string())
        case WireValueType.blob: return .blob(try response.blob())
        case WireValueType.null:
            _ = try response.uint64()
            return .null
        default: throw DqliteError(.protocolViolation, "a column of unknown type \(type)")
        }
    }

    static func receive(_ connection: WireConnection, expecting type: UInt8) throws(DqliteError) -> WireDecoder {
        do {
            return try check(connection.receive(), expecting: type)
        } catch {
            throw translate(error, connection: connection, mayCommit: false)
        }
    }

    /// Sends `request` and returns the response of `type`, with failures translated into what they mean for the
    /// caller's data (see `execute`'s `mayCommit`).
    static func call(_ connection: WireConnection, _ request: [UInt8], expecting type: UInt8, mayCommit: Bool)
        throws(DqliteError) -> WireDecoder
    {
        do {
            return try check(connection.call(request), expecting: type)
        } catch {
            throw translate(error, connection: connection, mayCommit: mayCommit)
        }
    }

    private static func check(_ response: WireDecoder, expecting type: UInt8) throws(WireConnection.Failure)
        -> WireDecoder
    {
        guard response.type == type else {
            throw .malformed(
                DqliteError(
                    .protocolViolation,
                    "expected \(WireType.name(ofResponse: type)), got \(WireType.name(ofResponse: response.type))"))
        }
        return response
    }

    private static func translate(_ failure: WireConnection.Failure, connection: WireConnection, mayCommit: Bool)
        -> DqliteError
    {
        switch failure {
        case .notSent(let message):
            return DqliteError(.notCommitted, message)
        case .unanswered(let message):
            return DqliteError(
                mayCommit ? .outcomeUnknown : .notCommitted, "no answer from \(connection.address): \(message)")
        case .refused(let code, let message) where DqliteError.leadershipCodes.contains(code):
            connection.close()
            // NOT_LEADER: refused before anything happened. LEADERSHIP_LOST: the leader stepped down while the
            // write was being replicated; a quorum may still have it.
            let lost = code >> 8 == 33 || code >> 8 == 41
            return DqliteError(
                lost && mayCommit ? .outcomeUnknown : .notCommitted, code: code, "\(connection.address): \(message)")
        case .refused(let code, let message):
            return DqliteError(.sqlite, code: code, message)
        case .malformed(let error):
            connection.close()
            return error
        }
    }
}
