import Base
import Foundation
import RPC
import RPCTestSupport
import RPCTesting
import RPCWire
import Schema
import Synchronization
import TLS
import TestSupport
import Testing

@testable import Connect
@testable import Framing
@testable import ServerCore
@testable import ServerSeam
@testable import TCP
@testable import TLSStreams
@testable import Transport

/// A server on several event loops (`Limits.loops`): the acceptor spreads connections over them, each
/// connection is served on its loop alone, and what holds over the whole server — the connection
/// limits, the idle sweep, the drain of a graceful shutdown, TLS — holds whichever loop a connection
/// is on. (Debug builds also stop at any loop-thread assertion a connection's work on another loop
/// would break.)
@Suite struct EventLoopsTests {
    static func limits(loops: Int) -> TCPServer.Limits {
        var limits = TCPServer.Limits()
        limits.loops = loops
        return limits
    }

    /// One call on a connection of its own (an `RPCClient` makes one connection per endpoint).
    func connectAndCall(_ server: TCPServer) async throws -> RPCClient {
        let client = RPCClient(
            transports: [try TCPClientTransport(endpoint: server.address)], retry: .init(maxAttempts: 1))
        let reply = try await client.unary(RpcV1.Echo.echo, RpcV1.EchoRequest(payload: [7]))
        #expect(reply.payload == [7])
        return client
    }

    @Test func connectionsSpreadOverEveryLoopAndTheirCallsStayOnIt() async throws {
        let server = TCPServer(port: 0, limits: Self.limits(loops: 3))
        let streams = Lock<[LoopWitness]>([])
        server.servesThrough = { server, socket in
            let stream = LoopWitness(socket)
            streams.withLock { $0.append(stream) }
            return server.serve(stream, over: socket)
        }
        try RPCServer(name: "loops", services: [EchoService()]).serve(over: server)
        var clients: [RPCClient] = []
        for _ in 0..<6 { clients.append(try await connectAndCall(server)) }
        // Opened one after another and all still open: the fewest-connections rule deals them evenly.
        #expect(server.figures().connectionsPerLoop == [2, 2, 2])
        // Many calls on every connection at once, large ones too (several reads, writes after back-pressure).
        try await withThrowingTaskGroup(of: Void.self) { group in
            for client in clients {
                group.addTask {
                    for index in 0..<40 {
                        let payload = [UInt8](repeating: UInt8(index), count: index % 10 == 0 ? 300 << 10 : 64)
                        let reply = try await client.unary(RpcV1.Echo.echo, RpcV1.EchoRequest(payload: payload))
                        #expect(reply.payload == payload)
                    }
                }
            }
            try await group.waitForAll()
        }
        let witnessed = streams.withLock { $0 }
        #expect(witnessed.count == 6)
        var loopsUsed = Set<String>()
        for stream in witnessed {
            let (loops, offLoop) = stream.deliveries.withLock { ($0.loops, $0.offLoop) }
            #expect(offLoop == 0, "every read of a connection is delivered on its own loop's thread")
            #expect(loops.count == 1, "a connection's reads are all on one loop: \(loops)")
            loopsUsed.formUnion(loops)
        }
        #expect(loopsUsed == ["loops-loop", "loops-loop1", "loops-loop2"])
        #expect(server.figures().connectionsPerLoop == [2, 2, 2], "no connection moved")
        for client in clients { client.close() }
        await server.shutdown(grace: .seconds(1))
    }

    @Test func oneLoopServesEveryConnectionOnTheAcceptor() async throws {
        try await Harness.with(.tcp, limits: Self.limits(loops: 1)) { harness in
            let tcp = try #require(harness.tcp)
            var clients: [RPCClient] = []
            for _ in 0..<3 { clients.append(try await connectAndCall(tcp)) }
            #expect(tcp.figures().connectionsPerLoop == [3])  // the harness's own client connects on its first call
            for client in clients { client.close() }
        }
    }

    enum Limit: String, CaseIterable, CustomTestStringConvertible {
        case all, perPeer
        var testDescription: String { rawValue }
    }

    /// At the limit, the newcomer takes the place of the connection idle longest, wherever it lives:
    /// here on the second loop, while the acceptor's own connection is fresher.
    @Test(arguments: Limit.allCases) func aNewcomerReclaimsTheLongestIdleConnectionOnAnotherLoop(_ limit: Limit)
        async throws
    {
        var limits = Self.limits(loops: 2)
        if limit == .all { limits.maxConnections = 2 } else { limits.maxConnectionsPerPeer = 2 }
        try await Harness.with(.tcp, limits: limits) { harness in
            let tcp = try #require(harness.tcp)
            let first = try RawSocket(port: tcp.port)
            first.sendEcho("first", id: 1)
            #expect(try await first.receiveFrame().statusCode == 0)
            let second = try RawSocket(port: tcp.port)
            second.sendEcho("second", id: 1)
            #expect(try await second.receiveFrame().statusCode == 0)
            #expect(tcp.figures().connectionsPerLoop == [1, 1])
            // The first (on the acceptor's loop) is now the fresher of the two.
            try await Task.sleep(for: TestTime.scaled(.milliseconds(20)))
            first.sendEcho("again", id: 2)
            #expect(try await first.receiveFrame().statusCode == 0)

            let newcomer = try RawSocket(port: tcp.port)
            newcomer.sendEcho("newcomer", id: 1)
            #expect(try await newcomer.receiveFrame().statusCode == 0)
            let told = try await second.receiveFrame()
            #expect(told.callID == 0 && told.statusCode == StatusCode.unavailable.rawValue, "\(told.statusMessage)")
            #expect(await second.readUntilClosed().closed)
            first.sendEcho("still served", id: 3)
            #expect(try await first.receiveFrame().statusCode == 0)
            #expect(tcp.figures().connectionsCounted == 2)
        }
    }

    /// Every connection with a call open and none quiet: the newcomer is refused, whatever loop the
    /// others live on, and the count never passes the limit under a burst of newcomers.
    @Test func theLimitHoldsOverEveryLoopUnderABurstOfNewcomers() async throws {
        var limits = Self.limits(loops: 2)
        limits.maxConnections = 4
        limits.reclaimAfterQuiet = .seconds(60)
        try await Harness.with(.tcp, services: [FaultyService()], limits: limits) { harness in
            let tcp = try #require(harness.tcp)
            var busy: [RawSocket] = []
            for _ in 0..<4 {
                let socket = try RawSocket(port: tcp.port)
                socket.sendEcho("slow", id: 1)  // holds its call open for 30 s
                busy.append(socket)
                try await waitUntil { tcp.figures().connectionsCounted == busy.count }
            }
            #expect(tcp.figures().connectionsPerLoop == [2, 2])
            let most = Atomic<Int>(0)
            let watching = Task {
                while !Task.isCancelled {
                    let counted = tcp.figures().connectionsCounted
                    if counted > most.load(ordering: .relaxed) { most.store(counted, ordering: .relaxed) }
                    await Task.yield()
                }
            }
            let refused = try await withThrowingTaskGroup(of: Bool.self) { group in
                for _ in 0..<20 {
                    group.addTask {
                        let socket = try RawSocket(port: tcp.port)
                        let frame = try await socket.receiveFrame()
                        return frame.callID == 0 && frame.statusCode == StatusCode.resourceExhausted.rawValue
                    }
                }
                return try await group.reduce(0) { $0 + ($1 ? 1 : 0) }
            }
            watching.cancel()
            #expect(refused == 20)
            #expect(most.load(ordering: .relaxed) <= 4)
            #expect(tcp.figures().connectionsCounted == 4)
            withExtendedLifetime(busy) {}
        }
    }

    @Test func theIdleSweepRunsOnEveryLoop() async throws {
        var limits = Self.limits(loops: 2)
        // Long enough that all four are connected before the first is idle, on a loaded machine too.
        limits.frameTimeout = TestTime.scaled(.seconds(1))
        limits.idleTimeout = TestTime.scaled(.seconds(3))
        try await Harness.with(.tcp, limits: limits) { harness in
            let tcp = try #require(harness.tcp)
            var sockets: [RawSocket] = []
            for index in 0..<4 {
                let socket = try RawSocket(port: tcp.port)
                socket.sendEcho("\(index)", id: 1)
                #expect(try await socket.receiveFrame().statusCode == 0)
                sockets.append(socket)
            }
            #expect(tcp.figures().connectionsPerLoop == [2, 2])
            for socket in sockets {
                let told = try await socket.receiveFrame()
                #expect(
                    told.callID == 0 && told.statusCode == StatusCode.unavailable.rawValue
                        && told.statusMessage.contains("idle"))
                #expect(await socket.readUntilClosed().closed)
            }
            try await waitUntil { tcp.figures().connectionsPerLoop == [0, 0] }
        }
    }

    /// Calls in flight on every loop finish and are answered; then every loop's connections close,
    /// well before the grace period would have closed them (both stretched by `TestTime`, so the bound stays below it).
    @Test func gracefulShutdownDrainsEveryLoop() async throws {
        let server = try TCPServer(
            rpc: RPCServer(name: "drain", services: [FaultyService()]), port: 0, limits: Self.limits(loops: 2))
        var clients: [RPCClient] = []
        for _ in 0..<4 { clients.append(try await connectAndCall(server)) }
        #expect(server.figures().connectionsPerLoop == [2, 2])
        let streams = clients.map { client in
            Task {
                var received = 0
                for try await _ in client.serverStreaming(
                    RpcV1.Echo.stream, RpcV1.EchoRequest(payload: [1], count: 5, delayMs: 100))
                {
                    received += 1
                }
                return received
            }
        }
        try await waitUntil { server.figures().callsInFlight == 4 }
        let started = ContinuousClock.now
        await server.shutdown(grace: TestTime.scaled(.seconds(20)))
        let took = ContinuousClock.now - started
        for stream in streams { #expect(try await stream.value == 5) }
        #expect(took < TestTime.scaled(.seconds(8)), "every loop drained (took \(took))")
        for client in clients {
            await expectStatus(.unavailable) {
                _ = try await client.unary(RpcV1.Echo.echo, RpcV1.EchoRequest(payload: [1]))
            }
            client.close()
        }
    }

    @Test func tlsIsServedOnEveryLoop() async throws {
        let certificates = try TestCertificates()
        let serverPair = try certificates.issue("echo-server")
        let clientPair = try certificates.issue("gateway")
        let server = TCPServer(port: 0, limits: Self.limits(loops: 2))
        server.serveTLS(
            try .server(certificateFile: serverPair.certificate, keyFile: serverPair.key, caFile: certificates.caFile))
        try RPCServer(name: "tls-loops", services: [EchoService()]).serve(over: server)
        let credentials = try TLSCredentials.client(
            certificateFile: clientPair.certificate, keyFile: clientPair.key, caFile: certificates.caFile)
        var clients: [RPCClient] = []
        for _ in 0..<4 {
            let client = RPCClient(
                transports: [try TCPClientTransport(endpoint: server.address, tls: credentials)],
                retry: .init(maxAttempts: 1))
            #expect(try await client.unary(RpcV1.Echo.echo, RpcV1.EchoRequest(payload: [1])).payload == [1])
            clients.append(client)
        }
        #expect(server.figures().connectionsPerLoop == [2, 2])
        for client in clients {
            let payload = (0..<(1 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 13) }
            #expect(try await client.unary(RpcV1.Echo.echo, RpcV1.EchoRequest(payload: payload)).payload == payload)
            var streamed = 0
            for try await reply in client.serverStreaming(RpcV1.Echo.stream, RpcV1.EchoRequest(payload: [5], count: 20))
            {
                #expect(reply.index == streamed)
                streamed += 1
            }
            #expect(streamed == 20)
        }
        for client in clients { client.close() }
        await server.shutdown(grace: .seconds(1))
        certificates.remove()
    }

    @Test func theLoopFiguresCountEveryLoopsTurns() async throws {
        try await Harness.with(.tcp, limits: Self.limits(loops: 2)) { harness in
            let tcp = try #require(harness.tcp)
            var clients: [RPCClient] = []
            for _ in 0..<2 { clients.append(try await connectAndCall(tcp)) }
            let each = tcp.loops.map { $0.loop.turns.snapshot.turns }
            let all = try #require(harness.rpc.stats.loopFigures).turns
            #expect(each.allSatisfy { $0 > 0 })
            #expect(all >= each.reduce(0, +))
            for client in clients { client.close() }
        }
    }
}

/// A pass-through stream over a server's TCP connection that notes on which loop thread each read
/// is delivered to the protocol above it.
final class LoopWitness: PassThroughStream, @unchecked Sendable {
    /// Names of the loops of the reads delivered, and reads delivered off their loop's thread.
    let deliveries = Mutex<(loops: Set<String>, offLoop: Int)>(([], 0))

    override func received(_ bytes: UnsafeRawBufferPointer) {
        let name = socket.loop.name
        let onLoop = socket.loop.inLoop
        deliveries.withLock { deliveries in
            deliveries.loops.insert(name)
            if !onLoop { deliveries.offLoop += 1 }
        }
        reader?.received(bytes)
    }
}
