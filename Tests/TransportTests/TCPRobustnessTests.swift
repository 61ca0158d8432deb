import Base
import Foundation
import RPC
import RPCTestSupport
import RPCTesting
import RPCWire
import Schema
import Synchronization
import TestSupport
import Testing

@testable import Connect
@testable import Framing
@testable import ServerCore
@testable import ServerSeam
@testable import TCP
@testable import TLSStreams
@testable import Transport

/// A server must shrug off clients that send garbage, too much, too little or too slowly, and keep
/// serving everyone else. The server's timeouts and the clients' pace stretch together on a busy machine (`TestTime`).
@Suite struct TCPRobustnessTests {
    /// `milliseconds` stretched by `TestTime`.
    static func ms(_ milliseconds: Int) -> Duration { TestTime.scaled(.milliseconds(milliseconds)) }

    /// `milliseconds` stretched by `TestTime`, as a request's `delayMs` or `timeoutMicros / 1000`.
    static func scaledCount(_ milliseconds: Int) -> Int { Int((Double(milliseconds) * TestTime.scale).rounded()) }

    static var quickLimits: TCPServer.Limits {
        var limits = TCPServer.Limits()
        limits.frameTimeout = ms(600)
        limits.idleTimeout = ms(2000)
        limits.maxFrameSize = 1 << 20
        return limits
    }

    /// Fails unless the harness still answers an echo.
    func expectServing(_ harness: Harness) async throws {
        let reply = try await harness.client.unary(
            RpcV1.Echo.echo, RpcV1.EchoRequest(payload: [42]), options: CallOptions(timeout: Self.ms(5000)))
        #expect(reply.payload == [42])
    }

    @Test func anyTimeoutAClientSendsIsHandled() async throws {
        try await Harness.with(.tcp, limits: Self.quickLimits) { harness in
            let socket = try RawSocket(port: harness.tcp!.port)
            // None left for the call, a microsecond, and the largest a frame can carry.
            socket.sendEcho("a", id: 1, timeoutMicros: 0)
            socket.sendEcho("b", id: 2, timeoutMicros: 1)
            socket.sendEcho("c", id: 3, timeoutMicros: .max)
            var codes: [UInt64: UInt32] = [:]
            for _ in 0..<3 {
                let reply = try await socket.receiveFrame()
                codes[reply.callID] = reply.statusCode
            }
            #expect(codes[1] == StatusCode.deadlineExceeded.rawValue)
            #expect(
                codes[2].map { [StatusCode.ok.rawValue, StatusCode.deadlineExceeded.rawValue].contains($0) } == true)
            #expect(codes[3] == StatusCode.ok.rawValue)
            try await expectServing(harness)
        }
    }

    @Test func randomBytesCloseOnlyThatConnection() async throws {
        try await Harness.with(.tcp, limits: Self.quickLimits) { harness in
            var generator = SystemRandomNumberGenerator()
            for _ in 0..<20 {
                let socket = try RawSocket(port: harness.tcp!.port)
                socket.write(
                    (0..<Int.random(in: 1...4096, using: &generator)).map { _ in
                        UInt8.random(in: 0...255, using: &generator)
                    })
                #expect(await socket.readUntilClosed().closed)
                try await expectServing(harness)
            }
        }
    }

    @Test func fourGibibyteLengthGetsResourceExhaustedThenClose() async throws {
        try await Harness.with(.tcp, limits: Self.quickLimits) { harness in
            let socket = try RawSocket(port: harness.tcp!.port)
            socket.write([0, 0xFF, 0xFF, 0xFF, 0xFF])
            let (bytes, closed) = await socket.readUntilClosed()
            #expect(closed)
            let decoder = FrameDecoder()
            decoder.append(bytes)
            let envelope = try #require(try decoder.next())
            let frame = try RpcV1.Frame(serializedBytes: envelope)
            #expect(frame.kind == .status)
            #expect(frame.statusCode == StatusCode.resourceExhausted.rawValue)
            try await expectServing(harness)
        }
    }

    @Test func envelopeThatDoesNotDecodeClosesTheConnection() async throws {
        try await Harness.with(.tcp, limits: Self.quickLimits) { harness in
            let socket = try RawSocket(port: harness.tcp!.port)
            socket.write(FrameCodec.encode([0xFF, 0xFF, 0xFF, 0xFF, 0x0F]))
            #expect(await socket.readUntilClosed().closed)
            try await expectServing(harness)
        }
    }

    @Test func silentClientIsDisconnected() async throws {
        try await Harness.with(.tcp, limits: Self.quickLimits) { harness in
            let socket = try RawSocket(port: harness.tcp!.port)
            let started = ContinuousClock.now
            #expect(await socket.readUntilClosed().closed)
            #expect(ContinuousClock.now - started < Self.ms(5000))
            try await expectServing(harness)
        }
    }

    @Test func oneBytePerIntervalClientIsDisconnected() async throws {
        try await Harness.with(.tcp, limits: Self.quickLimits) { harness in
            let socket = try RawSocket(port: harness.tcp!.port)
            let frame = FrameCodec.encode(
                RpcV1.Frame(callID: 1, kind: .request, method: RpcV1.Echo.echo.path).serializedBytes())
            var closed = false
            for byte in frame {
                // Faster than the frame timeout per byte, far slower than it for the whole frame.
                try await Task.sleep(for: Self.ms(150))
                if !socket.write([byte]) {
                    closed = true
                    break
                }
            }
            let closedByServer = closed ? true : await socket.readUntilClosed().closed
            #expect(closedByServer)
            try await expectServing(harness)
        }
    }

    @Test func truncatedFrameThenCloseLeavesServerServing() async throws {
        try await Harness.with(.tcp, limits: Self.quickLimits) { harness in
            do {
                let socket = try RawSocket(port: harness.tcp!.port)
                socket.write(
                    Array(FrameCodec.encode(RpcV1.Frame(callID: 1, kind: .request).serializedBytes()).dropLast(2)))
            }
            try await expectServing(harness)
        }
    }

    @Test func boundedFuzzOfMutatedValidFrames() async throws {
        try await Harness.with(.tcp, limits: Self.quickLimits) { harness in
            let valid = FrameCodec.encode(
                RpcV1.Frame(
                    callID: 7, kind: .request, method: RpcV1.Echo.echo.path, hasPayload: true,
                    payload: RpcV1.EchoRequest(payload: [1, 2, 3]).serializedBytes()
                ).serializedBytes())
            var generator = SystemRandomNumberGenerator()
            for round in 0..<150 {
                var bytes = valid
                for _ in 0..<Int.random(in: 1...6, using: &generator) {
                    let position = Int.random(in: 0..<bytes.count, using: &generator)
                    switch Int.random(in: 0..<3, using: &generator) {
                    case 0: bytes[position] = UInt8.random(in: 0...255, using: &generator)
                    case 1: bytes.remove(at: position)
                    default: bytes.insert(UInt8.random(in: 0...255, using: &generator), at: position)
                    }
                }
                let socket = try RawSocket(port: harness.tcp!.port)
                socket.write(bytes)
                if round % 10 == 0 { try await expectServing(harness) }
            }
            try await expectServing(harness)
            let stats = try await harness.client.unary(RpcV1.Stats.getStats, RpcV1.GetStatsRequest())
            #expect(stats.totalConnections >= 150)
            // The event loop's turns are reported beside the calls.
            let loop = try #require(stats.loop)
            #expect(loop.turns > 0 && loop.busySeconds > 0 && loop.longestTurnMs > 0)
        }
    }

    @Test func aClientThatKeepsSendingIsNotTakenForAStalledOne() async throws {
        var limits = Self.quickLimits
        limits.frameTimeout = Self.ms(1000)
        try await Harness.with(.tcp, limits: limits) { harness in
            let socket = try RawSocket(port: harness.tcp!.port)
            // Each write ends one frame and begins the next, so every read the server makes ends
            // mid-frame, for three times the frame timeout; yet no frame takes more than 50 ms.
            let frames = (1...60).map { RawSocket.echoFrame(RpcV1.EchoRequest(payload: [UInt8($0)]), id: UInt64($0)) }
            var rest: [UInt8] = []
            for frame in frames {
                socket.write(rest + frame.prefix(frame.count / 2))
                rest = Array(frame.dropFirst(frame.count / 2))
                try await Task.sleep(for: Self.ms(50))
            }
            socket.write(rest)
            var answered: Set<UInt64> = []
            for _ in frames { answered.insert(try await socket.receiveFrame().callID) }
            #expect(answered == Set(1...60))
        }
    }

    @Test func idleTimeCountsFromTheLastAnswerNotFromTheLastRequest() async throws {
        var limits = Self.quickLimits
        limits.idleTimeout = Self.ms(2000)
        limits.frameTimeout = Self.ms(2000)
        try await Harness.with(.tcp, limits: limits) { harness in
            let socket = try RawSocket(port: harness.tcp!.port)
            // A call that outlasts the idle timeout: its request is the last frame for 3 s.
            socket.write(
                RawSocket.echoFrame(RpcV1.EchoRequest(payload: [1], delayMs: UInt32(Self.scaledCount(3000))), id: 1))
            #expect(try await socket.receiveFrame().statusCode == StatusCode.ok.rawValue)
            // Just answered, so not idle: a sweep (every 500 ms) must leave the connection open.
            try await Task.sleep(for: Self.ms(700))
            socket.sendEcho("again", id: 2)
            let reply = try await socket.receiveFrame()
            #expect(reply.callID == 2)
            #expect(reply.statusCode == StatusCode.ok.rawValue)
        }
    }

    @Test func tooLargeFrameIsAnsweredAfterTheAnswersBeforeIt() async throws {
        var limits = Self.quickLimits
        limits.writeHighWater = 256 << 20  // keep reading however much waits to be written
        limits.frameTimeout = .seconds(30)
        limits.idleTimeout = .seconds(30)
        try await Harness.with(.tcp, limits: limits) { harness in
            let socket = try RawSocket(port: harness.tcp!.port)
            // 16 MB of answers that the client does not read yet: far more than the socket buffers
            // of a connection that is not read hold, so most of them wait in the server's write queue.
            let payload = [UInt8](repeating: 7, count: 1_000_000)
            socket.write((1...16).flatMap { RawSocket.echoFrame(RpcV1.EchoRequest(payload: payload), id: UInt64($0)) })
            try await waitUntil { harness.tcp!.figures().callsInFlight == 0 }
            try await Task.sleep(for: Self.ms(200))
            socket.write([0, 0xFF, 0xFF, 0xFF, 0xFF])
            let (bytes, closed) = await socket.readUntilClosed()
            #expect(closed)
            let decoder = FrameDecoder()
            decoder.append(bytes)
            var statuses: [UInt64: UInt32] = [:]
            while let envelope = try decoder.next() {
                let frame = try RpcV1.Frame(serializedBytes: envelope)
                statuses[frame.callID] = frame.statusCode
            }
            #expect(statuses.count == 17, "only \(bytes.count) bytes arrived before the connection closed")
            #expect(statuses[0] == StatusCode.resourceExhausted.rawValue)
            #expect((1...16).allSatisfy { statuses[$0] == StatusCode.ok.rawValue })
            try await expectServing(harness)
        }
    }

    @Test func aCallIdUsedAgainIsNotHeldToTheDeadlineOfTheCallThatHadItBefore() async throws {
        try await Harness.with(.tcp, limits: Self.quickLimits) { harness in
            let socket = try RawSocket(port: harness.tcp!.port)
            socket.sendEcho("first", id: 1, timeoutMicros: UInt64(Self.scaledCount(2000)) * 1000)
            #expect(try await socket.receiveFrame().statusCode == StatusCode.ok.rawValue)
            // Call 1 is over, so its id may be used again: by a call without a deadline that
            // outlasts the first one's.
            socket.write(
                RawSocket.echoFrame(RpcV1.EchoRequest(payload: [2], delayMs: UInt32(Self.scaledCount(3000))), id: 1))
            let reply = try await socket.receiveFrame()
            #expect(reply.callID == 1)
            #expect(reply.statusCode == StatusCode.ok.rawValue, "\(reply.statusMessage)")
        }
    }

    @Test func connectionsBeyondTheLimitAreRefused() async throws {
        var limits = Self.quickLimits
        limits.maxConnections = 2
        // Long enough that only the limit, not a timeout, closes the third connection.
        limits.frameTimeout = .seconds(30)
        try await Harness.with(.tcp, limits: limits) { harness in
            try await expectServing(harness)  // the harness client holds connection 1
            // Both connections have a call open, so neither is reclaimed as idle.
            let busy = Task {
                try? await harness.client.unary(RpcV1.Echo.echo, RpcV1.EchoRequest(payload: [1], delayMs: 5000))
            }
            let second = try RawSocket(port: harness.tcp!.port)
            second.write(RawSocket.echoFrame(RpcV1.EchoRequest(payload: [2], delayMs: 5000), id: 1))
            try await waitUntil { harness.tcp!.figures().callsInFlight == 2 }
            let third = try RawSocket(port: harness.tcp!.port)
            let (bytes, closed) = await third.readUntilClosed()
            #expect(closed)
            // Told why before the close.
            let decoder = FrameDecoder()
            decoder.append(bytes)
            let status = try RpcV1.Frame(serializedBytes: try #require(try decoder.next()))
            #expect(status.callID == 0 && status.statusCode == StatusCode.resourceExhausted.rawValue)
            #expect(harness.rpc.stats.connectionFigures.rejected >= 1)
            busy.cancel()
            _ = second
        }
    }

    @Test func aClientThatIgnoresItsCreditLosesThatCallNotTheConnection() async throws {
        let rpc = RPCServer(name: "credit", services: [NeverReads()])
        let server = try TCPServer(rpc: rpc, port: 0, limits: Self.quickLimits)
        let socket = try RawSocket(port: server.port)
        socket.write(
            FrameCodec.encode(
                RpcV1.Frame(
                    callID: 1, kind: .request, method: RpcV1.Echo.collect.path, clientStream: true
                ).serializedBytes()))
        // 17 × 64 KiB: more than the 1 MiB window, to a handler that reads nothing.
        let chunk = RpcV1.EchoRequest(payload: Array(repeating: 9, count: 64 << 10)).serializedBytes()
        for _ in 0..<17 {
            socket.write(
                FrameCodec.encode(
                    RpcV1.Frame(callID: 1, kind: .message, hasPayload: true, payload: chunk).serializedBytes()))
        }
        let answer = try await socket.receiveFrame()
        #expect(answer.callID == 1 && answer.kind == .status)
        #expect(answer.statusCode == StatusCode.resourceExhausted.rawValue, "\(answer.statusMessage)")
        // The connection serves on.
        socket.sendEcho("still here", id: 2)
        let echo = try await socket.receiveFrame()
        #expect(echo.callID == 2 && echo.statusCode == StatusCode.ok.rawValue)
        try await waitUntil { server.figures().callsInFlight == 0 }
        await server.shutdown(grace: .seconds(1))
    }

    @Test func aHalfCloseInsideAMessageIsInvalidArgument() async throws {
        try await Harness.with(.tcp, limits: Self.quickLimits) { harness in
            let socket = try RawSocket(port: harness.tcp!.port)
            socket.write(
                FrameCodec.encode(
                    RpcV1.Frame(
                        callID: 1, kind: .request, method: RpcV1.Echo.collect.path, clientStream: true
                    ).serializedBytes()))
            let first = RpcV1.EchoRequest(payload: [1, 2, 3]).serializedBytes()
            socket.write(
                FrameCodec.encode(
                    RpcV1.Frame(callID: 1, kind: .message, hasPayload: true, payload: first).serializedBytes()))
            socket.write(
                FrameCodec.encode(
                    RpcV1.Frame(
                        callID: 1, kind: .message, hasPayload: true, payload: [0x0A, 0x10], continues: true
                    ).serializedBytes()))
            socket.write(FrameCodec.encode(RpcV1.Frame(callID: 1, kind: .endStream).serializedBytes()))
            let answer = try await socket.receiveFrame()
            #expect(answer.callID == 1)
            #expect(answer.statusCode == StatusCode.invalidArgument.rawValue, "\(answer.statusMessage)")
            try await expectServing(harness)
        }
    }

    @Test func aRequestMessageOverTheSizeLimitEndsItsCall() async throws {
        var limits = Self.quickLimits
        limits.maxMessageSize = 100 << 10
        try await Harness.with(.tcp, limits: limits) { harness in
            // One 80 KiB request passes; 120 KiB (two MESSAGE frames of 64 KiB + the rest) does not,
            // whether it comes in one frame or in chunks.
            let fits = try await harness.client.clientStreaming(RpcV1.Echo.collect) { writer in
                try await writer.send(RpcV1.EchoRequest(payload: Array(repeating: 1, count: 80 << 10)))
            }
            #expect(fits.payload.count == 80 << 10)
            await expectStatus(.resourceExhausted) {
                _ = try await harness.client.clientStreaming(RpcV1.Echo.collect) { writer in
                    try await writer.send(RpcV1.EchoRequest(payload: Array(repeating: 1, count: 120 << 10)))
                }
            }
            let socket = try RawSocket(port: harness.tcp!.port)
            socket.write(
                FrameCodec.encode(
                    RpcV1.Frame(
                        callID: 1, kind: .request, method: RpcV1.Echo.collect.path, clientStream: true
                    ).serializedBytes()))
            let part = [UInt8](repeating: 0, count: 64 << 10)
            for _ in 0..<2 {
                socket.write(
                    FrameCodec.encode(
                        RpcV1.Frame(callID: 1, kind: .message, hasPayload: true, payload: part, continues: true)
                            .serializedBytes()))
            }
            let answer = try await socket.receiveFrame()
            #expect(answer.statusCode == StatusCode.resourceExhausted.rawValue, "\(answer.statusMessage)")
            try await expectServing(harness)
        }
    }

    /// A write the socket refuses (its writing side already shut down by a lingering close, as a late answer finds
    /// it) gives back what it charged the memory budget: the charge stayed for good, and the server's budget shrank
    /// by every such answer.
    @Test func aWriteTheSocketRefusesGivesItsBudgetBack() async throws {
        let loop = EventLoop(name: "test-loop")
        defer { loop.shutdown() }
        let accepted = Mutex<TCPConnection?>(nil)
        let listener = try loop.submit { () -> Result<TCPListener, RPCError> in
            TCPListener.open(loop: loop, address: SocketAddress(host: "127.0.0.1", port: 0)!) { connection in
                connection.start()
                accepted.withLock { $0 = connection }
            }
        }.get()
        defer { loop.execute { listener.close() } }
        let port = try #require(listener.address.split(separator: ":").last.flatMap { Int($0) })
        let socket = try RawSocket(port: port)
        defer { withExtendedLifetime(socket) {} }
        try await waitUntil { accepted.withLock { $0 != nil } }
        let budget = MemoryBudget(limit: 1 << 20)
        let closed = Mutex<String?>(nil)
        _ = loop.submit {
            let connection = accepted.withLock { $0 }!
            connection.budget = budget
            connection.onClose = { reason in closed.withLock { $0 = reason } }
            connection.close(afterFlushing: "done")  // nothing queued: writing shuts down now, and it lingers
            connection.send(bytesOfSize: 100, sealing: false) { _ = $0.initializeMemory(as: UInt8.self, repeating: 1) }
            return 0
        }
        try await waitUntil { closed.withLock { $0 != nil } }
        #expect(closed.withLock { $0 }?.contains("write failed") == true, "\(closed.withLock { $0 } ?? "")")
        #expect(budget.used == 0)
    }
}
