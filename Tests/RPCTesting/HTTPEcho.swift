import Foundation
import RPC
import RPCWire
import Schema
import Transport

/// The echo service called the way a browser or a phone calls it: Connect unary with JSON over plain
/// HTTP/1.1, on the same port as the binary protocol. One kept-alive connection per caller and one request in
/// flight on each (browsers do not pipeline), so the benchmark's HTTP row compares like for like with the binary
/// client's callers. Encoding, the request head, parsing the response head and decoding the JSON are all counted,
/// as the binary client's protobuf work is.
public final class HTTPEchoClient: @unchecked Sendable {
    private let address: SocketAddress
    private let loop: EventLoop
    /// One connection per caller, replaced when the server closed it (idle keep-alive connections are reclaimed,
    /// as a browser's are).
    private let connections: Lock<[HTTPEchoConnection]>
    /// Connections no call is using; a call takes one and gives it back.
    private let idle: Lock<[Int]>

    /// Opens `count` connections to `endpoint` (HOST:PORT); at most `count` calls may run at once.
    public init(endpoint: String, connections count: Int, loop: EventLoop = .shared) async throws {
        address = try Endpoint(parsing: endpoint).socketAddress
        self.loop = loop
        var opened: [HTTPEchoConnection] = []
        for _ in 0..<count { opened.append(try await HTTPEchoConnection(address: address, loop: loop)) }
        connections = Lock(opened)
        idle = Lock(Array(0..<count))
    }

    /// `POST /menagerie.rpc.v1.Echo/Echo` with the request's JSON mapping; throws the Connect error a non-200 carries.
    /// A connection the server closed while it sat idle is reopened, and the call retried once on a fresh one.
    public func echo(_ request: RpcV1.EchoRequest) async throws -> RpcV1.EchoResponse {
        guard let index = idle.withLock({ $0.popLast() }) else {
            throw RPCError(.resourceExhausted, "more concurrent calls than HTTP connections")
        }
        defer { idle.withLock { $0.append(index) } }
        let body = Array(request.jsonString().utf8)
        let head =
            "POST /menagerie.rpc.v1.Echo/Echo HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\n"
            + "Content-Length: \(body.count)\r\n\r\n"
        let bytes = Array(head.utf8) + body
        var connection = connections.withLock { $0[index] }
        let (status, answer): (Int, [UInt8])
        do {
            if connection.isClosed { connection = try await reopen(index) }
            (status, answer) = try await connection.exchange(bytes)
        } catch let error as RPCError where error.code == .unavailable {
            (status, answer) = try await reopen(index).exchange(bytes)
        }
        let text = String(decoding: answer, as: UTF8.self)
        guard status == 200 else { throw RPCError(.internalError, "HTTP \(status): \(text.prefix(200))") }
        return try RpcV1.EchoResponse(jsonString: text)
    }

    private func reopen(_ index: Int) async throws -> HTTPEchoConnection {
        let fresh = try await HTTPEchoConnection(address: address, loop: loop)
        connections.withLock { $0[index] = fresh }
        return fresh
    }

    public func close() {
        for connection in connections.withLock({ $0 }) { connection.close() }
    }
}

/// One kept-alive HTTP/1.1 connection: writes a request, reads its response by Content-Length. Responses come
/// in request order, so waiting callers are a FIFO (one at a time in practice).
final class HTTPEchoConnection: ConnectionReader, @unchecked Sendable {
    private let connection: TCPConnection
    /// Bytes of responses not yet complete; loop thread only.
    private var buffer: [UInt8] = []
    private let state = Lock<(waiting: FIFO<UnsafeContinuation<(Int, [UInt8]), any Error>>, closed: String?)>(
        (FIFO(), nil))

    init(address: SocketAddress, loop: EventLoop) async throws {
        connection = loop.submit { TCPConnection(loop: loop) }
        connection.onClose = { [weak self] reason in
            guard let self else { return }
            var waiting = state.withLock { state in
                state.closed = reason
                defer { state.waiting = FIFO() }
                return state.waiting
            }
            while let caller = waiting.popFirst() {
                caller.resume(throwing: RPCError(.unavailable, "HTTP connection closed: \(reason)"))
            }
        }
        loop.submit { [connection] in connection.reader = self }
        try await TCPConnection.connect(connection, to: address)
    }

    func exchange(_ request: [UInt8]) async throws -> (Int, [UInt8]) {
        try await withUnsafeThrowingContinuation { continuation in
            let closed = state.withLock { state -> String? in
                if let reason = state.closed { return reason }
                state.waiting.append(continuation)
                connection.send(bytesOfSize: request.count, sealing: false) { buffer in
                    request.withUnsafeBytes { buffer.copyMemory(from: $0) }
                }
                return nil
            }
            if let closed { continuation.resume(throwing: RPCError(.unavailable, "HTTP connection closed: \(closed)")) }
        }
    }

    /// Whether the connection closed (the server reclaimed it, or it broke).
    var isClosed: Bool { state.withLock { $0.closed != nil } }

    func close() {
        connection.loop.execute { [connection] in connection.close(reason: "benchmark done") }
    }

    // MARK: ConnectionReader

    var readsInBulk: Bool { false }
    var budgetedBytes: Int { 0 }
    func releaseBudget() {}

    func received(_ bytes: UnsafeRawBufferPointer) {
        buffer.append(contentsOf: bytes)
        while let (status, bodyRange) = Self.completeResponse(in: buffer) {
            let body = Array(buffer[bodyRange])
            buffer.removeFirst(bodyRange.upperBound)
            state.withLock { $0.waiting.popFirst() }?.resume(returning: (status, body))
        }
    }

    /// The status and body of the first response in `bytes` once all of it arrived (a Content-Length body,
    /// which is what the server sends a unary call), else nil.
    static func completeResponse(in bytes: [UInt8]) -> (Int, Range<Int>)? {
        let terminator: [UInt8] = [13, 10, 13, 10]
        guard bytes.count >= 4,
            let headEnd = (0...(bytes.count - 4)).first(where: { bytes[$0..<$0 + 4].elementsEqual(terminator) })
        else {
            return nil
        }
        let head = String(decoding: bytes[..<headEnd], as: UTF8.self)
        let lines = head.split(separator: "\r\n")
        guard let statusLine = lines.first,
            let status = statusLine.split(separator: " ").dropFirst().first.flatMap({ Int($0) })
        else {
            return nil
        }
        var length = 0
        for line in lines.dropFirst() {
            let parts = line.split(separator: ":", maxSplits: 1)
            if parts.count == 2, parts[0].lowercased() == "content-length" {
                length = Int(parts[1].trimmingCharacters(in: .whitespaces)) ?? 0
            }
        }
        let bodyStart = headEnd + 4
        guard bytes.count >= bodyStart + length else { return nil }
        return (status, bodyStart..<bodyStart + length)
    }
}
