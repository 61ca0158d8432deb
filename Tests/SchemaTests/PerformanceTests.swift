import RPCWire
import Schema
import Testing

/// Rough cost of encoding and decoding the RPC envelope, printed (no timing assertions: machines vary).
@Suite struct PerformanceTests {
    static let typicalFrame = RpcV1.Frame(
        callID: 7, kind: .request, method: "/menagerie.zoo.v1.Zoo/SearchAnimals", timeoutMicros: 2_000_000,
        metadata: [.init(key: "authorization", value: "Bearer abc"), .init(key: "request-id", value: "42")],
        hasPayload: true, payload: [UInt8](repeating: 0xAB, count: 256))

    func nanosecondsPerCall(_ iterations: Int, _ body: () throws -> Void) rethrows -> Double {
        let clock = ContinuousClock()
        let elapsed = try clock.measure { for _ in 0..<iterations { try body() } }
        let (seconds, attoseconds) = elapsed.components
        return (Double(seconds) * 1e9 + Double(attoseconds) / 1e9) / Double(iterations)
    }

    @Test func frameEncodeAndDecode() throws {
        let frame = Self.typicalFrame
        let bytes = frame.serializedBytes()
        var checksum = 0
        let encode = nanosecondsPerCall(20_000) { checksum &+= frame.serializedBytes().count }
        let decode = try nanosecondsPerCall(20_000) {
            checksum &+= try RpcV1.Frame(serializedBytes: bytes).payload.count
        }
        let small = RpcV1.Frame(callID: 1, kind: .message, hasPayload: true, payload: [1, 2, 3])
        let smallBytes = small.serializedBytes()
        let smallEncode = nanosecondsPerCall(20_000) { checksum &+= small.serializedBytes().count }
        let smallDecode = try nanosecondsPerCall(20_000) {
            checksum &+= try RpcV1.Frame(serializedBytes: smallBytes).payload.count
        }
        print(
            """
            RpcV1.Frame (\(bytes.count) bytes): encode \(Int(encode)) ns/op, decode \(Int(decode)) ns/op; \
            minimal (\(smallBytes.count) bytes): encode \(Int(smallEncode)) ns/op, decode \(Int(smallDecode)) ns/op
            """)
        #expect(checksum == 20_000 * (bytes.count + 256 + smallBytes.count + 3))
    }
}
