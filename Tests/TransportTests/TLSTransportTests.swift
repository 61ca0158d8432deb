import Foundation
import RPC
import RPCTestSupport
import RPCTesting
import RPCWire
import Schema
import TLS
import TestSupport
import Testing
import Transport

/// TLS under the transport: the same port takes TLS by its first byte, ALPN picks our frames (mutual
/// TLS) or HTTP (server certificate only), and each way of getting it wrong gets a clear error.
@Suite(.serialized) struct TLSTransportTests {
    let certificates: TestCertificates
    let serverPair: (certificate: String, key: String)
    let clientPair: (certificate: String, key: String)

    init() throws {
        certificates = try TestCertificates()
        serverPair = try certificates.issue("echo-server")
        clientPair = try certificates.issue("gateway")
    }

    func tlsServer(_ name: String = "echo") throws -> TCPServer {
        let server = TCPServer(port: 0)
        server.serveTLS(
            try .server(certificateFile: serverPair.certificate, keyFile: serverPair.key, caFile: certificates.caFile))
        try RPCServer(name: name, services: [EchoService()]).serve(over: server)
        return server
    }

    func client(_ server: TCPServer, pair: (certificate: String, key: String)?, ca: String? = nil) throws -> RPCClient {
        let credentials = try TLSCredentials.client(
            certificateFile: pair?.certificate, keyFile: pair?.key, caFile: ca ?? certificates.caFile)
        return RPCClient(
            transports: [try TCPClientTransport(endpoint: server.address, tls: credentials)],
            retry: .init(maxAttempts: 1))
    }

    /// The error a call gets, as text.
    func failure(_ client: RPCClient) async -> String {
        do {
            _ = try await client.unary(RpcV1.Echo.echo, RpcV1.EchoRequest(payload: [1]))
            return "no error"
        } catch {
            return "\(error)"
        }
    }

    @Test func mutualTLSServesUnaryAndStreamingCallsOfEverySize() async throws {
        let server = try tlsServer()
        let client = try client(server, pair: clientPair)
        for size in [0, 64, 65_536, 3 << 20] {
            let payload = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 7) }
            let reply = try await client.unary(RpcV1.Echo.echo, RpcV1.EchoRequest(payload: payload))
            #expect(reply.payload == payload)
        }
        var streamed = 0
        for try await reply in client.serverStreaming(RpcV1.Echo.stream, RpcV1.EchoRequest(payload: [5], count: 50)) {
            #expect(reply.index == streamed)
            streamed += 1
        }
        #expect(streamed == 50)
        // Many calls at once share the one session.
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<64 {
                group.addTask {
                    let payload = [UInt8](repeating: UInt8(index), count: 1000 * index)
                    let reply = try await client.unary(RpcV1.Echo.echo, RpcV1.EchoRequest(payload: payload))
                    #expect(reply.payload == payload)
                }
            }
            try await group.waitForAll()
        }
        client.close()
        await server.shutdown(grace: .seconds(1))
    }

    /// Issue 23's "the abuse suite holds with TLS as without", bounded (`menagerie-bench abuse --abuse-tls`
    /// runs the full attacks): handshakes left half-way fill the connection limit, plaintext health checks
    /// and garbage after a record header arrive, and clients offer no certificate — none is served, the
    /// half-way handshakes cannot lock a newcomer out, and a mutual-TLS client is served throughout.
    @Test func attacksOnTLSServeNoAttackerAndLockNobodyOut() async throws {
        var limits = TCPServer.Limits()
        limits.maxConnections = 24
        let server = TCPServer(port: 0, limits: limits)
        server.serveTLS(
            try .server(certificateFile: serverPair.certificate, keyFile: serverPair.key, caFile: certificates.caFile))
        try RPCServer(name: "echo", services: [EchoService()]).serve(over: server)
        let port = try #require(Int(server.address.split(separator: ":").last ?? ""))
        let context = try TLSCredentials.client(
            certificateFile: clientPair.certificate, keyFile: clientPair.key, caFile: certificates.caFile
        ).context
        let hello: [UInt8] = try {
            let session = try TLSSession(context: context, serverName: "127.0.0.1")
            #expect(try session.handshake() == .wantsMore)
            var bytes = [UInt8](repeating: 0, count: 1 << 14)
            let count = bytes.withUnsafeMutableBytes { session.drainCiphertext(into: $0) }
            return Array(bytes[0..<count])
        }()
        // Half a ClientHello each, then silence: as many as the connection limit.
        let halfway = try (0..<limits.maxConnections).map { _ in try RawSocket(port: port) }
        for socket in halfway { socket.write(Array(hello.prefix(hello.count / 2))) }
        try await Task.sleep(for: TestTime.scaled(.milliseconds(200)))
        // A newcomer still gets in (the quietest half-way handshake makes room) and is served.
        let client = try client(server, pair: clientPair)
        let reply = try await client.unary(
            RpcV1.Echo.echo, RpcV1.EchoRequest(payload: [7]),
            options: CallOptions(timeout: TestTime.scaled(.seconds(10))))
        #expect(reply.payload == [7])
        // Plaintext health checks and garbage after a TLS record header: told why or dropped, never served.
        let health = FrameCodec.encode(
            RpcV1.Frame(
                callID: 1, kind: .request, method: RpcV1.Health.check.path, hasPayload: true,
                payload: RpcV1.HealthCheckRequest().serializedBytes()
            ).serializedBytes())
        for index in 0..<20 {
            let socket = try RawSocket(port: port)
            socket.write(
                index % 2 == 0 ? health : [0x16, 0x03, 0x01, 0x00, 0x40] + [UInt8](repeating: 0x41, count: 64))
            let (bytes, closed) = await socket.readUntilClosed()
            #expect(closed, "attacker \(index) was not closed")
            let decoder = FrameDecoder(maxFrameSize: 1 << 20)
            decoder.append(bytes)
            while let envelope = try? decoder.next() {
                let frame = try RpcV1.Frame(serializedBytes: envelope)
                #expect(
                    frame.callID == 0 && frame.statusCode == StatusCode.unauthenticated.rawValue,
                    "attacker \(index) got \(frame)")
            }
            let reply = try await client.unary(
                RpcV1.Echo.echo, RpcV1.EchoRequest(payload: [UInt8(index)]),
                options: CallOptions(timeout: TestTime.scaled(.seconds(10))))
            #expect(reply.payload == [UInt8(index)])
        }
        // Clients without a certificate on the binary protocol: refused, and the served client goes on.
        for _ in 0..<5 {
            let stranger = try self.client(server, pair: nil)
            let error = await failure(stranger)
            #expect(error.contains("certificate required"), "\(error)")
            stranger.close()
        }
        #expect(try await client.unary(RpcV1.Echo.echo, RpcV1.EchoRequest(payload: [9])).payload == [9])
        withExtendedLifetime(halfway) {}
        client.close()
        await server.shutdown(grace: .seconds(1))
    }

    @Test func aClientWithoutACertificateIsRefused() async throws {
        let server = try tlsServer()
        let client = try client(server, pair: nil)
        let error = await failure(client)
        #expect(
            error.contains("certificate required") && error.contains("the server refused this client's certificate"),
            "\(error)")
        client.close()
        await server.shutdown(grace: .seconds(1))
    }

    @Test func aCertificateOfAnotherCAIsRefusedEitherWay() async throws {
        let stranger = try TestCertificates(name: "Stranger CA")
        defer { stranger.remove() }
        let foreign = try stranger.issue("intruder")
        let server = try tlsServer()
        var client = try client(server, pair: foreign)
        var error = await failure(client)
        #expect(error.contains("unknown ca"), "\(error)")
        client.close()
        // A client that trusts another CA refuses our server.
        client = try self.client(server, pair: clientPair, ca: stranger.caFile)
        error = await failure(client)
        // The server sends its CA along (OpenSSL completes the chain), which the client does not trust.
        #expect(
            error.contains("the server's certificate is refused: self-signed certificate in certificate chain"),
            "\(error)")
        client.close()
        await server.shutdown(grace: .seconds(1))
    }

    @Test func anExpiredClientCertificateIsRefused() async throws {
        let expired = try certificates.issue("old-gateway", days: -1)
        let server = try tlsServer()
        let client = try client(server, pair: expired)
        let error = await failure(client)
        #expect(error.contains("certificate expired"), "\(error)")
        client.close()
        await server.shutdown(grace: .seconds(1))
    }

    @Test func aPlaintextClientOfATLSServerIsToldToUseTLS() async throws {
        let server = try tlsServer()
        let client = RPCClient(
            transports: [try TCPClientTransport(endpoint: server.address)], retry: .init(maxAttempts: 1))
        let error = await expectStatus(.unauthenticated) {
            _ = try await client.unary(RpcV1.Echo.echo, RpcV1.EchoRequest())
        }
        #expect(error?.message.contains("accepts TLS connections only") == true, "\(String(describing: error))")
        client.close()
        // Plain HTTP on the TLS port: a 400 that says so.
        let socket = try RawSocket(port: server.port)
        _ = socket.write(Array("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n".utf8))
        let answer = String(decoding: await socket.readUntilClosed().bytes, as: UTF8.self)
        #expect(answer.hasPrefix("HTTP/1.1 400") && answer.contains("accepts TLS connections only"), "\(answer)")
        await server.shutdown(grace: .seconds(1))
    }

    @Test func aTLSClientOfAPlaintextServerIsToldItServesPlaintext() async throws {
        let server = try TCPServer(rpc: RPCServer(name: "plain", services: [EchoService()]), port: 0)
        let client = try client(server, pair: clientPair)
        let error = await failure(client)
        #expect(error.contains("serves plaintext only and refused TLS"), "\(error)")
        client.close()
        await server.shutdown(grace: .seconds(1))
    }

    @Test func httpOverTLSNeedsNoClientCertificate() async throws {
        let server = try tlsServer()
        let output = try runSeparatingOutput(
            "/usr/bin/curl",
            [
                "-sS", "--cacert", certificates.caFile, "-H", "Content-Type: application/json",
                "--data", #"{"payload":"aGk="}"#, "https://127.0.0.1:\(server.port)/menagerie.rpc.v1.Echo/Echo",
            ], environment: ProcessInfo.processInfo.environment)
        #expect(output.status == 0, "\(output.stderr)")
        #expect(output.stdout.contains(#""payload":"aGk=""#), "\(output.stdout)")
        // Without the CA, curl refuses our certificate.
        let untrusted = try runSeparatingOutput(
            "/usr/bin/curl",
            [
                "-sS", "https://127.0.0.1:\(server.port)/menagerie.rpc.v1.Echo/Echo", "--data", "{}",
            ], environment: ProcessInfo.processInfo.environment)
        #expect(untrusted.status != 0)
        await server.shutdown(grace: .seconds(1))
    }

    @Test func reloadedCertificatesServeNewConnectionsWhileOpenOnesGoOn() async throws {
        let server = TCPServer(port: 0)
        let files = (
            certificate: certificates.directory.appendingPathComponent("live.pem").path,
            key: certificates.directory.appendingPathComponent("live.key").path
        )
        try FileManager.default.copyItem(atPath: serverPair.certificate, toPath: files.certificate)
        try FileManager.default.copyItem(atPath: serverPair.key, toPath: files.key)
        // The CA file holds both CAs, so clients of either are accepted; the certificate changes CA.
        let next = try TestCertificates(name: "Next CA", in: certificates.directory)
        let bundle = certificates.directory.appendingPathComponent("bundle.pem").path
        try
            (String(contentsOfFile: certificates.caFile, encoding: .utf8)
            + String(contentsOfFile: next.caFile, encoding: .utf8))
            .write(toFile: bundle, atomically: true, encoding: .utf8)
        let credentials = try TLSCredentials.server(
            certificateFile: files.certificate, keyFile: files.key, caFile: bundle)
        server.serveTLS(credentials)
        try RPCServer(name: "echo", services: [EchoService()]).serve(over: server)

        let old = try client(server, pair: clientPair)
        _ = try await old.unary(RpcV1.Echo.echo, RpcV1.EchoRequest(payload: [1]))
        let renewed = try next.issue("echo-server-renewed")
        try FileManager.default.removeItem(atPath: files.certificate)
        try FileManager.default.removeItem(atPath: files.key)
        try FileManager.default.copyItem(atPath: renewed.certificate, toPath: files.certificate)
        try FileManager.default.copyItem(atPath: renewed.key, toPath: files.key)
        #expect(try credentials.reload()?.subject == "CN=echo-server-renewed")

        // The open connection keeps its session.
        #expect(try await old.unary(RpcV1.Echo.echo, RpcV1.EchoRequest(payload: [2])).payload == [2])
        // A new client that trusts only the new CA is served the new certificate.
        let fresh = try client(server, pair: clientPair, ca: next.caFile)
        #expect(try await fresh.unary(RpcV1.Echo.echo, RpcV1.EchoRequest(payload: [3])).payload == [3])
        // ... and one that trusts only the old CA no longer accepts the server.
        let stale = try client(server, pair: clientPair)
        let staleError = await failure(stale)
        #expect(staleError.contains("the server's certificate is refused"), "\(staleError)")
        // Files that do not load keep the certificate in use.
        try "garbage".write(toFile: files.key, atomically: true, encoding: .utf8)
        #expect(throws: TLSError.self) { try credentials.reload() }
        #expect(try await fresh.unary(RpcV1.Echo.echo, RpcV1.EchoRequest(payload: [4])).payload == [4])
        for client in [old, fresh, stale] { client.close() }
        await server.shutdown(grace: .seconds(1))
    }
}
