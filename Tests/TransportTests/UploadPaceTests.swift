import Foundation
import RPC
import RPCTestSupport
import RPCTesting
import RPCWire
import TestSupport
import Testing

@testable import Connect
@testable import Framing
@testable import ServerCore
@testable import ServerSeam
@testable import TCP
@testable import TLSStreams
@testable import Transport

/// Issue 24: open uploads cannot hold a replica. An upload that falls silent, or trickles, ends
/// DEADLINE_EXCEEDED; uploads open at once are capped per replica and per client address; and past
/// the connection limit a newcomer takes the place of the busy connection quiet for longest. On a busy machine
/// (`TestTime`) the server's timeouts and the clients' pace stretch together, and the minimum rate shrinks with them.
@Suite(.serialized) struct UploadPaceTests {
    /// `milliseconds` stretched by `TestTime`.
    static func ms(_ milliseconds: Int) -> Duration { TestTime.scaled(.milliseconds(milliseconds)) }

    static var limits: TCPServer.Limits {
        var limits = TCPServer.Limits()
        // The sweeper runs every quarter of the frame timeout.
        limits.frameTimeout = ms(400)
        limits.idleTimeout = .seconds(30)
        limits.uploadIdleTimeout = ms(500)
        limits.uploadRateWindow = ms(600)
        limits.uploadMinimumRate = Int((2000 / TestTime.scale).rounded())
        limits.reclaimAfterQuiet = ms(300)
        return limits
    }

    static func openUpload(_ socket: RawSocket, id: UInt64) {
        socket.write(
            FrameCodec.encode(
                RpcV1.Frame(
                    callID: id, kind: .request, method: RpcV1.Echo.collect.path, clientStream: true
                ).serializedBytes()))
    }

    static func sendMessage(_ socket: RawSocket, id: UInt64, bytes: Int) {
        let payload = RpcV1.EchoRequest(payload: [UInt8](repeating: 7, count: bytes)).serializedBytes()
        socket.write(
            FrameCodec.encode(
                RpcV1.Frame(callID: id, kind: .message, hasPayload: true, payload: payload).serializedBytes()))
    }

    /// The next frame, or nil when none comes within the socket's receive timeout.
    static func frameIfAny(_ socket: RawSocket) async -> RpcV1.Frame? {
        guard let header = await socket.read(count: FrameCodec.headerSize) else { return nil }
        let length = header[1...].reduce(0) { $0 << 8 | Int($1) }
        guard let body = await socket.read(count: length) else { return nil }
        return try? RpcV1.Frame(serializedBytes: body)
    }

    @Test func anUploadThatFallsSilentEndsDeadlineExceeded() async throws {
        try await Harness.with(.tcp, limits: Self.limits) { harness in
            let socket = try RawSocket(port: harness.tcp!.port)
            Self.openUpload(socket, id: 1)
            Self.sendMessage(socket, id: 1, bytes: 50)
            let started = ContinuousClock.now
            let answer = try await socket.receiveFrame()
            #expect(
                answer.callID == 1 && answer.statusCode == StatusCode.deadlineExceeded.rawValue,
                "\(answer.statusMessage)")
            #expect(answer.statusMessage.contains("no message for"), "\(answer.statusMessage)")
            #expect(ContinuousClock.now - started >= Self.ms(400))
            try await waitUntil { harness.tcp!.figures().uploadsInProgress == 0 }
            // The connection serves on.
            socket.sendEcho("still here", id: 2)
            #expect(try await socket.receiveFrame().statusCode == StatusCode.ok.rawValue)
        }
    }

    @Test func anUploadThatTricklesEndsDeadlineExceededAndOneAtPaceFinishes() async throws {
        try await Harness.with(.tcp, limits: Self.limits) { harness in
            let slow = try RawSocket(port: harness.tcp!.port)
            let brisk = try RawSocket(port: harness.tcp!.port)
            Self.openUpload(slow, id: 1)
            Self.openUpload(brisk, id: 1)
            // Never silent for the idle timeout, but 10 bytes a 100 ms is under 2,000 bytes/s; the
            // brisk one sends 2 KB a 100 ms.
            let feeding = Task.detached {
                for _ in 0..<14 {
                    Self.sendMessage(slow, id: 1, bytes: 10)
                    Self.sendMessage(brisk, id: 1, bytes: 2000)
                    try await Task.sleep(for: Self.ms(100))
                }
                brisk.write(FrameCodec.encode(RpcV1.Frame(callID: 1, kind: .endStream).serializedBytes()))
            }
            let answer = try await slow.receiveFrame()
            #expect(answer.statusCode == StatusCode.deadlineExceeded.rawValue, "\(answer.statusMessage)")
            #expect(answer.statusMessage.contains("too slow"), "\(answer.statusMessage)")
            try await feeding.value
            var reply = try await brisk.receiveFrame()
            while reply.kind != .status { reply = try await brisk.receiveFrame() }
            #expect(reply.statusCode == StatusCode.ok.rawValue, "\(reply.statusMessage)")
        }
    }

    /// A slow handler is not the client's fault: while its inbox holds messages (the client out of
    /// credit, waiting), the upload's pace is not held against it.
    @Test func anUploadWaitingOnASlowHandlerIsNotEnded() async throws {
        try await Harness.with(.tcp, limits: Self.limits) { harness in
            let reply = try await harness.client.clientStreaming(
                RpcV1.Echo.collect, options: CallOptions(timeout: Self.ms(20_000))
            ) { writer in
                // 8 × 256 KiB: twice the 1 MiB window, to a handler taking 600 ms a message (longer than the
                // idle timeout between two that the client could send).
                for _ in 0..<8 {
                    try await writer.send(
                        RpcV1.EchoRequest(
                            payload: [UInt8](repeating: 1, count: 256 << 10),
                            delayMs: UInt32((600 * TestTime.scale).rounded())))
                }
            }
            #expect(reply.index == 8)
        }
    }

    @Test func uploadsFromOneAddressAreCappedAndOtherCallsAreNot() async throws {
        var limits = Self.limits
        limits.uploadIdleTimeout = .seconds(30)
        limits.uploadMinimumRate = 0
        limits.maxUploadsPerPeer = 2
        try await Harness.with(.tcp, limits: limits) { harness in
            let sockets = try (0..<3).map { _ in try RawSocket(port: harness.tcp!.port) }
            Self.openUpload(sockets[0], id: 1)
            Self.openUpload(sockets[1], id: 1)
            try await waitUntil { harness.tcp!.figures().uploadsInProgress == 2 }
            Self.openUpload(sockets[2], id: 1)
            let refused = try await sockets[2].receiveFrame()
            #expect(refused.callID == 1 && refused.statusCode == StatusCode.resourceExhausted.rawValue)
            #expect(refused.statusMessage.contains("too many uploads in progress from"), "\(refused.statusMessage)")
            sockets[2].sendEcho("quick", id: 2)
            #expect(try await sockets[2].receiveFrame().statusCode == StatusCode.ok.rawValue)
            // One ends: another may start.
            sockets[0].write(FrameCodec.encode(RpcV1.Frame(callID: 1, kind: .endStream).serializedBytes()))
            #expect(try await sockets[0].receiveFrame().statusCode == StatusCode.ok.rawValue)
            try await waitUntil { harness.tcp!.figures().uploadsInProgress == 1 }
            Self.openUpload(sockets[2], id: 3)
            try await waitUntil { harness.tcp!.figures().uploadsInProgress == 2 }
        }
    }

    /// 1,100 open uploads once filled a replica's connections and a health check was refused.
    @Test func pastTheConnectionLimitTheQuietestBusyConnectionMakesRoom() async throws {
        var limits = Self.limits
        limits.uploadIdleTimeout = .seconds(30)
        limits.uploadMinimumRate = 0
        limits.maxConnections = 4
        try await Harness.with(.tcp, limits: limits) { harness in
            let holders = try (0..<4).map { _ in try RawSocket(port: harness.tcp!.port) }
            for socket in holders {
                Self.openUpload(socket, id: 1)
                Self.sendMessage(socket, id: 1, bytes: 50)
            }
            try await waitUntil { harness.tcp!.figures().uploadsInProgress == 4 }
            try await Task.sleep(for: Self.ms(400))
            // The first holder speaks again: it is not the quietest any more.
            Self.sendMessage(holders[0], id: 1, bytes: 50)
            try await Task.sleep(for: Self.ms(50))
            let newcomer = try RawSocket(port: harness.tcp!.port)
            newcomer.sendEcho("let me in", id: 1)
            let answer = try await newcomer.receiveFrame()
            #expect(answer.statusCode == StatusCode.ok.rawValue, "\(answer.statusMessage)")
            // One of the quiet three was told why it goes.
            let told = await withTaskGroup(of: RpcV1.Frame?.self) { group in
                for socket in holders.dropFirst() {
                    socket.setReceiveTimeout(Self.ms(1000))
                    group.addTask { await Self.frameIfAny(socket) }
                }
                var frames: [RpcV1.Frame] = []
                for await frame in group { if let frame { frames.append(frame) } }
                return frames
            }
            #expect(
                told.contains {
                    $0.callID == 0 && $0.statusCode == StatusCode.unavailable.rawValue
                        && $0.statusMessage.contains("to make room")
                },
                "\(told.map(\.statusMessage))")
            #expect(harness.tcp!.figures().uploadsInProgress == 3)
        }
    }
}
