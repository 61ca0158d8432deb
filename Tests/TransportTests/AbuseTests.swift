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

/// Issue 9: no client can starve or lock out the others, memory stays within a budget, and every
/// connection-level error is told to the client (a STATUS frame with call id 0) before the close.
@Suite(.serialized, .timeLimit(.minutes(2))) struct AbuseTests {
    /// Echo whose payload "busy" holds its worker for 20 ms (no suspension), "big" answers 64 KiB, "huge" 1 MiB;
    /// counts the calls that started. "spin" computes (never suspending) for up to 5 s, asking between
    /// steps whether its call is still wanted, and counts in `spinsStopped` the times it was told not.
    final class BusyService: RPCService, @unchecked Sendable {
        let started = Atomic<Int>(0)
        let spinsStopped = Atomic<Int>(0)

        func register(in router: inout RPCRouter) {
            router.unary(RpcV1.Echo.echo) { [self] request, context in
                started.add(1, ordering: .relaxed)
                switch String(decoding: request.payload, as: UTF8.self) {
                case "busy": usleep(20_000)
                case "spin":
                    for _ in 0..<5000 {
                        do { try context.checkAlive() } catch {
                            spinsStopped.add(1, ordering: .relaxed)
                            throw error
                        }
                        usleep(1000)
                    }
                case "big": return RpcV1.EchoResponse(payload: [UInt8](repeating: 7, count: 64 << 10))
                case "huge": return RpcV1.EchoResponse(payload: [UInt8](repeating: 7, count: 1 << 20))
                case "slow": try await Task.sleep(for: .seconds(30))
                default: break
                }
                return RpcV1.EchoResponse(payload: request.payload)
            }
        }
    }

    static var limits: TCPServer.Limits {
        var limits = TCPServer.Limits()
        limits.frameTimeout = .seconds(30)
        limits.idleTimeout = .seconds(30)
        limits.maxFrameSize = 4 << 20
        return limits
    }

    /// Reads frames until the server closes; the frames that came.
    func framesUntilClosed(_ socket: RawSocket) async throws -> [RpcV1.Frame] {
        let (bytes, closed) = await socket.readUntilClosed()
        #expect(closed, "the server did not close the connection")
        let decoder = FrameDecoder(maxFrameSize: 64 << 20)
        decoder.append(bytes)
        var frames: [RpcV1.Frame] = []
        while let envelope = try decoder.next() { frames.append(try RpcV1.Frame(serializedBytes: envelope)) }
        return frames
    }

    /// Expects the connection to end with exactly one call-id-0 STATUS of `code`, nothing after it.
    func expectConnectionError(
        _ socket: RawSocket, _ code: StatusCode, sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        let frames = try await framesUntilClosed(socket)
        let last = try #require(frames.last, "closed without a status", sourceLocation: sourceLocation)
        #expect(last.kind == .status && last.callID == 0, sourceLocation: sourceLocation)
        #expect(last.statusCode == code.rawValue, "\(last.statusMessage)", sourceLocation: sourceLocation)
    }

    // MARK: Connection-level errors (#4, #5, #7)

    @Test(arguments: ["unknown kind", "status kind", "zero length", "flag byte", "garbage envelope", "call id 0"])
    func protocolErrorsAreToldBeforeTheClose(_ kind: String) async throws {
        try await Harness.with(.tcp, limits: Self.limits) { harness in
            let socket = try RawSocket(port: harness.tcp!.port)
            switch kind {
            case "unknown kind":
                socket.write(
                    FrameCodec.encode(RpcV1.Frame(callID: 1, kind: RpcV1.FrameKind(rawValue: 42)).serializedBytes()))
            case "status kind": socket.write(FrameCodec.encode(RpcV1.Frame(callID: 1, kind: .status).serializedBytes()))
            case "zero length": socket.write([0, 0, 0, 0, 0])
            case "flag byte": socket.write([1, 0, 0, 0, 2, 8, 1])
            case "garbage envelope": socket.write(FrameCodec.encode([0xFF, 0xFF, 0xFF, 0xFF, 0x0F]))
            default: socket.sendEcho("zero", id: 0)
            }
            try await expectConnectionError(socket, .internalError)
            let reply = try await harness.client.unary(RpcV1.Echo.echo, RpcV1.EchoRequest(payload: [1]))
            #expect(reply.payload == [1])
        }
    }

    @Test func aReusedCallIDFailsTheConnectionAndTheEarlierCallIsNotAnsweredUnderIt() async throws {
        try await Harness.with(.tcp, limits: Self.limits) { harness in
            let socket = try RawSocket(port: harness.tcp!.port)
            socket.write(RawSocket.echoFrame(RpcV1.EchoRequest(payload: [1], delayMs: 300), id: 7))
            socket.write(RawSocket.echoFrame(RpcV1.EchoRequest(payload: [2]), id: 7))
            let frames = try await framesUntilClosed(socket)
            #expect(frames.count == 1, "\(frames.map { ($0.callID, $0.statusCode) })")
            #expect(frames.first?.callID == 0)
            #expect(frames.first?.statusCode == StatusCode.internalError.rawValue)
            #expect(frames.first?.statusMessage.contains("call id 7 is already open") == true)
            try await expectNoCallsLeft(harness)
        }
    }

    @Test func callsBeyondTheConcurrentLimitAreRefusedUnderTheirOwnID() async throws {
        var limits = Self.limits
        limits.maxConcurrentCalls = 2
        try await Harness.with(.tcp, limits: limits) { harness in
            let socket = try RawSocket(port: harness.tcp!.port)
            for id in 1...3 {
                socket.write(RawSocket.echoFrame(RpcV1.EchoRequest(payload: [UInt8(id)], delayMs: 300), id: UInt64(id)))
            }
            var codes: [UInt64: UInt32] = [:]
            for _ in 1...3 {
                let frame = try await socket.receiveFrame()
                codes[frame.callID] = frame.statusCode
            }
            #expect(codes == [1: 0, 2: 0, 3: StatusCode.resourceExhausted.rawValue])
            socket.sendEcho("after", id: 4)
            #expect(try await socket.receiveFrame().statusCode == 0)
        }
    }

    @Test func aNULInAMethodMetadataOrRequestStringIsInvalidArgumentForThatCall() async throws {
        try await Harness.with(.tcp, limits: Self.limits) { harness in
            let socket = try RawSocket(port: harness.tcp!.port)
            // Our encoder cannot write a NUL into a string (protobuf-c's are C strings): put it in after.
            func withNUL(_ bytes: [UInt8]) -> [UInt8] { bytes.map { $0 == UInt8(ascii: "~") ? 0 : $0 } }
            let check = RpcV1.Health.check.path
            socket.write(
                FrameCodec.encode(
                    withNUL(RpcV1.Frame(callID: 1, kind: .request, method: check + "~junk").serializedBytes())))
            socket.write(
                FrameCodec.encode(
                    withNUL(
                        RpcV1.Frame(
                            callID: 2, kind: .request, method: check,
                            metadata: [RpcV1.MetadataEntry(key: "k", value: "v~w")]
                        ).serializedBytes())))
            socket.write(
                FrameCodec.encode(
                    RpcV1.Frame(
                        callID: 3, kind: .request, method: check, hasPayload: true,
                        payload: withNUL(RpcV1.HealthCheckRequest(service: "zel~xyz").serializedBytes())
                    ).serializedBytes()))
            socket.sendEcho("still open", id: 4)
            var codes: [UInt64: UInt32] = [:]
            for _ in 1...4 {
                let frame = try await socket.receiveFrame()
                codes[frame.callID] = frame.statusCode
            }
            let invalid = StatusCode.invalidArgument.rawValue
            #expect(codes == [1: invalid, 2: invalid, 3: invalid, 4: 0])
        }
    }

    // MARK: Fairness (#1) and memory (#2)

    @Test func onePipeliningClientDoesNotStarveAnother() async throws {
        let service = BusyService()
        var limits = Self.limits
        limits.workers = 1
        try await Harness.with(.tcp, services: [service], limits: limits) { harness in
            let hog = try RawSocket(port: harness.tcp!.port)
            hog.write(
                (1...60).flatMap { RawSocket.echoFrame(RpcV1.EchoRequest(payload: Array("busy".utf8)), id: UInt64($0)) }
            )
            try await waitUntil { service.started.load(ordering: .relaxed) >= 2 }
            let reply = try await harness.client.unary(RpcV1.Echo.echo, RpcV1.EchoRequest(payload: [9]))
            #expect(reply.payload == [9])
            // Taken in turn: the other client waited for a call or two of the hog's, not for all 60.
            let before = service.started.load(ordering: .relaxed)
            #expect(before < 20, "\(before) of the hog's calls started before the other client's")
        }
    }

    @Test func aClientThatDoesNotReadStopsGettingItsCallsStarted() async throws {
        let service = BusyService()
        var limits = Self.limits
        limits.writeHighWater = 256 << 10
        limits.maxConcurrentCalls = 300
        try await Harness.with(.tcp, services: [service], limits: limits) { harness in
            let socket = try RawSocket(port: harness.tcp!.port)
            // 250 answers of 64 KiB (16 MiB, far more than the sockets' buffers), not read while they are asked for.
            socket.write(
                (1...250).flatMap { RawSocket.echoFrame(RpcV1.EchoRequest(payload: Array("big".utf8)), id: UInt64($0)) }
            )
            try await Task.sleep(for: TestTime.scaled(.milliseconds(500)))
            let started = service.started.load(ordering: .relaxed)
            #expect(started < 200, "\(started) calls started for a client that reads nothing")
            // Once it reads, the rest run.
            for _ in 1...250 {
                let frame = try await socket.receiveFrame()
                #expect(frame.statusCode == 0)
            }
            #expect(service.started.load(ordering: .relaxed) == 250)
        }
    }

    @Test func theCallsAClosedConnectionLeftQueuedNeverRun() async throws {
        let service = BusyService()
        var limits = Self.limits
        limits.workers = 1
        try await Harness.with(.tcp, services: [service], limits: limits) { harness in
            let socket = try RawSocket(port: harness.tcp!.port)
            socket.write(
                (1...30).flatMap { RawSocket.echoFrame(RpcV1.EchoRequest(payload: Array("busy".utf8)), id: UInt64($0)) }
            )
            try await waitUntil { service.started.load(ordering: .relaxed) >= 1 }
            socket.finishWriting()
            try await waitUntil { harness.tcp!.figures().callsInFlight == 0 }
            try await Task.sleep(for: TestTime.scaled(.milliseconds(100)))
            // The one running when the client left (and perhaps the next, taken meanwhile), not the 28 others.
            let started = service.started.load(ordering: .relaxed)
            #expect(started <= 2, "\(started) of 30 calls ran for a client that had gone")
        }
    }

    /// A reused call id fails the connection: calls that came in the same read as the offending
    /// frame (here 13 frames before it) are dropped before any worker starts one.
    @Test func callsBeforeAReusedIDInTheSameReadNeverRun() async throws {
        let service = BusyService()
        try await Harness.with(.tcp, services: [service], limits: Self.limits) { harness in
            for _ in 0..<20 {
                let socket = try RawSocket(port: harness.tcp!.port)
                let busy = Array("busy".utf8)
                socket.write(
                    RawSocket.echoFrame(RpcV1.EchoRequest(payload: busy), id: 7)
                        + (8...19).flatMap { RawSocket.echoFrame(RpcV1.EchoRequest(payload: busy), id: $0) }
                        + RawSocket.echoFrame(RpcV1.EchoRequest(payload: busy), id: 7))
                let frames = try await framesUntilClosed(socket)
                #expect(frames.count == 1 && frames.first?.callID == 0)
            }
            try await waitUntil { harness.tcp!.figures().callsInFlight == 0 }
            let started = service.started.load(ordering: .relaxed)
            #expect(started == 0, "\(started) calls ran for connections closed by the same read that brought them")
        }
    }

    /// A handler that computes without suspending runs on its worker before the server knows its task
    /// (`Task.immediate` returns that at the first suspension): the end of its call must still reach it.
    @Test(arguments: ["reused call id", "client cancel", "client gone"])
    func aHandlerComputingWithoutSuspendingLearnsThatItsCallIsOver(_ how: String) async throws {
        let service = BusyService()
        try await Harness.with(.tcp, services: [service], limits: Self.limits) { harness in
            let socket = try RawSocket(port: harness.tcp!.port)
            socket.sendEcho("spin", id: 7)
            try await waitUntil { service.started.load(ordering: .relaxed) == 1 }
            let ended = ContinuousClock.now
            switch how {
            case "reused call id": socket.sendEcho("again", id: 7)
            case "client cancel":
                socket.write(FrameCodec.encode(RpcV1.Frame(callID: 7, kind: .cancel).serializedBytes()))
            default: socket.finishWriting()
            }
            try await waitUntil { service.spinsStopped.load(ordering: .relaxed) == 1 }
            #expect(ContinuousClock.now - ended < TestTime.scaled(.seconds(2)))
            try await waitUntil { harness.tcp!.figures().callsInFlight == 0 }
        }
    }

    /// libuv reads a readable socket up to 32 times per loop turn (8 MiB with the loop's 256 KiB
    /// buffer): clients streaming large frames held the loop, and every other client's accept and
    /// read, for hundreds of milliseconds per turn. A turn now reads one buffer per connection.
    @Test func oneLoopTurnReadsABoundedAmountWhateverClientsSend() async throws {
        var limits = Self.limits
        limits.maxFrameSize = 16 << 20
        try await Harness.with(.tcp, limits: limits) { harness in
            let server = harness.tcp!
            let sockets = try (0..<4).map { _ in try RawSocket(port: server.port) }
            // Each sends 12 MiB of a 16 MiB frame at once, from a thread of its own.
            let body = [0, 1, 0, 0, 0] + [UInt8](repeating: 0, count: 12 << 20)
            await withTaskGroup(of: Void.self) { group in
                for socket in sockets { group.addTask { _ = try? await offPool { socket.write(body) } } }
            }
            try await Task.sleep(for: TestTime.scaled(.milliseconds(200)))
            let largest = server.loop.submit { server.loop.largestTurn.read }
            // one read per connection, the harness client's too
            let bound = (sockets.count + 1) * server.loop.readBuffer.count
            #expect(largest > 0 && largest <= bound, "a loop turn read \(largest) bytes (bound \(bound))")
        }
    }

    /// Reads which feed large frames share a budget per loop turn. Before it, every readable
    /// connection read at least 16 KiB a turn, and the turn read 1 MiB in full buffers: with 40
    /// uploaders each turn copied ~1.5 MiB into new frame buffers (8 ms on the project's VM).
    @Test func largeFramesShareABoundedAmountOfEachLoopTurnAndAllArrive() async throws {
        try await Harness.with(.tcp, limits: Self.limits) { harness in
            let server = harness.tcp!
            let size = 1 << 20
            let frames = (0..<6).map {
                RawSocket.echoFrame(RpcV1.EchoRequest(payload: [UInt8](repeating: UInt8($0), count: size)), id: 1)
            }
            let sockets = try frames.map { _ in try RawSocket(port: server.port) }
            // Headers first: once every frame is admitted, every byte read feeds a large frame.
            for (socket, frame) in zip(sockets, frames) { socket.write(Array(frame.prefix(64))) }
            try await waitUntil { server.loop.submit { server.budget.used } >= frames.count * size }
            server.loop.submit { server.loop.largestTurn = EventLoop.TurnCounters() }
            await withTaskGroup(of: Void.self) { group in
                for (socket, frame) in zip(sockets, frames) {
                    group.addTask { _ = try? await offPool { socket.write(Array(frame.dropFirst(64))) } }
                }
            }
            for (index, socket) in sockets.enumerated() {
                let header = try #require(await socket.read(count: FrameCodec.headerSize))
                let length = Int(header[1]) << 24 | Int(header[2]) << 16 | Int(header[3]) << 8 | Int(header[4])
                let answer = try RpcV1.Frame(serializedBytes: try #require(await socket.read(count: length)))
                let reply = try RpcV1.EchoResponse(serializedBytes: answer.payload)
                #expect(reply.payload.count == size && reply.payload.first == UInt8(index))
            }
            let (bulk, all) = server.loop.submit { (server.loop.largestTurn.bulk, server.loop.largestTurn.read) }
            #expect(bulk > 0 && bulk <= EventLoop.turnBulkBudget, "a turn read \(bulk) bytes of large frames")
            #expect(all <= EventLoop.turnBulkBudget + EventLoop.minimumRead, "a turn read \(all) bytes")
        }
    }

    /// The same for HTTP: a unary body the budget holds bytes for reads in bulk. Before, HTTP bodies
    /// read a full buffer per connection per turn, and 40 clients sending 60 MiB bodies made 100-130 ms turns.
    @Test func largeHTTPBodiesShareABoundedAmountOfEachLoopTurnAndAllArrive() async throws {
        try await Harness.with(.tcp, limits: Self.limits) { harness in
            let server = harness.tcp!
            let size = 1 << 20
            let bodies = (0..<6).map {
                Array(#"{"payload":""#.utf8) + [UInt8](repeating: 0x41 + UInt8($0), count: size) + Array(#""}"#.utf8)
            }
            let sockets = try bodies.map { _ in try RawSocket(port: server.port) }
            for (socket, body) in zip(sockets, bodies) {
                let head =
                    "POST /menagerie.rpc.v1.Echo/Echo HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nConnection: close\r\n"
                    + "Content-Length: \(body.count)\r\n\r\n"
                socket.write(Array(head.utf8) + body.prefix(64))
            }
            try await waitUntil { server.loop.submit { server.budget.used } >= bodies.count * size }
            server.loop.submit { server.loop.largestTurn = EventLoop.TurnCounters() }
            await withTaskGroup(of: Void.self) { group in
                for (socket, body) in zip(sockets, bodies) {
                    group.addTask { _ = try? await offPool { socket.write(Array(body.dropFirst(64))) } }
                }
            }
            for socket in sockets {
                let reply = try await StreamReply.read(from: socket)
                #expect(reply.status == 200)
            }
            let (bulk, all) = server.loop.submit { (server.loop.largestTurn.bulk, server.loop.largestTurn.read) }
            #expect(bulk > 0 && bulk <= EventLoop.turnBulkBudget, "a turn read \(bulk) bytes of large bodies")
            #expect(all <= EventLoop.turnBulkBudget + EventLoop.minimumRead, "a turn read \(all) bytes")
        }
    }

    /// Connections arriving together are accepted a share per loop turn, and all of them are; so are
    /// they closed when they leave together. Before, one turn took all that waited: 875 accepts took a
    /// 36 ms turn in the abuse benchmark, 591 closes 10 ms.
    @Test func connectionsArrivingOrLeavingTogetherAreTakenAShareEachTurnAndAll() async throws {
        try await Harness.with(.tcp, limits: Self.limits) { harness in
            let server = harness.tcp!
            let count = 3 * EventLoop.turnAcceptBudget
            // The loop is held while they connect, so the kernel queues them all for one turn.
            let held = DispatchSemaphore(value: 0), holding = DispatchSemaphore(value: 0)
            server.loop.execute {
                holding.signal()
                held.wait()
            }
            holding.wait()
            let sockets = try (0..<count).map { _ in try RawSocket(port: server.port) }
            held.signal()
            try await waitUntil { server.figures().connectionsOpen >= count }
            let most = server.loop.submit { server.loop.largestTurn.accepted }
            #expect(most <= EventLoop.turnAcceptBudget, "one turn accepted \(most) connections")
            // They leave while the loop is held: every end is there for one turn.
            server.loop.execute {
                holding.signal()
                held.wait()
            }
            holding.wait()
            for socket in sockets { socket.finishWriting() }
            try await Task.sleep(for: TestTime.scaled(.milliseconds(100)))
            held.signal()
            try await waitUntil { server.figures().connectionsOpen <= 1 }
            let closes = server.loop.submit { server.loop.largestTurn.closed }
            #expect(closes <= EventLoop.turnCloseBudget, "one turn closed \(closes) connections")
            _ = try await harness.client.unary(RpcV1.Health.check, RpcV1.HealthCheckRequest())
        }
    }

    /// With two loops the holder is on the first and the refused frame on the second, whose loop asks
    /// the first to shed its largest holder.
    @Test(arguments: [1, 2]) func largeFramesBeyondTheMemoryBudgetAreRefusedAndTheLargestHolderClosed(loops: Int)
        async throws
    {
        var limits = Self.limits
        limits.memoryBudget = 1 << 20
        limits.loops = loops
        try await Harness.with(.tcp, limits: limits) { harness in
            let frameSize = 800 << 10
            let header: [UInt8] = [
                0, UInt8(frameSize >> 24), UInt8(frameSize >> 16 & 0xFF), UInt8(frameSize >> 8 & 0xFF),
                UInt8(frameSize & 0xFF),
            ]
            let holder = try RawSocket(port: harness.tcp!.port)
            holder.write(header + [UInt8](repeating: 0, count: 1000))
            try await waitUntil { harness.tcp!.loop.submit { harness.tcp!.budget.used } >= frameSize }
            let second = try RawSocket(port: harness.tcp!.port)
            try await waitUntil { harness.tcp!.figures().connectionsCounted == 2 }
            #expect(harness.tcp!.figures().connectionsPerLoop == (loops == 1 ? [2] : [1, 1]))
            second.write(header + [UInt8](repeating: 0, count: 1000))
            try await expectConnectionError(second, .resourceExhausted)
            try await expectConnectionError(holder, .resourceExhausted)
            try await waitUntil { harness.tcp!.loop.submit { harness.tcp!.budget.used } == 0 }
            // Within budget again: a large frame passes.
            let reply = try await harness.client.unary(
                RpcV1.Echo.echo, RpcV1.EchoRequest(payload: [UInt8](repeating: 3, count: 300 << 10)))
            #expect(reply.payload.count == 300 << 10)
        }
    }

    @Test func unreadAnswersBeyondTheMemoryBudgetCloseTheirConnectionWithAReason() async throws {
        var limits = Self.limits
        limits.memoryBudget = 4 << 20
        limits.writeHighWater = 64 << 20  // far above the budget: only the budget stops this client
        try await Harness.with(.tcp, services: [BusyService()], limits: limits) { harness in
            let hog = try RawSocket(port: harness.tcp!.port)
            // 30 answers of 1 MiB, far more than the sockets' buffers and the budget, not read meanwhile.
            hog.write(
                (1...30).flatMap { RawSocket.echoFrame(RpcV1.EchoRequest(payload: Array("huge".utf8)), id: UInt64($0)) }
            )
            try await waitUntil { harness.tcp!.figures().connectionsFailing == 1 }
            // Reading now (within the grace it has), the hog finds its reason after the answers
            // written before the budget ran out; another client is served meanwhile.
            async let hogFrames = framesUntilClosed(hog)
            let reply = try await harness.client.unary(RpcV1.Echo.echo, RpcV1.EchoRequest(payload: [4]))
            #expect(reply.payload == [4])
            let frames = try await hogFrames
            let answered = frames.filter { $0.callID != 0 }
            #expect(answered.count < 30, "every answer was sent: the budget never stopped the connection")
            #expect(answered.allSatisfy { $0.statusCode == 0 })
            let last = try #require(frames.last)
            // Once in a CI run the hog saw the connection end without this status, lost to a TCP reset; the
            // server lingers on closing now (see closingStatusSurvivesRequestsTheServerNeverRead).
            #expect(
                last.callID == 0 && last.statusCode == StatusCode.resourceExhausted.rawValue, "\(last.statusMessage)")
            #expect(last.statusMessage.contains("memory budget"))
            try await waitUntil { harness.tcp!.loop.submit { harness.tcp!.budget.used } == 0 }
            let again = try await harness.client.unary(RpcV1.Echo.echo, RpcV1.EchoRequest(payload: Array("huge".utf8)))
            #expect(again.payload.count == 1 << 20)
        }
    }

    /// A server that closes a socket with bytes it never read makes its kernel reset the connection,
    /// and the reset throws away what the client had not received yet: here the closing status, behind
    /// megabytes of answers the client had not read. Lingering (shut down writing, read and drop what
    /// comes, then close) delivers it.
    @Test func closingStatusSurvivesRequestsTheServerNeverRead() async throws {
        var limits = Self.limits
        limits.writeHighWater = 64 << 20  // the server keeps reading while its answers wait
        try await Harness.with(.tcp, services: [BusyService()], limits: limits) { harness in
            let socket = try RawSocket(port: harness.tcp!.port)
            // Eight answers of 1 MiB, not read for now: they fill the socket buffers both ways.
            socket.write(
                (1...8).flatMap { RawSocket.echoFrame(RpcV1.EchoRequest(payload: Array("huge".utf8)), id: UInt64($0)) })
            try await waitUntil { harness.tcp!.figures().unwrittenAnswerBytes >= 2 << 20 }
            // A protocol error, then requests the server stops reading at.
            socket.write(
                FrameCodec.encode([0xFF, 0xFF, 0xFF, 0xFF, 0x0F])
                    + (100...1100).flatMap {
                        RawSocket.echoFrame(
                            RpcV1.EchoRequest(payload: [UInt8](repeating: 1, count: 200)), id: UInt64($0))
                    })
            try await waitUntil { harness.tcp!.figures().connectionsFailing == 1 }
            let frames = try await framesUntilClosed(socket)
            let last = try #require(frames.last)
            #expect(
                last.callID == 0 && last.statusCode == StatusCode.internalError.rawValue,
                "the connection ended without its status after \(frames.count) frames")
            #expect(frames.dropLast().allSatisfy { $0.callID != 0 })
        }
    }

    // MARK: Connection limits (#3)

    @Test func anIdleConnectionMakesRoomAndAFullServerSaysWhy() async throws {
        var limits = Self.limits
        limits.maxConnectionsPerPeer = 3
        try await Harness.with(.tcp, services: [BusyService()], limits: limits) { harness in
            let port = harness.tcp!.port
            // Three idle connections that keep their slot with a cancel of an unused id.
            var idle: [RawSocket] = []
            for _ in 0..<3 {
                let socket = try RawSocket(port: port)
                socket.write(FrameCodec.encode(RpcV1.Frame(callID: 99, kind: .cancel).serializedBytes()))
                idle.append(socket)
                try await Task.sleep(for: TestTime.scaled(.milliseconds(20)))
            }
            try await waitUntil { harness.rpc.stats.connectionFigures.open == 3 }
            // A newcomer is served: the connection quiet longest makes room and is told why.
            let reply = try await harness.client.unary(RpcV1.Echo.echo, RpcV1.EchoRequest(payload: [5]))
            #expect(reply.payload == [5])
            try await expectConnectionError(idle[0], .unavailable)
            // With a call open on every connection, one more is refused with a reason.
            for (index, socket) in idle.dropFirst().enumerated() { socket.sendEcho("slow", id: UInt64(index + 1)) }
            let slow = Task {
                try? await harness.client.unary(RpcV1.Echo.echo, RpcV1.EchoRequest(payload: Array("slow".utf8)))
            }
            try await waitUntil { harness.tcp!.figures().callsInFlight == 3 }
            let refused = try RawSocket(port: port)
            try await expectConnectionError(refused, .resourceExhausted)
            #expect(harness.rpc.stats.connectionFigures.rejected >= 1)
            slow.cancel()
        }
    }

    /// A client that makes calls keeps its connection over sockets that never made one, even when
    /// those sent a frame (a CANCEL of an unused id) after its last call: under the abuse suite's idle
    /// sockets the search client, quiet for 50 ms between searches, was reclaimed before them.
    @Test func aConnectionThatNeverMadeACallIsReclaimedBeforeOneThatDid() async throws {
        var limits = Self.limits
        limits.maxConnectionsPerPeer = 3
        try await Harness.with(.tcp, services: [BusyService()], limits: limits) { harness in
            let port = harness.tcp!.port
            let caller = try RawSocket(port: port)
            caller.sendEcho("first", id: 1)
            #expect(try await caller.receiveFrame().statusCode == 0)
            try await Task.sleep(for: TestTime.scaled(.milliseconds(20)))
            var idle: [RawSocket] = []
            for _ in 0..<2 {
                let socket = try RawSocket(port: port)
                socket.write(FrameCodec.encode(RpcV1.Frame(callID: 99, kind: .cancel).serializedBytes()))
                idle.append(socket)
            }
            try await waitUntil { harness.rpc.stats.connectionFigures.open == 3 }
            try await Task.sleep(for: TestTime.scaled(.milliseconds(20)))  // the cancels arrived
            let newcomer = try RawSocket(port: port)
            newcomer.sendEcho("new", id: 1)
            #expect(try await newcomer.receiveFrame().statusCode == 0)
            try await expectConnectionError(idle[0], .unavailable)
            caller.sendEcho("second", id: 2)
            let frame = try await caller.receiveFrame()
            #expect(
                frame.callID == 2 && frame.statusCode == 0,
                "the calling client's connection was reclaimed: \(frame.statusMessage)")
        }
    }

    // MARK: Stats (#11) and cancels (#15)

    @Test func statsCountEveryAnsweredCallByStatus() async throws {
        let service = BusyService()
        var limits = Self.limits
        limits.workers = 1
        limits.maxConcurrentCalls = 30
        try await Harness.with(.tcp, services: [service], limits: limits) { harness in
            let socket = try RawSocket(port: harness.tcp!.port)
            // The busy call, then twenty calls whose deadline passes while they wait behind it and twelve more, three
            // of them over the limit: in one write, so the server reads them in one turn and the 1 ms deadlines cannot
            // pass (freeing their places) before the last calls arrive, however loaded the machine.
            var frames = RawSocket.echoFrame(RpcV1.EchoRequest(payload: Array("busy".utf8)), id: 1)
            for id in 2...33 {
                frames += RawSocket.echoFrame(
                    RpcV1.EchoRequest(payload: [1]), id: UInt64(id), timeoutMicros: id <= 21 ? 1000 : nil)
            }
            socket.write(frames)
            var codes: [UInt32: Int] = [:]
            for _ in 1...33 { codes[try await socket.receiveFrame().statusCode, default: 0] += 1 }
            #expect(codes[StatusCode.deadlineExceeded.rawValue] == 20)
            #expect(codes[StatusCode.resourceExhausted.rawValue] == 3)
            let echo = try #require(harness.rpc.stats.snapshot().first { $0.path == RpcV1.Echo.echo.path })
            #expect(echo.calls == 33)
            #expect(echo.errors == 23)
            #expect(echo.byStatus[Int(StatusCode.deadlineExceeded.rawValue)] == 20)
            #expect(echo.byStatus[Int(StatusCode.resourceExhausted.rawValue)] == 3)
            #expect(echo.byStatus[0] == 10)
            // The same counts through a real GetStats call.
            let reply = try await harness.client.unary(RpcV1.Stats.getStats, RpcV1.GetStatsRequest())
            let figures = try #require(reply.methods.first { $0.path == RpcV1.Echo.echo.path })
            #expect(figures.calls == 33 && figures.errors == 23)
            let byStatus = Dictionary(figures.byStatus.map { ($0.code, $0.calls) }, uniquingKeysWith: +)
            #expect(
                byStatus == [0: 10, StatusCode.deadlineExceeded.rawValue: 20, StatusCode.resourceExhausted.rawValue: 3])
        }
    }

    @Test func aCancelThatOvertakesItsRequestStillCancelsIt() async throws {
        try await Harness.with(.tcp, services: [BusyService()], limits: Self.limits) { harness in
            let socket = try RawSocket(port: harness.tcp!.port)
            socket.write(FrameCodec.encode(RpcV1.Frame(callID: 5, kind: .cancel).serializedBytes()))
            socket.sendEcho("slow", id: 5)
            socket.sendEcho("next", id: 6)
            let frame = try await socket.receiveFrame()
            #expect(frame.callID == 6 && frame.statusCode == 0)
            #expect(harness.tcp!.figures().callsInFlight == 0)
        }
    }
}
