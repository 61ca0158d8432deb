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

/// One port, one listener: a connection's first byte picks its protocol. Our frames and HTTP (the
/// Connect protocol) are served; a TLS client gets its protocol's refusal and a clean close, and the
/// server goes on serving everyone else.
@Suite struct ProtocolSnifferTests {
    @Test(arguments: [
        (UInt8(0x00), ProtocolSniffer.Kind.frames), (0x16, .tls), (UInt8(ascii: "G"), .http),
        (UInt8(ascii: "P"), .http),
        (UInt8(ascii: "O"), .http), (0x01, .frames), (UInt8(ascii: "g"), .frames), (0xFF, .frames),
    ])
    func theFirstBytePicksTheProtocol(_ byte: UInt8, _ kind: ProtocolSniffer.Kind) {
        #expect(ProtocolSniffer.Kind(firstByte: byte) == kind)
    }

    @Test func anHTTPClientIsServedConnectOnTheSamePort() async throws {
        try await Harness.with(.tcp) { harness in
            let socket = try RawSocket(port: harness.tcp!.port)
            socket.write(
                Array(
                    "GET /menagerie.rpc.v1.Health/Check?connect=v1&encoding=json&message=%7B%7D HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
                        .utf8))
            let (bytes, closed) = await socket.readUntilClosed()
            let reply = String(decoding: bytes, as: UTF8.self)
            #expect(reply.hasPrefix("HTTP/1.1 200 OK\r\n"), "\(reply)")
            #expect(reply.contains("\"status\":\"SERVING_STATUS_SERVING\""), "\(reply)")
            #expect(closed)
            try await expectStillServing(harness)
        }
    }

    @Test func anHTTPRequestThatIsNoConnectCallGetsItsStatusAndTheWholeReply() async throws {
        // A body nobody reads: the reply (415) still arrives whole before the close.
        try await Harness.with(.tcp) { harness in
            let socket = try RawSocket(port: harness.tcp!.port)
            let body = [UInt8](repeating: UInt8(ascii: "x"), count: 256 << 10)
            socket.write(
                Array(
                    "POST /menagerie.rpc.v1.Echo/Echo HTTP/1.1\r\nHost: h\r\nConnection: close\r\nContent-Length: \(body.count)\r\n\r\n"
                        .utf8) + body)
            let (bytes, closed) = await socket.readUntilClosed()
            let reply = String(decoding: bytes, as: UTF8.self)
            #expect(reply.hasPrefix("HTTP/1.1 415 Unsupported Media Type\r\n"), "\(reply)")
            #expect(closed)
            try await expectStillServing(harness)
        }
    }

    @Test func aMalformedHTTPRequestGets400AndACleanClose() async throws {
        try await Harness.with(.tcp) { harness in
            let socket = try RawSocket(port: harness.tcp!.port)
            socket.write(Array("POST /menagerie.rpc.v1.Echo/Echo HTTP/1.1\nHost: h\n\n".utf8))
            let (bytes, closed) = await socket.readUntilClosed()
            #expect(String(decoding: bytes, as: UTF8.self).hasPrefix("HTTP/1.1 400 Bad Request\r\n"))
            #expect(closed)
            try await expectStillServing(harness)
        }
    }

    @Test func aTLSClientGetsAFatalAlertAndACleanClose() async throws {
        try await Harness.with(.tcp) { harness in
            let socket = try RawSocket(port: harness.tcp!.port)
            // The start of a ClientHello record: handshake (0x16), TLS 1.0 record version, a length.
            socket.write([0x16, 0x03, 0x01, 0x00, 0xF4, 0x01, 0x00, 0x00, 0xF0, 0x03, 0x03])
            let (bytes, closed) = await socket.readUntilClosed()
            #expect(bytes == [0x15, 0x03, 0x01, 0x00, 0x02, 0x02, 0x28])
            #expect(closed)
            try await expectStillServing(harness)
        }
    }

    @Test func framesSentAByteAtATimeAreStillOurs() async throws {
        try await Harness.with(.tcp) { harness in
            let socket = try RawSocket(port: harness.tcp!.port)
            for byte in RawSocket.echoFrame(RpcV1.EchoRequest(payload: Array("slowly".utf8)), id: 1) {
                socket.write([byte])
                try await Task.sleep(for: .milliseconds(1))
            }
            let frame = try await socket.receiveFrame()
            #expect(frame.callID == 1 && frame.kind == .status && frame.statusCode == 0)
            #expect(try RpcV1.EchoResponse(serializedBytes: frame.payload).payload == Array("slowly".utf8))
        }
    }

    @Test func refusedProtocolsFreeTheirPlaceUnderTheConnectionLimit() async throws {
        var limits = TCPServer.Limits()
        limits.maxConnections = 1
        try await Harness.with(.tcp, limits: limits) { harness in
            for _ in 0..<3 {
                let socket = try RawSocket(port: harness.tcp!.port)
                socket.write(Array("GET / HTTP/1.1\r\n\r\n".utf8))
                _ = await socket.readUntilClosed()
            }
            try await expectStillServing(harness)
        }
    }

    private func expectStillServing(_ harness: Harness) async throws {
        let reply = try await harness.client.unary(RpcV1.Echo.echo, RpcV1.EchoRequest(payload: [7]))
        #expect(reply.payload == [7])
    }
}

/// `TCPServer` as a `ServerTransport`: made, then given its server; calls it ends itself are counted by the server, once.
@Suite struct ServerTransportTests {
    @Test func aTransportServesOneServer() async throws {
        let transport = try RPCServer(name: "first", services: [EchoService()]).serve(over: TCPServer(port: 0))
        defer { Task { await transport.shutdown(grace: .zero) } }
        await expectStatus(.failedPrecondition) { try RPCServer(name: "second", services: []).serve(over: transport) }
        let client = RPCClient(transports: [try TCPClientTransport(endpoint: transport.address)])
        defer { client.close() }
        let health = try await client.unary(RpcV1.Health.check, RpcV1.HealthCheckRequest())
        #expect(health.serverName == "first")
    }

    @Test func anAddressInUseFailsListenAndLeavesTheTransportFree() async throws {
        let taken = try TCPServer(rpc: RPCServer(name: "taken", services: []), port: 0)
        let transport = TCPServer(port: taken.port)
        await expectStatus(.unavailable) { try RPCServer(name: "late", services: []).serve(over: transport) }
        await taken.shutdown(grace: .zero)
        try RPCServer(name: "late", services: []).serve(over: transport)
        await transport.shutdown(grace: .zero)
    }

    /// Over TCP, AbuseTests counts deadlines and refusals the transport answered with a bare client
    /// (a real client cancels at its own deadline, which races the server's).
    @Test func anInProcessCallEndedAtItsDeadlineIsCountedOnce() async throws {
        try await Harness.with(.inProcess, services: [FaultyService()]) { harness in
            await expectStatus(.deadlineExceeded) {
                _ = try await harness.client.unary(
                    RpcV1.Echo.echo, RpcV1.EchoRequest(payload: Array("slow".utf8)),
                    options: CallOptions(timeout: .milliseconds(100)))
            }
            // The handler, cancelled, finishes too: its answer comes second and is not counted.
            try await Task.sleep(for: TestTime.scaled(.milliseconds(200)))
            let echo = try #require(harness.rpc.stats.snapshot().first { $0.path == RpcV1.Echo.echo.path })
            #expect(echo.calls == 1)
            #expect(echo.byStatus[Int(StatusCode.deadlineExceeded.rawValue)] == 1)
        }
    }
}
