import Base
import Foundation
import RPC
import RPCTestSupport
import RPCTesting
import RPCWire
import Schema
import TestSupport
import Testing

@testable import Connect
@testable import Framing
@testable import ServerCore
@testable import ServerSeam
@testable import TCP
@testable import TLSStreams
@testable import Transport

/// The protocol layer reads a `ByteStream`, not TCP: served over a stream that is not a
/// `TCPConnection` (a pass-through one that delivers every byte on its own, as a TLS stream over
/// TCP would deliver what it decrypts), the same sniffer, frame reader and call table serve every
/// kind of call unchanged.
@Suite struct ByteStreamTests {
    @Test func everyKindOfCallIsServedOverAStreamDeliveringOneByteAtATime() async throws {
        try await withServer { server, client, streams in
            let reply = try await client.unary(
                RpcV1.Echo.echo, RpcV1.EchoRequest(payload: Array("one byte at a time".utf8)))
            #expect(reply.payload == Array("one byte at a time".utf8))

            var streamed: [UInt32] = []
            for try await response in client.serverStreaming(
                RpcV1.Echo.stream, RpcV1.EchoRequest(payload: [1], count: 3))
            {
                streamed.append(response.index)
            }
            #expect(streamed == [0, 1, 2])

            // Larger than a chunk: it arrives in several MESSAGE frames, and the server grants the
            // client credit as the handler reads.
            let large = (0..<(300 << 10)).map { UInt8(truncatingIfNeeded: $0) }
            let collected = try await client.clientStreaming(RpcV1.Echo.collect) { writer in
                try await writer.send(RpcV1.EchoRequest(payload: large))
                try await writer.send(RpcV1.EchoRequest(payload: [7]))
            }
            #expect(collected.index == 2 && collected.payload == large + [7])

            let chat = try await client.bidirectionalStreaming(RpcV1.Echo.chat) { writer in
                for index in 0..<3 { try await writer.send(RpcV1.EchoRequest(payload: [UInt8(index)])) }
            } responses: { responses in
                var payloads: [[UInt8]] = []
                for try await response in responses { payloads.append(response.payload) }
                return payloads
            }
            #expect(chat == [[0], [1], [2]])

            let delivered = server.loop.submit { streams.withLock { $0.reduce(0) { $0 + $1.piecesDelivered } } }
            #expect(delivered > large.count, "the frames went through the test's stream, byte by byte")
        }
    }

    @Test func theSnifferReadsAnyStream() async throws {
        try await withServer { server, client, _ in
            let socket = try RawSocket(port: server.port)
            // HTTP (Connect) too, its request arriving byte by byte.
            socket.write(
                Array(
                    "GET /menagerie.rpc.v1.Health/Check?connect=v1&encoding=json&message=%7B%7D HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n"
                        .utf8))
            let (bytes, closed) = await socket.readUntilClosed()
            #expect(String(decoding: bytes, as: UTF8.self).hasPrefix("HTTP/1.1 200 OK\r\n"))
            #expect(closed)
            _ = try await client.unary(RpcV1.Echo.echo, RpcV1.EchoRequest())
        }
    }

    @Test func aProtocolErrorOverAnyStreamIsAnsweredAndCloses() async throws {
        try await withServer { server, _, _ in
            let socket = try RawSocket(port: server.port)
            socket.write([0x00, 0x00, 0x00, 0x00, 0x00])  // a zero-length frame
            let frame = try await socket.receiveFrame()
            #expect(frame.callID == 0 && frame.kind == .status && frame.statusCode == StatusCode.internalError.rawValue)
            #expect(await socket.readUntilClosed().1)
        }
    }

    /// A server whose connections are served through `OneBytePieces` streams, and a client of it.
    private func withServer(
        _ body: (TCPServer, RPCClient, Lock<[OneBytePieces]>) async throws -> Void
    ) async throws {
        let server = TCPServer(port: 0)
        let streams = Lock<[OneBytePieces]>([])
        server.servesThrough = { server, socket in
            let stream = OneBytePieces(socket)
            streams.withLock { $0.append(stream) }
            return server.serve(stream, over: socket)
        }
        try RPCServer(name: "bytes", services: [EchoService()]).serve(over: server)
        let client = RPCClient(transports: [try TCPClientTransport(endpoint: server.address)])
        do {
            try await body(server, client, streams)
        } catch {
            client.close()
            await server.shutdown(grace: .zero)
            throw error
        }
        client.close()
        await server.shutdown(grace: .seconds(1))
    }
}

/// A stream over a TCP connection that passes everything through to it and its reads to its own reader:
/// the base of the test doubles below, which override `received` to see how reads arrive.
class PassThroughStream: ByteStream, ConnectionReader, @unchecked Sendable {
    let socket: TCPConnection
    var reader: (any ConnectionReader)?

    init(_ socket: TCPConnection) {
        self.socket = socket
        socket.reader = self
    }

    var loop: EventLoop { socket.loop }
    var peer: String { socket.peer }
    var budget: MemoryBudget? { socket.budget }
    var isClosed: Bool { socket.isClosed }
    var isClosing: Bool { socket.isClosing }
    var unwrittenBytes: Int { socket.unwrittenBytes }
    var highWater: Int { socket.highWater }
    var lowWater: Int { socket.lowWater }
    var onDrain: (() -> Void)? {
        get { socket.onDrain }
        set { socket.onDrain = newValue }
    }

    func send(bytesOfSize size: Int, sealing: Bool, _ write: (UnsafeMutableRawBufferPointer) -> Void) {
        socket.send(bytesOfSize: size, sealing: sealing, write)
    }

    func pauseReading() { socket.pauseReading() }
    func resumeReading() { socket.resumeReading() }
    func close(afterFlushing reason: String) { socket.close(afterFlushing: reason) }
    func close(reason: String) { socket.close(reason: reason) }

    func received(_ bytes: UnsafeRawBufferPointer) { reader?.received(bytes) }

    var readsInBulk: Bool { reader?.readsInBulk ?? false }
    var budgetedBytes: Int { reader?.budgetedBytes ?? 0 }
    func releaseBudget() { reader?.releaseBudget() }
}

/// A test double of the byte-stream layer: a stream over a TCP connection that passes writes
/// through and hands its reader what it reads one byte at a time, so a reader that assumed it sees
/// whole frames, or reads a `TCPConnection`, fails here.
final class OneBytePieces: PassThroughStream, @unchecked Sendable {
    /// Bytes handed to the reader, each on its own (loop thread).
    private(set) var piecesDelivered = 0

    override func received(_ bytes: UnsafeRawBufferPointer) {
        for index in bytes.indices {
            guard let reader, !isClosed, !isClosing else { return }
            piecesDelivered += 1
            reader.received(UnsafeRawBufferPointer(rebasing: bytes[index..<index + 1]))
        }
    }
}
