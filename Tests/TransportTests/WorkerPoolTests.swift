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

/// How handlers share the server's worker pool: one that waits gives its worker up, one that
/// computes for long does not hold back answers already made, and a call cancelled while it waits
/// for a worker never runs.
// Serialized: handlers here block their threads on purpose, which would starve tests running beside them.
@Suite(.serialized, .timeLimit(.minutes(1))) struct WorkerPoolTests {
    /// Echo methods for these scenarios, told apart by payload: "wait" suspends until a "release"
    /// call arrives; "block:N" keeps its worker busy (no suspension) for N milliseconds; "sleep"
    /// sleeps for a minute unless cancelled; anything else answers at once. Every call that runs is
    /// counted, and so are those still running.
    final class GatedService: RPCService, @unchecked Sendable {
        let ran = Atomic<Int>(0)
        let running = Atomic<Int>(0)
        private let gate = Mutex<(open: Bool, waiting: CheckedContinuation<Void, Never>?)>((false, nil))

        func register(in router: inout RPCRouter) {
            router.unary(RpcV1.Echo.echo) { [self] request, _ in
                ran.add(1, ordering: .relaxed)
                running.add(1, ordering: .relaxed)
                defer { running.subtract(1, ordering: .relaxed) }
                let text = String(decoding: request.payload, as: UTF8.self)
                if text == "wait" {
                    await withCheckedContinuation { continuation in
                        let openAlready = gate.withLock { gate -> Bool in
                            if !gate.open { gate.waiting = continuation }
                            return gate.open
                        }
                        if openAlready { continuation.resume() }
                    }
                } else if text == "release" {
                    gate.withLock { gate in
                        gate.open = true
                        return gate.waiting.take()
                    }?.resume()
                } else if text == "sleep" {
                    try await Task.sleep(for: .seconds(60))
                } else if text.hasPrefix("block:"), let milliseconds = UInt32(text.dropFirst(6)) {
                    usleep(milliseconds * 1000)  // deliberately blocks its thread, like a long computation
                }
                return RpcV1.EchoResponse(payload: request.payload)
            }
        }
    }

    @Test func healthReflectionAndStatsAreAnsweredAtOnceWhileEveryWorkerIsBusy() async throws {
        let service = GatedService()
        // One worker, so that the test keeps a thread of the cooperative pool.
        let server = try TCPServer(
            rpc: RPCServer(name: "busy", services: [service]), port: 0, limits: Self.limits(workers: 1))
        let client = RPCClient(transports: [try TCPClientTransport(endpoint: server.address)])
        // The worker is busy with a 2-second call (longer than three built-ins at their bound, stretched or not);
        // another call waits in the queue behind it. (Sent one after the other: sent together, the quick one could go
        // first and be over already.)
        func call(_ text: String) -> Task<RpcV1.EchoResponse, any Error> {
            Task { try await client.unary(RpcV1.Echo.echo, RpcV1.EchoRequest(payload: Array(text.utf8))) }
        }
        let blocking = call("block:2000")
        try await Self.waitUntilRunning(1, service)
        let busy = [blocking, call("queued")]
        try await waitUntil { server.figures().callsInFlight == 2 }
        // Timed on a thread of its own, so that only the server's answer counts.
        let socket = try RawSocket(port: server.port)
        let methods = [RpcV1.Health.check.path, RpcV1.Stats.getStats.path, RpcV1.Reflection.listServices.path]
        let answers = try await offPool { () -> [(code: UInt32, took: Duration)] in
            methods.enumerated().map { index, method in
                let started = ContinuousClock.now
                socket.write(
                    FrameCodec.encode(
                        RpcV1.Frame(callID: UInt64(index + 1), kind: .request, method: method, hasPayload: true)
                            .serializedBytes()))
                guard let header = socket.readBlocking(count: FrameCodec.headerSize),
                    let body = socket.readBlocking(count: header[1...].reduce(0) { $0 << 8 | Int($1) }),
                    let frame = try? RpcV1.Frame(serializedBytes: body)
                else { return (UInt32.max, RawSocket.defaultReceiveTimeout) }
                return (frame.statusCode, ContinuousClock.now - started)
            }
        }
        print("built-ins with every worker busy: \(answers.map { "\($0.took)" })")
        for answer in answers {
            #expect(answer.code == StatusCode.ok.rawValue)
            #expect(
                answer.took < TestTime.scaled(.milliseconds(50)),
                "a built-in waited behind domain calls: \(answer.took)")
        }
        #expect(
            service.running.load(ordering: .relaxed) == 1, "the 2-second call was over before the built-ins were asked")
        for call in busy { _ = try await call.value }
        client.close()
        await server.shutdown(grace: TestTime.scaled(.seconds(5)))
    }

    /// "block:N", N being `milliseconds` stretched by `TestTime`, for a blocker that must outlast a stretched deadline.
    static func block(_ milliseconds: Int) -> String {
        "block:\(Int((Double(milliseconds) * TestTime.scale).rounded()))"
    }

    /// `milliseconds`, stretched by `TestTime`, in the microseconds of a request frame's timeout.
    static func micros(_ milliseconds: Int) -> UInt64 {
        UInt64((Double(milliseconds) * 1000 * TestTime.scale).rounded())
    }

    /// Waits until `count` handlers of `service` are running.
    static func waitUntilRunning(_ count: Int, _ service: GatedService) async throws {
        try await waitUntil { service.running.load(ordering: .relaxed) >= count }
    }

    static func limits(workers: Int) -> TCPServer.Limits {
        var limits = TCPServer.Limits()
        limits.workers = workers
        return limits
    }

    /// Calls without a timeout unless given one (a client deadline would end a stuck test early,
    /// hiding what it checks; the suite's time limit ends it instead).
    static func echo(_ client: RPCClient, _ text: String, timeout: Duration? = nil) async throws {
        _ = try await client.unary(
            RpcV1.Echo.echo, RpcV1.EchoRequest(payload: Array(text.utf8)), options: CallOptions(timeout: timeout))
    }

    @Test func aHandlerThatWaitsDoesNotHoldItsWorker() async throws {
        let service = GatedService()
        try await Harness.with(.tcp, services: [service], limits: Self.limits(workers: 1)) { harness in
            let waiting = Task { try await Self.echo(harness.client, "wait") }
            try await Self.waitUntilRunning(1, service)
            // With the only worker held by the waiting handler, this call could never run.
            try await Self.echo(harness.client, "release")
            try await waiting.value
        }
    }

    @Test func aLongHandlerDoesNotHoldBackAnswersAlreadyMade() async throws {
        let service = GatedService()
        var limits = Self.limits(workers: 1)
        // Every call but the second-long ones counts as quick, even in a debug build.
        limits.quickCall = .milliseconds(500)
        limits.answerBatchingWindow = .milliseconds(500)
        try await Harness.with(.tcp, services: [service], limits: limits) { harness in
            let start = ContinuousClock.now
            // The first call keeps the only worker busy for a second, so the next two queue up and
            // run back to back in one burst: "fast" answers, then "block:1500" computes for 1.5 s.
            // The first comes over a connection of its own, so "fast" cannot ride along when the
            // first call's answer is written.
            let other = RPCClient(transports: [try TCPClientTransport(endpoint: harness.tcp!.address)])
            defer { other.close() }
            let first = Task { try await Self.echo(other, "block:1000") }
            try await Self.waitUntilRunning(1, service)
            let fast = Task { () -> Duration in
                try await Self.echo(harness.client, "fast")
                return ContinuousClock.now - start
            }
            try await waitUntil { harness.tcp!.figures().callsInFlight >= 2 }  // "fast" is queued behind the first
            let slow = Task { () -> Duration in
                try await Self.echo(harness.client, "block:1500")
                return ContinuousClock.now - start
            }
            try await first.value
            let (fastDone, slowDone) = (try await fast.value, try await slow.value)
            // Held back, "fast" would be answered with "block:1500", 2.5 s after the start: measured against that
            // answer, not the clock, so that a busy machine's delays (which both share) do not count.
            #expect(
                fastDone < slowDone - .milliseconds(750),
                "the fast answer waited for the long handler: \(fastDone), \(slowDone)")
            #expect(slowDone >= .milliseconds(2400))
        }
    }

    @Test func callsReadTogetherWithAFrameThatClosesTheConnectionStillEnd() async throws {
        try await Harness.with(.tcp) { harness in
            let socket = try RawSocket(port: harness.tcp!.port)
            // One write, so one read: a good call, then an envelope that does not decode, which
            // closes the connection before the read ends. The good call was queued all the same
            // and must leave the server's books (it would keep shutdown waiting otherwise).
            let call = RpcV1.Frame(
                callID: 1, kind: .request, method: RpcV1.Echo.echo.path, hasPayload: true,
                payload: RpcV1.EchoRequest(payload: [1]).serializedBytes())
            socket.write(FrameCodec.encode(call.serializedBytes()) + FrameCodec.encode([0xFF, 0xFF, 0xFF]))
            #expect(await socket.readUntilClosed().closed)
            try await waitUntil { harness.tcp!.figures().callsInFlight == 0 }
        }
    }

    @Test func aCallCancelledWhileQueuedNeverRuns() async throws {
        let service = GatedService()
        try await Harness.with(.tcp, services: [service], limits: Self.limits(workers: 1)) { harness in
            let blocker = Task { try await Self.echo(harness.client, Self.block(400)) }
            try await Self.waitUntilRunning(1, service)
            // Queued behind the blocker (stretched on a busy machine, so that it still outlasts the deadline and the
            // cancel); the client gives up and tells the server.
            await expectStatus(.deadlineExceeded) {
                try await Self.echo(harness.client, "never", timeout: .milliseconds(100))
            }
            try await blocker.value
            try await Self.echo(harness.client, "after")
            #expect(service.ran.load(ordering: .relaxed) == 2, "only the blocker and the last call ran")
        }
    }

    @Test func aDeadlinePassingWhileTheHandlerComputesIsAnsweredOnce() async throws {
        let service = GatedService()
        try await Harness.with(.tcp, services: [service], limits: Self.limits(workers: 1)) { harness in
            let socket = try RawSocket(port: harness.tcp!.port)
            let started = ContinuousClock.now
            socket.sendEcho(Self.block(400), id: 7, timeoutMicros: Self.micros(100))
            let first = try await socket.receiveFrame()
            #expect(first.callID == 7)
            #expect(first.statusCode == StatusCode.deadlineExceeded.rawValue)
            #expect(
                ContinuousClock.now - started < TestTime.scaled(.milliseconds(350)),
                "answered when the deadline passed, not when the handler ended")
            // The handler's own late answer is dropped: the next frame answers the next call.
            socket.sendEcho("next", id: 8)
            let second = try await socket.receiveFrame()
            #expect(second.callID == 8)
            #expect(second.statusCode == 0)
            try await waitUntil { harness.tcp!.figures().callsInFlight == 0 }
        }
    }

    @Test func theServerAnswersDeadlineExceededItselfAndCancelsTheHandler() async throws {
        let service = GatedService()
        try await Harness.with(.tcp, services: [service]) { harness in
            // A bare client that neither enforces the deadline nor sends a cancel frame.
            let socket = try RawSocket(port: harness.tcp!.port)
            let started = ContinuousClock.now
            socket.sendEcho("sleep", id: 7, timeoutMicros: 200_000)
            let reply = try await socket.receiveFrame()
            #expect(ContinuousClock.now - started < TestTime.scaled(.seconds(5)))
            #expect(reply.callID == 7)
            #expect(reply.kind == .status)
            #expect(reply.statusCode == StatusCode.deadlineExceeded.rawValue)
            // The handler was cancelled: its minute-long sleep ended early.
            let ended = ContinuousClock.now + TestTime.scaled(.seconds(5))
            while service.running.load(ordering: .relaxed) > 0, ContinuousClock.now < ended {
                try await Task.sleep(for: .milliseconds(10))
            }
            #expect(service.running.load(ordering: .relaxed) == 0)
            #expect(harness.tcp!.figures().callsInFlight == 0)
        }
    }

    /// Work for the pool itself, measured as `workerTime`.
    final class PoolJob: WorkerJob, @unchecked Sendable {
        let workerTime: WorkerTime?
        let body: @Sendable () -> Void

        init(_ workerTime: WorkerTime, _ body: @escaping @Sendable () -> Void) {
            self.workerTime = workerTime
            self.body = body
        }

        func run() -> Bool {
            body()
            return true
        }
    }

    /// Workers are not preempted: with every worker computing a 40 ms export of one client, another's
    /// quick search waited for one of them to end (search p50 21-26 ms under the abuse suite's export
    /// attacks, 0.67 ms unloaded). Long jobs now leave one worker to the rest.
    @Test func longJobsLeaveAWorkerForQuickOnes() async throws {
        let pool = WorkerPool(width: 2, longJob: .milliseconds(5))
        let export = WorkerTime(), search = WorkerTime()
        export.record(.milliseconds(40))  // as measured on earlier calls
        search.record(.microseconds(300))
        // The long jobs hold their worker until the quick one runs (or 10 s, stretched by `TestTime`, pass when it cannot).
        let release = DispatchSemaphore(value: 0)
        let started = Atomic<Int>(0), released = Atomic<Int>(0), finished = Atomic<Int>(0)
        let longRunningWhenQuickRan = Atomic<Int>(-1)
        let exporter = CallQueue(connection: nil), searcher = CallQueue(connection: nil)
        for _ in 0..<4 {
            pool.submit(
                PoolJob(export) {
                    started.add(1, ordering: .relaxed)
                    if release.wait(timeout: .now() + 10 * TestTime.scale) == .success {
                        released.add(1, ordering: .relaxed)
                    }
                    finished.add(1, ordering: .relaxed)
                }, to: exporter)
        }
        try await waitUntil { started.load(ordering: .relaxed) >= 1 }
        pool.submit(
            PoolJob(search) {
                longRunningWhenQuickRan.store(
                    started.load(ordering: .relaxed) - finished.load(ordering: .relaxed), ordering: .relaxed)
                for _ in 0..<4 { release.signal() }
            }, to: searcher)
        try await waitUntil { finished.load(ordering: .relaxed) == 4 }
        #expect(
            longRunningWhenQuickRan.load(ordering: .relaxed) == 1, "the quick job did not run beside a single long one")
        #expect(released.load(ordering: .relaxed) == 4, "the quick job waited until long jobs gave up their workers")
    }
}
