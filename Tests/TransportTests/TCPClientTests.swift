import Foundation
import RPC
import RPCTestSupport
import RPCTesting
import RPCWire
import Schema
import Synchronization
import TestSupport
import Testing
import Transport

/// Connection reuse, reconnect, load balancing, retries and graceful shutdown over real TCP.
@Suite struct TCPClientTests {
    func server(_ name: String = "replica") throws -> TCPServer {
        try TCPServer(rpc: RPCServer(name: name, services: [EchoService()]), port: 0)
    }

    func pid(of reply: RpcV1.HealthCheckResponse) -> String { reply.serverName }

    /// Large payloads go out as their own buffers of a vectored write and a large frame's rest is read in place
    /// (`TCPConnection.smallestReferencedBody`, `FrameReader.readDestination`): calls of every size around those
    /// thresholds, all at once on one connection, come back whole and each to its own caller.
    @Test func payloadsOfMixedSizesComeBackWholeOnOneConnection() async throws {
        let server = try server()
        let client = RPCClient(transports: [try TCPClientTransport(endpoint: server.address)])
        let sizes = [0, 1, 8191, 8192, 8193, 16_384, 70_000, 65_536 + 40, 300_000, (1 << 20) + 7]
        try await withThrowingTaskGroup(of: Void.self) { group in
            for round in 0..<4 {
                for (index, size) in sizes.enumerated() {
                    group.addTask {
                        let payload = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ index &+ round) }
                        let reply = try await client.unary(RpcV1.Echo.echo, RpcV1.EchoRequest(payload: payload))
                        #expect(reply.payload == payload, "\(size) bytes")
                    }
                }
            }
            try await group.waitForAll()
        }
        client.close()
        await server.shutdown(grace: .seconds(1))
    }

    @Test func roundRobinSpreadsCallsOverEveryEndpoint() async throws {
        let servers = try (0..<3).map { try server("replica-\($0)") }
        let client = RPCClient(transports: try servers.map { try TCPClientTransport(endpoint: $0.address) })
        var seen: [String: Int] = [:]
        for _ in 0..<30 {
            seen[try await client.unary(RpcV1.Health.check, RpcV1.HealthCheckRequest()).serverName, default: 0] += 1
        }
        #expect(seen == ["replica-0": 10, "replica-1": 10, "replica-2": 10])
        client.close()
        for server in servers { await server.shutdown(grace: .seconds(1)) }
    }

    /// A listening socket that never accepts, its backlog filled: the kernel drops further SYNs, as a
    /// machine cut off by a partition does, so a connect to it neither succeeds nor fails for minutes.
    final class SilentEndpoint: @unchecked Sendable {
        let listener: Int32
        let fillers: [RawSocket]
        let address: String

        init() throws {
            let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            self.listener = listener
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            let bound = withUnsafeMutablePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    bind(listener, $0, length) == 0 && getsockname(listener, $0, &length) == 0
                }
            }
            guard bound, listen(listener, 0) == 0 else { throw POSIXError(.EADDRINUSE) }
            let port = Int(UInt16(bigEndian: address.sin_port))
            // A backlog of 0 holds one connection not yet accepted: one fills it (a second would itself wait for
            // its SYN to be answered, as the transport's does).
            fillers = [try RawSocket(port: port)]
            self.address = "127.0.0.1:\(port)"
        }

        deinit { close(listener) }
    }

    /// Issue 27's partitions: a call to an endpoint that does not answer at all fails its connection after the
    /// connect timeout and goes to the next endpoint, instead of waiting for its whole deadline.
    /// The connect timeout, the deadline and the bounds stretch together on a busy machine (`TestTime`).
    @Test func anEndpointThatNeverAnswersIsLeftAfterTheConnectTimeout() async throws {
        let silent = try SilentEndpoint()
        let alive = try server("alive")
        let connectTimeout = TestTime.scaled(.milliseconds(500)), deadline = TestTime.scaled(.seconds(20))
        let client = RPCClient(transports: [
            try TCPClientTransport(endpoint: silent.address, connectTimeout: connectTimeout),
            try TCPClientTransport(endpoint: alive.address),
        ])
        let started = ContinuousClock.now
        for _ in 0..<4 {
            let reply = try await client.unary(
                RpcV1.Echo.echo, RpcV1.EchoRequest(payload: [3]), options: CallOptions(timeout: deadline))
            #expect(reply.payload == [3])
        }
        #expect(
            ContinuousClock.now - started < TestTime.scaled(.seconds(10)), "the calls waited for the silent endpoint")
        // Alone, the silent endpoint fails the call UNAVAILABLE, naming the timeout, long before its deadline.
        let lonely = RPCClient(
            transports: [try TCPClientTransport(endpoint: silent.address, connectTimeout: connectTimeout)],
            retry: .init(maxAttempts: 1))
        let began = ContinuousClock.now
        do {
            _ = try await lonely.unary(
                RpcV1.Echo.echo, RpcV1.EchoRequest(payload: [3]), options: CallOptions(timeout: deadline))
            Issue.record("a call to an endpoint that never answers succeeded")
        } catch let error as RPCError {
            #expect(error.code == .unavailable, "\(error)")
            #expect(error.message.contains("no connection within"), "\(error)")
        }
        #expect(ContinuousClock.now - began < TestTime.scaled(.seconds(5)))
        withExtendedLifetime(silent) {}
        client.close()
        lonely.close()
        await alive.shutdown(grace: .seconds(1))
    }

    @Test func idempotentCallsFailOverWhenAnEndpointIsDown() async throws {
        let alive = try server("alive")
        let dead = try server("dead")
        let deadAddress = dead.address
        await dead.shutdown(grace: .seconds(1))
        let client = RPCClient(transports: [
            try TCPClientTransport(endpoint: deadAddress), try TCPClientTransport(endpoint: alive.address),
        ])
        for _ in 0..<10 {
            let reply = try await client.unary(RpcV1.Echo.echo, RpcV1.EchoRequest(payload: [9]))
            #expect(reply.payload == [9])
        }
        // Non-idempotent calls are retried too when the request was never sent (connect refused).
        var streamed = 0
        for try await _ in client.serverStreaming(RpcV1.Echo.stream, RpcV1.EchoRequest(count: 2)) { streamed += 1 }
        #expect(streamed == 2)
        client.close()
        await alive.shutdown(grace: .seconds(1))
    }

    @Test func unreachableEndpointIsUnavailable() async throws {
        let dead = try server()
        let address = dead.address
        await dead.shutdown(grace: .seconds(1))
        let client = RPCClient(transports: [try TCPClientTransport(endpoint: address)])
        await expectStatus(.unavailable) { _ = try await client.unary(RpcV1.Echo.echo, RpcV1.EchoRequest()) }
        client.close()
    }

    @Test func reconnectsAfterTheServerComesBack() async throws {
        let first = try server()
        let port = first.port
        let client = RPCClient(transports: [try TCPClientTransport(endpoint: first.address)])
        _ = try await client.unary(RpcV1.Echo.echo, RpcV1.EchoRequest())
        await first.shutdown(grace: .seconds(1))
        let second = try TCPServer(rpc: RPCServer(name: "again", services: [EchoService()]), port: port)
        let reply = try await client.unary(RpcV1.Health.check, RpcV1.HealthCheckRequest())
        #expect(reply.serverName == "again")
        client.close()
        await second.shutdown(grace: .seconds(1))
    }

    @Test func malformedEndpointIsRejected() {
        #expect(throws: RPCError.self) { try TCPClientTransport(endpoint: "no-port") }
        #expect(throws: RPCError.self) { try TCPClientTransport(endpoint: "127.0.0.1:99999") }
        #expect(throws: RPCError.self) { try TCPClientTransport(endpoint: "example.com:80") }
    }

    @Test func gracefulShutdownFinishesCallsInFlight() async throws {
        let server = try server()
        let client = RPCClient(transports: [try TCPClientTransport(endpoint: server.address)])
        let slow = Task { try await client.unary(RpcV1.Echo.echo, RpcV1.EchoRequest(payload: [5], delayMs: 400)) }
        try await waitUntil { server.figures().callsInFlight == 1 }
        await server.shutdown(grace: .seconds(5))
        #expect(try await slow.value.payload == [5])
        client.close()
    }

    @Test func shutdownDeliversAnAnswerLargerThanTheSocketBuffers() async throws {
        let server = try server()
        let socket = try RawSocket(port: server.port)
        // 12 MB to echo, and a client that reads only once shutdown has begun: most of the answer
        // still waits in the server's outbox when the call has finished.
        let payload = (0..<(12 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        socket.write(RawSocket.echoFrame(RpcV1.EchoRequest(payload: payload), id: 1))
        try await waitUntil { server.rpc.stats.snapshot().contains { $0.path == RpcV1.Echo.echo.path } }
        let shutdown = Task { await server.shutdown(grace: TestTime.scaled(.seconds(20))) }
        try await Task.sleep(for: TestTime.scaled(.milliseconds(300)))
        let answer = try await socket.receiveFrame()
        #expect(answer.kind == .status && answer.statusCode == 0)
        #expect(try RpcV1.EchoResponse(serializedBytes: answer.payload).payload == payload)
        await shutdown.value
    }

    @Test(.timeLimit(.minutes(1))) func theBenchmarkFloorsEchoClientFailsInsteadOfWaitingForAClosedConnection()
        async throws
    {
        let server = try RawEchoServer()
        let client = try await RawEchoClient(endpoint: server.address)
        #expect(try await client.echo([1, 2, 3]) == [1, 2, 3])
        server.shutdown()
        // Both the call that may still be under way when the close is seen and every later one end.
        await expectStatus(.unavailable) {
            for _ in 0..<2 { _ = try await client.echo([4]) }
        }
        await expectStatus(.unavailable) { _ = try await client.echo([5]) }
    }

    /// The benchmark's floor client closes its connection on the shared loop and is released at once; the
    /// close then finished on the loop after the client was gone, and its `[unowned self]` callback stopped the
    /// whole benchmark ("Attempted to read an unowned reference but object … was already destroyed").
    @Test(.timeLimit(.minutes(1))) func theBenchmarkFloorsEchoClientCanBeReleasedRightAfterClosing() async throws {
        let server = try RawEchoServer()
        defer { server.shutdown() }
        for round in 0..<50 {
            let client = try await RawEchoClient(endpoint: server.address)
            #expect(try await client.echo([UInt8(round)]) == [UInt8(round)])
            client.close()
        }
        // Let the loop finish every close after its client is gone.
        try await Task.sleep(for: TestTime.scaled(.milliseconds(200)))
    }

    @Test func shutdownGivesUpOnCallsAfterTheGracePeriod() async throws {
        let server = try server()
        let client = RPCClient(transports: [try TCPClientTransport(endpoint: server.address)])
        // The call, the grace and the bound stretch together on a busy machine (`TestTime`).
        let delayMs = UInt32((60_000 * TestTime.scale).rounded())
        let endless = Task { try await client.unary(RpcV1.Echo.echo, RpcV1.EchoRequest(delayMs: delayMs)) }
        try await waitUntil { server.figures().callsInFlight == 1 }
        let started = ContinuousClock.now
        await server.shutdown(grace: TestTime.scaled(.milliseconds(300)))
        #expect(ContinuousClock.now - started < TestTime.scaled(.seconds(5)))
        await expectStatus(.unavailable) { _ = try await endless.value }
        client.close()
    }

    @Test func slowReaderPausesTheStreamInsteadOfBufferingWithoutBound() async throws {
        var limits = TCPServer.Limits()
        limits.writeHighWater = 256 << 10
        let counter = CountingStream()
        let server = try TCPServer(rpc: RPCServer(name: "stream", services: [counter]), port: 0, limits: limits)
        let socket = try RawSocket(port: server.port)
        // Ask for 4 GiB worth of streamed responses and never read them.
        let request = RpcV1.EchoRequest(payload: Array(repeating: 1, count: 64 << 10), count: 65_536)
        socket.write(
            FrameCodec.encode(
                RpcV1.Frame(
                    callID: 1, kind: .request, method: RpcV1.Echo.stream.path, hasPayload: true,
                    payload: request.serializedBytes()
                ).serializedBytes()))
        try await Task.sleep(for: TestTime.scaled(.seconds(1)))
        let sentAfterOneSecond = counter.sent.load(ordering: .relaxed)
        try await Task.sleep(for: TestTime.scaled(.seconds(1)))
        let sentAfterTwoSeconds = counter.sent.load(ordering: .relaxed)
        // The handler got going, then waited for the client: the call's window (which a client that
        // reads nothing never replenishes) holds a bounded number of messages (without
        // back-pressure it would be thousands a second).
        #expect(sentAfterOneSecond > 0)
        #expect(
            sentAfterTwoSeconds <= FlowControl.initialWindow / (64 << 10), "kept sending to a client that reads nothing"
        )
        _ = socket
        await server.shutdown(grace: .milliseconds(100))
    }

    @Test func aStreamWaitingForASlowReaderEndsWhenTheClientCancels() async throws {
        var limits = TCPServer.Limits()
        limits.writeHighWater = 256 << 10
        let server = try TCPServer(
            rpc: RPCServer(name: "stream", services: [CountingStream()]), port: 0, limits: limits)
        let socket = try RawSocket(port: server.port)
        // Far more than the client reads (nothing): the handler soon waits for it.
        let request = RpcV1.EchoRequest(payload: Array(repeating: 1, count: 64 << 10), count: 65_536)
        socket.write(
            FrameCodec.encode(
                RpcV1.Frame(
                    callID: 1, kind: .request, method: RpcV1.Echo.stream.path, hasPayload: true,
                    payload: request.serializedBytes()
                ).serializedBytes()))
        try await waitUntil { server.figures().callsInFlight == 1 }
        try await Task.sleep(for: TestTime.scaled(.milliseconds(500)))
        socket.write(FrameCodec.encode(RpcV1.Frame(callID: 1, kind: .cancel).serializedBytes()))
        try await waitUntil { server.figures().callsInFlight == 0 }
        await server.shutdown(grace: .milliseconds(100))
    }

    @Test func shuttingDownAgainReturns() async throws {
        final class Progress: Sendable { let returned = Atomic<Bool>(false) }
        let server = try server()
        await server.shutdown(grace: .seconds(1))
        let progress = Progress()
        Task {
            await server.shutdown(grace: .seconds(1))
            progress.returned.store(true, ordering: .relaxed)
        }
        try await waitUntil { progress.returned.load(ordering: .relaxed) }
    }

    @Test func aTransportReleasedWithoutCloseLetsGoOfItsConnectionAndTimer() async throws {
        let server = try server()
        let deadline = ContinuousClock.now + TestTime.scaled(.seconds(1))
        do {
            let transport = try TCPClientTransport(endpoint: server.address)
            _ = try? await transport.unary(
                CallHead(method: RpcV1.Echo.echo.path, deadline: deadline),
                request: RpcV1.EchoRequest().serializedBytes())
        }
        try await waitUntil { server.rpc.stats.connectionFigures.open == 0 }
        // The call's deadline passes with its transport gone.
        try await Task.sleep(until: deadline + TestTime.scaled(.milliseconds(300)))
        await server.shutdown(grace: .seconds(1))
    }

    @Test func aCallCancelledWhileWaitingToRetryIsCancelled() async throws {
        let dead = try server()
        let address = dead.address
        await dead.shutdown(grace: .seconds(1))
        let client = RPCClient(
            transports: [try TCPClientTransport(endpoint: address)],
            retry: .init(maxAttempts: 3, initialBackoff: .seconds(30)))
        let call = Task { try await client.unary(RpcV1.Echo.echo, RpcV1.EchoRequest()) }
        // The first attempt is refused at once; the call then waits 30 s before the second.
        try await Task.sleep(for: TestTime.scaled(.milliseconds(500)))
        call.cancel()
        await expectStatus(.cancelled) { _ = try await call.value }
        client.close()
    }
}
