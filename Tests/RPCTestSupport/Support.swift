import Foundation
import RPC
import RPCTesting
import RPCWire
import Schema
import Synchronization
import TestSupport
import Testing
import Transport

/// The two ways tests reach a server: the same scenarios must behave alike over both.
public enum TransportKind: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case inProcess, tcp

    public var testDescription: String { rawValue }
}

/// Serves the Echo methods with faults on demand: payload "crash" throws an error that is no
/// `RPCError`, "slow" sleeps for 30 s (stretched by `TestTime`, as the bounds tests put on it), `fail_with_code`
/// fails with that code.
public struct FaultyService: RPCService {
    public struct Boom: Error {}

    public init() {}

    public func register(in router: inout RPCRouter) {
        router.unary(RpcV1.Echo.echo) { request, _ in
            if request.payload == Array("crash".utf8) { throw Boom() }
            if request.payload == Array("slow".utf8) {
                try await Task.sleep(for: TestTime.scaled(.seconds(30)))
            }
            if request.failWithCode != 0 { throw RPCError(StatusCode(rawValue: request.failWithCode), "asked to fail") }
            return RpcV1.EchoResponse(payload: request.payload)
        }
        router.serverStreaming(RpcV1.Echo.stream) { request, writer, context in
            for index in 0..<request.count {
                if request.delayMs > 0 { try await Task.sleep(for: .milliseconds(Int(request.delayMs))) }
                try await writer.send(RpcV1.EchoResponse(payload: request.payload, index: index))
            }
            if request.failWithCode != 0 {
                throw RPCError(StatusCode(rawValue: request.failWithCode), "failed after streaming")
            }
        }
    }
}

/// A running server and a client for it; `stop()` tears both down.
public final class Harness: @unchecked Sendable {
    public let rpc: RPCServer
    public let tcp: TCPServer?
    public let client: RPCClient

    public init(
        _ kind: TransportKind, services: [any RPCService] = [EchoService()],
        limits: TCPServer.Limits = TCPServer.Limits()
    ) throws {
        rpc = RPCServer(name: "test", services: services)
        switch kind {
        case .inProcess:
            tcp = nil
            client = RPCClient(transports: [InProcessTransport(server: rpc)])
        case .tcp:
            let server = try TCPServer(rpc: rpc, port: 0, limits: limits)
            tcp = server
            client = RPCClient(transports: [try TCPClientTransport(endpoint: server.address)])
        }
    }

    /// Runs `body` against a new harness and stops it however `body` ends.
    public static func with(
        _ kind: TransportKind, services: [any RPCService] = [EchoService()],
        limits: TCPServer.Limits = TCPServer.Limits(),
        _ body: (Harness) async throws -> Void
    ) async throws {
        let harness = try Harness(kind, services: services, limits: limits)
        do {
            try await body(harness)
        } catch {
            await harness.stop()
            throw error
        }
        await harness.stop()
    }

    public func stop() async {
        client.close()
        await tcp?.shutdown(grace: TestTime.scaled(.seconds(1)))
    }
}

/// Expects `body` to throw an `RPCError` with `code`; returns it.
@discardableResult
public func expectStatus(
    _ code: StatusCode, sourceLocation: SourceLocation = #_sourceLocation, _ body: () async throws -> Void
) async -> RPCError? {
    do {
        try await body()
        Issue.record("expected \(code.name), got success", sourceLocation: sourceLocation)
    } catch let error as RPCError {
        #expect(error.code == code, "\(error)", sourceLocation: sourceLocation)
        return error
    } catch {
        Issue.record("expected RPCError \(code.name), got \(error)", sourceLocation: sourceLocation)
    }
    return nil
}

/// Waits (at most 10 s, `TestTime.scaled`) until `condition` holds.
public func waitUntil(_ condition: () -> Bool) async throws {
    let giveUp = ContinuousClock.now + TestTime.scaled(.seconds(10))
    while !condition() {
        guard ContinuousClock.now < giveUp else { throw RPCError(.deadlineExceeded, "condition never held") }
        try await Task.sleep(for: .milliseconds(5))
    }
}

extension RawSocket {
    /// An Echo request frame, as a bare client that neither enforces deadlines nor cancels sends it.
    public static func echoFrame(_ request: RpcV1.EchoRequest, id: UInt64, timeoutMicros: UInt64? = nil) -> [UInt8] {
        FrameCodec.encode(
            RpcV1.Frame(
                callID: id, kind: .request, method: RpcV1.Echo.echo.path, timeoutMicros: timeoutMicros,
                hasPayload: true,
                payload: request.serializedBytes()
            ).serializedBytes())
    }

    /// Sends an Echo request frame (see `echoFrame`).
    public func sendEcho(_ text: String, id: UInt64, timeoutMicros: UInt64? = nil) {
        write(Self.echoFrame(RpcV1.EchoRequest(payload: Array(text.utf8)), id: id, timeoutMicros: timeoutMicros))
    }

    /// Reads the next frame's envelope.
    public func receiveFrame() async throws -> RpcV1.Frame {
        let header = try #require(await read(count: FrameCodec.headerSize))
        let length = header[1...].reduce(0) { $0 << 8 | Int($1) }
        return try RpcV1.Frame(serializedBytes: try #require(await read(count: length)))
    }
}

/// Streams echo responses, counting how many the transport accepted.
public final class CountingStream: RPCService {
    public let sent = Atomic<Int>(0)

    public init() {}

    public func register(in router: inout RPCRouter) {
        router.serverStreaming(RpcV1.Echo.stream) { [self] request, writer, _ in
            for index in 0..<request.count {
                try await writer.send(RpcV1.EchoResponse(payload: request.payload, index: index))
                self.sent.add(1, ordering: .relaxed)
            }
        }
    }
}

/// Fails unless every call is over on the server too (TCP: nothing in flight).
public func expectNoCallsLeft(_ harness: Harness, sourceLocation: SourceLocation = #_sourceLocation) async throws {
    guard let tcp = harness.tcp else { return }
    let giveUp = ContinuousClock.now + TestTime.scaled(.seconds(5))
    while tcp.figures().callsInFlight > 0, ContinuousClock.now < giveUp { try await Task.sleep(for: .milliseconds(10)) }
    #expect(tcp.figures().callsInFlight == 0, sourceLocation: sourceLocation)
}

/// A client-streaming Collect whose handler never reads its requests (until cancelled), and an ordinary Echo.
public struct NeverReads: RPCService {
    public init() {}

    public func register(in router: inout RPCRouter) {
        router.clientStreaming(RpcV1.Echo.collect) { _, _ in
            try await Task.sleep(for: .seconds(3600))
            return RpcV1.EchoResponse()
        }
        // Beside it, an ordinary call, to show that the stuck stream does not hold the connection.
        router.unary(RpcV1.Echo.echo) { request, _ in RpcV1.EchoResponse(payload: request.payload) }
    }
}
