import Base
import Foundation
import RPC
import RPCTesting
import RPCWire
import Schema

/// What the RPC layer's own work for one unary echo costs, piece by piece, on one thread with no
/// I/O and no other thread to hand over to: protobuf-c encoding and decoding (request and response
/// messages, request and status envelopes) and the server core's handling of the call. Their sum
/// is a lower bound for the CPU an RPC call costs beyond the raw floor's, whatever the transport
/// does; compare it with the floor's CPU per call in the `rpc` suite.
///
/// Each figure is the median of `samples` timings of a tight loop, so a busy moment of the machine
/// shifts it less than it would a single timing.
struct PartsBenchmark {
    let payloadSizes: [Int]
    let samples = 9

    func run() async {
        print("RPC parts: the RPC layer's own work per unary echo, one thread, no I/O (median of \(samples) samples)")
        var rows: [[String]] = []
        // Largest first: after the small payloads' many small allocations glibc trims its heap under
        // every freed 64 KiB buffer, and each call then page-faults it back in (4-5 times the cost of
        // handling it), which is the allocator's doing, not the RPC layer's.
        for size in payloadSizes.sorted(by: >) {
            let iterations = max(200, 2_000_000 / max(size, 64) / 4)
            rows += await measure(payload: [UInt8](repeating: 0xAB, count: size), iterations: iterations)
        }
        printTable(["payload", "part of one call", "ns"], rows)
    }

    private func measure(payload: [UInt8], iterations: Int) async -> [[String]] {
        let request = RpcV1.EchoRequest(payload: payload)
        let requestBytes = request.serializedBytes()
        let response = RpcV1.EchoResponse(payload: payload, index: 0)
        let responseBytes = response.serializedBytes()
        let requestFrame = RpcV1.Frame(
            callID: 1, kind: .request, method: RpcV1.Echo.echo.path, hasPayload: true, payload: requestBytes)
        let statusFrame = RpcV1.Frame(callID: 1, kind: .status, hasPayload: true, payload: responseBytes)
        let outbox = UnsafeMutableRawBufferPointer.allocate(
            byteCount: max(FrameEnvelope.size(of: requestFrame), FrameEnvelope.size(of: statusFrame)), alignment: 16)
        defer { outbox.deallocate() }
        let server = RPCServer(name: "parts", services: [EchoService()])
        let head = CallHead(method: RpcV1.Echo.echo.path, peer: "parts")
        let sink = DiscardingSink()

        // The transport's envelope codec (FrameEnvelope), and protobuf-c's beside it as the baseline it replaced.
        func encode(_ frame: RpcV1.Frame) -> Double {
            time(iterations) {
                FrameEnvelope.encode(
                    frame, into: UnsafeMutableRawBufferPointer(rebasing: outbox[0..<FrameEnvelope.size(of: frame)]))
            }
        }
        func decode(_ frame: RpcV1.Frame) -> Double {
            let bytes = FrameEnvelope.bytes(of: frame)
            return time(iterations) { _ = bytes.withUnsafeBytes { try? FrameEnvelope.decode($0) } }
        }
        func encodeByProtobufC(_ frame: RpcV1.Frame) -> Double {
            time(iterations) {
                frame.serialize(into: { count, pack in pack(UnsafeMutableRawBufferPointer(rebasing: outbox[0..<count]))
                })
            }
        }
        func decodeByProtobufC(_ frame: RpcV1.Frame) -> Double {
            let bytes = frame.serializedBytes()
            return time(iterations) { _ = try? RpcV1.Frame(serializedBytes: bytes) }
        }
        var parts: [(name: String, nanoseconds: Double)] = []
        parts.append(("client: request message encode", time(iterations) { _ = request.serializedBytes() }))
        parts.append(("client: request envelope encode into the outbox", encode(requestFrame)))
        parts.append(("server: request envelope decode", decode(requestFrame)))
        parts.append(
            (
                "server: RPCServer.handle (decode, echo, encode, stats)",
                await time(iterations) {
                    await server.handle(head, request: requestBytes, sink: sink)
                }
            ))
        parts.append(("server: starting and ending the handler's task", time(iterations) { Task.immediate {} }))
        parts.append(("server: status envelope encode into the outbox", encode(statusFrame)))
        parts.append(("client: status envelope decode", decode(statusFrame)))
        parts.append(
            (
                "client: response message decode",
                time(iterations) { _ = try? RpcV1.EchoResponse(serializedBytes: responseBytes) }
            ))

        let label = sizeLabel(payload.count)
        var rows = parts.map { [label, $0.name, String(format: "%.0f", $0.nanoseconds)] }
        rows.append([
            label, "sum: the RPC layer's own work per call",
            String(format: "%.0f", parts.reduce(0) { $0 + $1.nanoseconds }),
        ])
        let baseline = [
            ("baseline: request envelope encode by protobuf-c", encodeByProtobufC(requestFrame)),
            ("baseline: request envelope decode by protobuf-c", decodeByProtobufC(requestFrame)),
            ("baseline: status envelope encode by protobuf-c", encodeByProtobufC(statusFrame)),
            ("baseline: status envelope decode by protobuf-c", decodeByProtobufC(statusFrame)),
        ]
        rows += baseline.map { [label, $0.0, String(format: "%.0f", $0.1)] }
        return rows
    }

    /// Median nanoseconds per run of `body` over `samples` loops of `iterations` runs.
    private func time(_ iterations: Int, _ body: () -> Void) -> Double {
        median(
            (0..<samples).map { _ in
                let start = ContinuousClock.now
                for _ in 0..<iterations { body() }
                return (ContinuousClock.now - start).seconds * 1e9 / Double(iterations)
            })
    }

    private func time(_ iterations: Int, _ body: () async -> Void) async -> Double {
        var timings: [Double] = []
        for _ in 0..<samples {
            let start = ContinuousClock.now
            for _ in 0..<iterations { await body() }
            timings.append((ContinuousClock.now - start).seconds * 1e9 / Double(iterations))
        }
        return median(timings)
    }
}

/// Takes a call's outcome and drops it.
private struct DiscardingSink: ResponseSink {
    func send(_ message: [UInt8]) async throws {}
    func finish(message: [UInt8]?, error: RPCError?) -> Bool { true }
}
