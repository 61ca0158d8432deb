import Foundation
import RPC
import RPCTestSupport
import RPCTesting
import RPCWire
import Schema
import TestSupport
import Testing
import Transport

/// Call semantics that every transport must honour.
@Suite struct RPCBehaviourTests {
    @Test(arguments: TransportKind.allCases)
    func unaryEchoRoundTrips(kind: TransportKind) async throws {
        try await Harness.with(kind) { harness in
            let payload = (0..<70_000).map { UInt8(truncatingIfNeeded: $0) }
            let reply = try await harness.client.unary(RpcV1.Echo.echo, RpcV1.EchoRequest(payload: payload))
            #expect(reply.payload == payload)
        }
    }

    @Test(arguments: TransportKind.allCases)
    func manyConcurrentCallsAreAnsweredToTheirOwnCallers(kind: TransportKind) async throws {
        try await Harness.with(kind) { harness in
            try await withThrowingTaskGroup(of: Void.self) { group in
                for index in 0..<200 {
                    group.addTask {
                        let payload = Array("call \(index)".utf8)
                        // Later calls answer sooner: replies come back out of order.
                        let request = RpcV1.EchoRequest(payload: payload, delayMs: UInt32((200 - index) % 7))
                        let reply = try await harness.client.unary(RpcV1.Echo.echo, request)
                        #expect(reply.payload == payload)
                    }
                }
                try await group.waitForAll()
            }
        }
    }

    @Test(arguments: TransportKind.allCases)
    func serverStreamingDeliversEveryMessageInOrder(kind: TransportKind) async throws {
        try await Harness.with(kind) { harness in
            var indices: [UInt32] = []
            for try await reply in harness.client.serverStreaming(
                RpcV1.Echo.stream, RpcV1.EchoRequest(payload: [1], count: 50))
            {
                indices.append(reply.index)
            }
            #expect(indices == Array(0..<50))
        }
    }

    @Test(arguments: TransportKind.allCases)
    func streamEndsWithTheHandlersError(kind: TransportKind) async throws {
        try await Harness.with(kind, services: [FaultyService()]) { harness in
            var received = 0
            await expectStatus(.aborted) {
                for try await _ in harness.client.serverStreaming(
                    RpcV1.Echo.stream, RpcV1.EchoRequest(count: 3, failWithCode: StatusCode.aborted.rawValue))
                {
                    received += 1
                }
            }
            #expect(received == 3)
        }
    }

    @Test(arguments: TransportKind.allCases)
    func handlerErrorsKeepTheirCode(kind: TransportKind) async throws {
        try await Harness.with(kind, services: [FaultyService()]) { harness in
            let error = await expectStatus(.notFound) {
                _ = try await harness.client.unary(
                    RpcV1.Echo.echo, RpcV1.EchoRequest(failWithCode: StatusCode.notFound.rawValue))
            }
            #expect(error?.message == "asked to fail")
        }
    }

    @Test(arguments: TransportKind.allCases)
    func unexpectedErrorsBecomeInternalWithoutCrashing(kind: TransportKind) async throws {
        try await Harness.with(kind, services: [FaultyService()]) { harness in
            await expectStatus(.internalError) {
                _ = try await harness.client.unary(RpcV1.Echo.echo, RpcV1.EchoRequest(payload: Array("crash".utf8)))
            }
            // The server still serves.
            let reply = try await harness.client.unary(RpcV1.Echo.echo, RpcV1.EchoRequest(payload: [1]))
            #expect(reply.payload == [1])
        }
    }

    @Test(arguments: TransportKind.allCases)
    func unknownMethodIsUnimplemented(kind: TransportKind) async throws {
        try await Harness.with(kind) { harness in
            await expectStatus(.unimplemented) {
                _ = try await harness.client.transports[0].unary(
                    CallHead(method: "/menagerie.nope.v1.Nope/Missing"), request: [])
            }
        }
    }

    @Test(arguments: TransportKind.allCases)
    func requestThatDoesNotDecodeIsInvalidArgument(kind: TransportKind) async throws {
        try await Harness.with(kind) { harness in
            await expectStatus(.invalidArgument) {
                _ = try await harness.client.transports[0].unary(
                    CallHead(method: RpcV1.Echo.echo.path), request: [0xFF, 0xFF, 0xFF])
            }
        }
    }

    @Test(arguments: TransportKind.allCases)
    func deadlineExceededWhenTheHandlerIsTooSlow(kind: TransportKind) async throws {
        try await Harness.with(kind, services: [FaultyService()]) { harness in
            let started = ContinuousClock.now
            await expectStatus(.deadlineExceeded) {
                _ = try await harness.client.unary(
                    RpcV1.Echo.echo, RpcV1.EchoRequest(payload: Array("slow".utf8)),
                    options: CallOptions(timeout: .milliseconds(200)))
            }
            // Well before the handler's 30 s (both stretched by `TestTime`).
            #expect(ContinuousClock.now - started < TestTime.scaled(.seconds(10)))
        }
    }

    @Test(arguments: TransportKind.allCases)
    func callsCancelledAtAnyMomentEndAndLeaveNothingBehind(kind: TransportKind) async throws {
        try await Harness.with(kind) { harness in
            var generator = SeededGenerator(seed: 7)
            let calls = (0..<300).map { index in
                let delay = Duration.microseconds(Int64(generator.next() % 3000))
                let call = Task {
                    try await harness.client.unary(
                        RpcV1.Echo.echo, RpcV1.EchoRequest(payload: [UInt8(index % 256)], delayMs: UInt32(index % 3)))
                }
                // Some are cancelled before they start, some while queued or running, some after.
                let canceller = Task {
                    if index % 5 != 0 { try await Task.sleep(for: delay) }
                    call.cancel()
                }
                return (call, canceller)
            }
            for (index, (call, canceller)) in calls.enumerated() {
                try await canceller.value
                do {
                    #expect(try await call.value.payload == [UInt8(index % 256)])
                } catch let error as RPCError {
                    #expect(error.code == .cancelled, "\(error)")
                }
            }
            // Still serving, and every call is over on the server too.
            #expect(try await harness.client.unary(RpcV1.Echo.echo, RpcV1.EchoRequest(payload: [1])).payload == [1])
            if let tcp = harness.tcp {
                let giveUp = ContinuousClock.now + TestTime.scaled(.seconds(5))
                while tcp.figures().callsInFlight > 0, ContinuousClock.now < giveUp {
                    try await Task.sleep(for: .milliseconds(10))
                }
                #expect(tcp.figures().callsInFlight == 0)
            }
        }
    }

    @Test(arguments: TransportKind.allCases)
    func cancellingTheCallerCancelsTheCall(kind: TransportKind) async throws {
        try await Harness.with(kind, services: [FaultyService()]) { harness in
            let call = Task {
                try await harness.client.unary(RpcV1.Echo.echo, RpcV1.EchoRequest(payload: Array("slow".utf8)))
            }
            try await Task.sleep(for: TestTime.scaled(.milliseconds(100)))
            call.cancel()
            await expectStatus(.cancelled) { _ = try await call.value }
        }
    }

    @Test(arguments: TransportKind.allCases)
    func builtinHealthReflectionAndStats(kind: TransportKind) async throws {
        try await Harness.with(kind) { harness in
            let health = try await harness.client.unary(RpcV1.Health.check, RpcV1.HealthCheckRequest())
            #expect(health.status == .serving)
            #expect(health.serverName == "test")
            #expect(health.pid == Int64(ProcessInfo.processInfo.processIdentifier))
            await expectStatus(.notFound) {
                _ = try await harness.client.unary(
                    RpcV1.Health.check, RpcV1.HealthCheckRequest(service: "menagerie.nope.v1.Nope"))
            }
            let serviceHealth = try await harness.client.unary(
                RpcV1.Health.check, RpcV1.HealthCheckRequest(service: "menagerie.rpc.v1.Echo"))
            #expect(serviceHealth.status == .serving)

            let services = try await harness.client.unary(RpcV1.Reflection.listServices, RpcV1.ListServicesRequest())
            #expect(
                services.services.map(\.name) == [
                    "menagerie.rpc.v1.Echo", "menagerie.rpc.v1.Health", "menagerie.rpc.v1.Reflection",
                    "menagerie.rpc.v1.Stats",
                ])
            let echo = try #require(services.services.first { $0.name == "menagerie.rpc.v1.Echo" })
            #expect(
                echo.methods.map(\.path)
                    == ["Chat", "Collect", "Echo", "Stream"].map { "/menagerie.rpc.v1.Echo/\($0)" })
            #expect(echo.methods.map(\.clientStreaming) == [true, true, false, false])
            #expect(echo.methods.map(\.serverStreaming) == [true, false, false, true])
            #expect(echo.methods.map(\.idempotent) == [false, false, true, false])

            for _ in 0..<5 { _ = try await harness.client.unary(RpcV1.Echo.echo, RpcV1.EchoRequest()) }
            _ = try? await harness.client.unary(RpcV1.Echo.echo, RpcV1.EchoRequest(failWithCode: 3))
            let stats = try await harness.client.unary(RpcV1.Stats.getStats, RpcV1.GetStatsRequest())
            let echoStats = try #require(stats.methods.first { $0.path == RpcV1.Echo.echo.path })
            #expect(echoStats.calls == 6)
            #expect(echoStats.errors == 1)
            #expect(echoStats.latencyP99Ms >= echoStats.latencyP50Ms)
        }
    }

    @Test func healthTurnsNotServingWhileDraining() async throws {
        try await Harness.with(.inProcess) { harness in
            harness.rpc.isServing = false
            let health = try await harness.client.unary(RpcV1.Health.check, RpcV1.HealthCheckRequest())
            #expect(health.status == .notServing)
        }
    }
}
