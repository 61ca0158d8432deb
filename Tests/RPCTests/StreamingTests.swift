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

/// The four call kinds, flow control, half-close, cancellation and deadlines of streams: over TCP
/// and in process alike.
// Serialized: several scenarios time what a stream does in a second; run side by side on a busy
// machine, they starve one another.
@Suite(.serialized) struct StreamingTests {
    @Test(arguments: TransportKind.allCases)
    func clientStreamingGetsEveryRequestThenAnswers(kind: TransportKind) async throws {
        try await Harness.with(kind) { harness in
            let reply = try await harness.client.clientStreaming(RpcV1.Echo.collect) { writer in
                for index in 0..<100 { try await writer.send(RpcV1.EchoRequest(payload: [UInt8(index)])) }
            }
            #expect(reply.index == 100)
            #expect(reply.payload == (0..<100).map { UInt8($0) })
            // No requests at all is a stream too.
            let empty = try await harness.client.clientStreaming(RpcV1.Echo.collect) { _ in }
            #expect(empty.index == 0 && empty.payload.isEmpty)
        }
    }

    @Test(arguments: TransportKind.allCases)
    func bidirectionalStreamingAnswersEachRequestBeforeTheClientHalfCloses(kind: TransportKind) async throws {
        try await Harness.with(kind) { harness in
            // Ping-pong: each request is sent only after the answer to the one before arrived.
            let (acks, ack) = AsyncStream<Void>.makeStream()
            let received = try await harness.client.bidirectionalStreaming(RpcV1.Echo.chat) { writer in
                var acks = acks.makeAsyncIterator()
                for index in 0..<20 {
                    try await writer.send(RpcV1.EchoRequest(payload: [UInt8(index)], count: 2))
                    _ = await acks.next()
                }
            } responses: { responses in
                var payloads: [[UInt8]] = []
                for try await response in responses {
                    payloads.append(response.payload)
                    if payloads.count % 2 == 0 { ack.yield() }
                }
                return payloads
            }
            #expect(received == (0..<20).flatMap { [[UInt8($0)], [UInt8($0)]] })
        }
    }

    @Test(arguments: TransportKind.allCases)
    func messagesLargerThanAFrameStreamInChunks(kind: TransportKind) async throws {
        var limits = TCPServer.Limits()
        limits.maxFrameSize = 512 << 10
        try await Harness.with(kind, limits: limits) { harness in
            // Larger than the server's frames and than the window, and no two chunks alike.
            let big = [UInt8](unsafeUninitializedCapacity: FlowControl.initialWindow + 17) { buffer, count in
                for index in buffer.indices { buffer[index] = UInt8(truncatingIfNeeded: index &* 7 &+ index >> 16) }
                count = buffer.count
            }
            // Requests larger than the server's frame limit (client streaming)...
            let collected = try await harness.client.clientStreaming(RpcV1.Echo.collect) { writer in
                try await writer.send(RpcV1.EchoRequest(payload: big))
                try await writer.send(RpcV1.EchoRequest(payload: [1, 2, 3]))
            }
            #expect(collected.index == 2)
            #expect(collected.payload == big + [1, 2, 3])
            // ...and responses larger than a frame and than the window (bidirectional).
            let echoed = try await harness.client.bidirectionalStreaming(RpcV1.Echo.chat) { writer in
                try await writer.send(RpcV1.EchoRequest(payload: big, count: 2))
            } responses: { responses in
                var sizes: [Int] = []
                for try await response in responses {
                    #expect(response.payload == big)
                    sizes.append(response.payload.count)
                }
                return sizes
            }
            #expect(echoed == [big.count, big.count])
        }
    }

    @Test(arguments: TransportKind.allCases)
    func clientStreamingHandlersErrorsKeepTheirCode(kind: TransportKind) async throws {
        try await Harness.with(kind) { harness in
            await expectStatus(.failedPrecondition) {
                _ = try await harness.client.clientStreaming(RpcV1.Echo.collect) { writer in
                    try await writer.send(RpcV1.EchoRequest(payload: [1]))
                    try await writer.send(RpcV1.EchoRequest(failWithCode: StatusCode.failedPrecondition.rawValue))
                }
            }
        }
    }

    @Test(arguments: TransportKind.allCases)
    func anErrorThrownByTheRequestWriterCancelsTheCallAndIsRethrown(kind: TransportKind) async throws {
        struct Oops: Error {}
        try await Harness.with(kind) { harness in
            await #expect(throws: Oops.self) {
                _ = try await harness.client.clientStreaming(RpcV1.Echo.collect) { writer in
                    try await writer.send(RpcV1.EchoRequest(payload: [1]))
                    throw Oops()
                }
            }
            try await expectNoCallsLeft(harness)
        }
    }

    @Test(arguments: TransportKind.allCases)
    func messagesSentConcurrentlyOnOneCallArriveWhole(kind: TransportKind) async throws {
        try await Harness.with(kind, services: [ConcurrentSenders()]) { harness in
            // Each message takes several chunks; four senders at once on each side.
            let size = FlowControl.maxChunk * 2 + 100
            let runs = try await harness.client.bidirectionalStreaming(RpcV1.Echo.chat) { writer in
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for fill in 1...4 {
                        group.addTask {
                            try await writer.send(
                                RpcV1.EchoRequest(payload: Array(repeating: UInt8(fill), count: size)))
                        }
                    }
                    try await group.waitForAll()
                }
            } responses: { responses in
                var runs: [[UInt8]] = []
                for try await response in responses { runs.append(response.payload) }
                return runs
            }
            // The server answers each request with four concurrent copies: 16 messages, each whole.
            #expect(runs.count == 16)
            for run in runs {
                // (Compared whole, not byte by byte: this test target is built without optimisation.)
                #expect(run == Array(repeating: run[0], count: size), "a message mixed with another's chunks")
            }
            #expect(Set(runs.map { $0[0] }) == [1, 2, 3, 4])
        }
    }

    // MARK: Flow control

    @Test(arguments: TransportKind.allCases)
    func aClientThatNeverReadsBuffersAtMostAWindow(kind: TransportKind) async throws {
        let counter = CountingStream()
        try await Harness.with(kind, services: [counter]) { harness in
            // 64 KiB × 4096 = 256 MiB offered; the consumer reads one message, then nothing.
            let responses = harness.client.serverStreaming(
                RpcV1.Echo.stream, RpcV1.EchoRequest(payload: Array(repeating: 7, count: 64 << 10), count: 4096))
            var iterator = responses.makeAsyncIterator()
            _ = try await iterator.next()
            try await Task.sleep(for: TestTime.scaled(.milliseconds(500)))
            let sentEarly = counter.sent.load(ordering: .relaxed)
            try await Task.sleep(for: TestTime.scaled(.milliseconds(500)))
            let buffered = responses.bufferedBytes
            let sent = counter.sent.load(ordering: .relaxed)
            #expect(buffered > 0)
            #expect(buffered <= FlowControl.initialWindow, "client buffered \(buffered) bytes")
            // The handler waits for credit: a window's worth of messages (plus what the sockets hold).
            #expect(sent == sentEarly, "the server kept sending to a client that reads nothing")
            #expect(sent < 64, "\(sent) messages sent")
        }
    }

    @Test(arguments: TransportKind.allCases)
    func aHandlerThatNeverReadsItsRequestsHoldsTheClientAtAWindow(kind: TransportKind) async throws {
        let sink = NeverReads()
        try await Harness.with(kind, services: [sink]) { harness in
            let sent = Atomic<Int>(0)
            let call = Task {
                try await harness.client.clientStreaming(RpcV1.Echo.collect) { writer in
                    while true {
                        try await writer.send(RpcV1.EchoRequest(payload: Array(repeating: 1, count: 64 << 10)))
                        sent.add(1, ordering: .relaxed)
                    }
                }
            }
            try await waitUntil { sent.load(ordering: .relaxed) > 0 }
            try await Task.sleep(for: TestTime.scaled(.seconds(1)))
            let afterOneSecond = sent.load(ordering: .relaxed)
            try await Task.sleep(for: TestTime.scaled(.milliseconds(500)))
            // A window is 16 such messages; without flow control this would be thousands.
            #expect(afterOneSecond <= FlowControl.initialWindow / (64 << 10), "\(afterOneSecond) requests sent")
            #expect(sent.load(ordering: .relaxed) == afterOneSecond)
            // The writer is stuck at its window, yet other calls on the same connection are answered (within a
            // deadline, so a connection held by the stuck stream fails here instead of hanging the test).
            let options = CallOptions(timeout: TestTime.scaled(.seconds(5)))
            for index in 0..<20 {
                let answer = try await harness.client.unary(
                    RpcV1.Echo.echo, RpcV1.EchoRequest(payload: [UInt8(index)]), options: options)
                #expect(answer.payload == [UInt8(index)])
            }
            _ = try await harness.client.unary(RpcV1.Health.check, RpcV1.HealthCheckRequest(), options: options)
            call.cancel()
            await expectStatus(.cancelled) { _ = try await call.value }
            try await expectNoCallsLeft(harness)
        }
    }

    @Test(arguments: TransportKind.allCases)
    func aSlowReaderOfOneStreamLeavesOtherCallsOnTheConnectionAlone(kind: TransportKind) async throws {
        try await Harness.with(kind) { harness in
            // A stream nobody reads after its first message, on the same client (one connection).
            let stalled = harness.client.serverStreaming(
                RpcV1.Echo.stream, RpcV1.EchoRequest(payload: Array(repeating: 1, count: 64 << 10), count: 10_000))
            var iterator = stalled.makeAsyncIterator()
            _ = try await iterator.next()
            try await Task.sleep(for: TestTime.scaled(.milliseconds(300)))
            // Meanwhile other streams and calls on the connection run at full speed.
            let started = ContinuousClock.now
            var received = 0
            for try await _ in harness.client.serverStreaming(
                RpcV1.Echo.stream, RpcV1.EchoRequest(payload: Array(repeating: 2, count: 64 << 10), count: 200))
            {
                received += 1
            }
            for _ in 0..<50 { _ = try await harness.client.unary(RpcV1.Echo.echo, RpcV1.EchoRequest(payload: [3])) }
            let chat = try await harness.client.bidirectionalStreaming(RpcV1.Echo.chat) { writer in
                for _ in 0..<50 { try await writer.send(RpcV1.EchoRequest(payload: [4])) }
            } responses: { responses in
                var count = 0
                for try await _ in responses { count += 1 }
                return count
            }
            #expect(received == 200)
            #expect(chat == 50)
            #expect(ContinuousClock.now - started < TestTime.scaled(.seconds(10)))
            // And the stalled stream still works once read.
            #expect(try await iterator.next()?.payload.count == 64 << 10)
        }
    }

    // MARK: Cancellation and deadlines, for each kind

    @Test(arguments: TransportKind.allCases)
    func cancellingMidStreamEndsEveryKindOfCall(kind: TransportKind) async throws {
        try await Harness.with(kind) { harness in
            let serverStream = Task {
                var count = 0
                for try await _ in harness.client.serverStreaming(
                    RpcV1.Echo.stream, RpcV1.EchoRequest(count: 1000, delayMs: 10))
                {
                    count += 1
                }
                return count
            }
            let clientStream = Task {
                try await harness.client.clientStreaming(RpcV1.Echo.collect) { writer in
                    while true {
                        try await writer.send(RpcV1.EchoRequest(payload: [1]))
                        try await Task.sleep(for: .milliseconds(10))
                    }
                }
            }
            let bidi = Task {
                try await harness.client.bidirectionalStreaming(RpcV1.Echo.chat) { writer in
                    while true {
                        try await writer.send(RpcV1.EchoRequest(payload: [1]))
                        try await Task.sleep(for: .milliseconds(10))
                    }
                } responses: { responses in
                    var count = 0
                    for try await _ in responses { count += 1 }
                    return count
                }
            }
            try await Task.sleep(for: TestTime.scaled(.milliseconds(300)))
            serverStream.cancel()
            clientStream.cancel()
            bidi.cancel()
            await expectStatus(.cancelled) { _ = try await serverStream.value }
            await expectStatus(.cancelled) { _ = try await clientStream.value }
            await expectStatus(.cancelled) { _ = try await bidi.value }
            try await expectNoCallsLeft(harness)
        }
    }

    @Test(arguments: TransportKind.allCases)
    func deadlinesEndEveryKindOfCallMidStream(kind: TransportKind) async throws {
        try await Harness.with(kind) { harness in
            // Not stretched: the server stream would end by itself (1,000 × 10 ms) within a stretched deadline.
            let options = CallOptions(timeout: .seconds(2))
            let started = ContinuousClock.now
            final class Counts: Sendable {
                let streamed = Atomic<Int>(0)
                let sent = Atomic<Int>(0)
            }
            let counts = Counts()
            async let serverStream = expectStatus(.deadlineExceeded) {
                for try await _ in harness.client.serverStreaming(
                    RpcV1.Echo.stream, RpcV1.EchoRequest(count: 1000, delayMs: 10), options: options)
                {
                    counts.streamed.add(1, ordering: .relaxed)
                }
            }
            async let clientStream = expectStatus(.deadlineExceeded) {
                _ = try await harness.client.clientStreaming(RpcV1.Echo.collect, options: options) { writer in
                    while true {
                        try await writer.send(RpcV1.EchoRequest(payload: [1]))
                        counts.sent.add(1, ordering: .relaxed)
                        try await Task.sleep(for: .milliseconds(10))
                    }
                }
            }
            async let bidi = expectStatus(.deadlineExceeded) {
                _ = try await harness.client.bidirectionalStreaming(RpcV1.Echo.chat, options: options) { writer in
                    while true {
                        try await writer.send(RpcV1.EchoRequest(payload: [1]))
                        try await Task.sleep(for: .milliseconds(10))
                    }
                } responses: { responses in
                    for try await _ in responses { counts.streamed.add(1, ordering: .relaxed) }
                }
            }
            _ = await (serverStream, clientStream, bidi)
            // Ended mid-stream, not before it began.
            #expect(counts.streamed.load(ordering: .relaxed) > 0)
            #expect(counts.sent.load(ordering: .relaxed) > 0)
            #expect(ContinuousClock.now - started < TestTime.scaled(.seconds(10)))
            try await expectNoCallsLeft(harness)
        }
    }

    @Test(arguments: TransportKind.allCases)
    func aUnaryMethodCalledAsAStreamTakesExactlyOneRequest(kind: TransportKind) async throws {
        try await Harness.with(kind) { harness in
            let transport = harness.client.transports[0]
            let one = transport.stream(CallHead(method: RpcV1.Echo.echo.path), request: nil)
            try await one.send(RpcV1.EchoRequest(payload: [5]).serializedBytes())
            one.closeRequests()
            let reply = try await one.next().map { try RpcV1.EchoResponse(serializedBytes: $0) }
            #expect(reply?.payload == [5])
            #expect(try await one.next() == nil)

            let two = transport.stream(CallHead(method: RpcV1.Echo.echo.path), request: nil)
            try await two.send(RpcV1.EchoRequest().serializedBytes())
            try await two.send(RpcV1.EchoRequest().serializedBytes())
            two.closeRequests()
            await expectStatus(.invalidArgument) { while try await two.next() != nil {} }
        }
    }
}

/// Chat whose handler answers each request with four copies sent at once from child tasks.
struct ConcurrentSenders: RPCService {
    func register(in router: inout RPCRouter) {
        router.bidirectionalStreaming(RpcV1.Echo.chat) { requests, writer, _ in
            try await withThrowingTaskGroup(of: Void.self) { group in
                for try await request in requests {
                    for _ in 0..<4 {
                        group.addTask { try await writer.send(RpcV1.EchoResponse(payload: request.payload)) }
                    }
                }
                try await group.waitForAll()
            }
        }
    }
}

/// The one place messages are cut into MESSAGE frames, which both transports' senders use.
@Suite struct ChunkedSendTests {
    @Test func aLargeMessageGoesOutInChunksWithinTheCreditAndJoinsUpAgain() async throws {
        let window = SendWindow(credit: 300 << 10)
        let message = (0..<(600 << 10)).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        var chunks: [(count: Int, continues: Bool)] = []
        var joined: [UInt8] = []
        try await window.send(message) { chunk, continues in
            chunks.append((chunk.count, continues))
            joined += chunk
            // The receiver reads: more credit after the second chunk spent what was left.
            if chunks.count == 2 { window.grant(1 << 20) }
        }
        let rest = (300 << 10) - FlowControl.cost(FlowControl.maxChunk) - FlowControl.messageOverhead
        #expect(
            chunks.map(\.count) == [
                FlowControl.maxChunk, rest, FlowControl.maxChunk, (600 << 10) - 2 * FlowControl.maxChunk - rest,
            ])
        #expect(chunks.map(\.continues) == [true, true, true, false])
        #expect(joined == message)
    }

    @Test func aSmallMessageGoesWholeAndTheSenderWaitsForCredit() async throws {
        let window = SendWindow(credit: 10)
        var sent: [[UInt8]] = []
        try await window.send([1, 2, 3]) { chunk, continues in
            #expect(!continues)
            sent.append(chunk)
        }
        #expect(sent == [[1, 2, 3]])
        #expect(window.credit == 10 - FlowControl.cost(3))
    }
}
