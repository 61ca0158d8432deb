import Foundation
import RPCWire
import TestSupport
import Testing

@testable import Schema

/// The envelope's hand-written codec against protobuf-c's, which stays the reference: the same bytes out for every
/// frame, and for any input (valid, cut, or with bytes changed at random) the same verdict and the same frame.
@Suite struct FrameEnvelopeTests {
    /// A frame with each field set or left at its default, chosen by `generator`.
    static func randomFrame(_ generator: inout some RandomNumberGenerator) -> RpcV1.Frame {
        func maybe<T>(_ value: @autoclosure () -> T, _ fallback: T) -> T {
            Bool.random(using: &generator) ? value() : fallback
        }
        let widths: [UInt64] = [0, 1, 127, 128, 16_383, 16_384, UInt64(UInt32.max), .max]
        var frame = RpcV1.Frame()
        frame.callID = maybe(widths.randomElement(using: &generator)! &- UInt64.random(in: 0...1, using: &generator), 0)
        frame.kind = maybe(RpcV1.FrameKind(rawValue: Int32.random(in: -2...9, using: &generator)), .unspecified)
        frame.method = maybe(
            "/menagerie.zoo.v1.Zoo/Search" + String(repeating: "é", count: Int.random(in: 0...80, using: &generator)),
            "")
        frame.timeoutMicros = maybe(widths.randomElement(using: &generator)!, nil)
        frame.metadata = (0..<Int.random(in: 0...3, using: &generator)).map { index in
            RpcV1.MetadataEntry(
                key: maybe("key-\(index)", ""), value: maybe(String(repeating: "v", count: index * 70), ""))
        }
        frame.hasPayload = maybe(true, false)
        frame.payload = maybe(
            (0..<[1, 127, 128, 300, 70_000].randomElement(using: &generator)!).map {
                UInt8(truncatingIfNeeded: $0 &* 31)
            }, [])
        frame.statusCode = maybe(UInt32.random(in: 0...UInt32.max, using: &generator), 0)
        frame.statusMessage = maybe("no animal with id 42 — žádné", "")
        frame.clientStream = maybe(true, false)
        frame.continues = maybe(true, false)
        frame.windowIncrement = maybe(UInt32.random(in: 1...UInt32.max, using: &generator), 0)
        return frame
    }

    /// protobuf-c's verdict on `bytes` beside ours: nil for a refusal. One difference is by design: protobuf-c takes
    /// a bool field under any wire type (`has_payload` as a fixed64, its value whether any of the bytes is not zero),
    /// which the protobuf encoding does not allow and no encoder writes; the hand codec refuses it, as protobuf-c
    /// refuses every other field under the wrong wire type — such inputs count as agreeing.
    static func bothDecodings(_ bytes: [UInt8]) -> (protobufC: RpcV1.Frame?, hand: RpcV1.Frame?, refusal: String) {
        let reference = try? RpcV1.Frame(serializedBytes: bytes)
        do {
            return (reference, try bytes.withUnsafeBytes { try FrameEnvelope.decode($0) }, "")
        } catch {
            let reason = (error as? FrameEnvelope.DecodeError)?.reason ?? "\(error)"
            let boolUnderAnotherWireType = ["field 6 ", "field 10 ", "field 11 "].contains {
                reason.hasPrefix($0 + "has wire type")
            }
            return (boolUnderAnotherWireType ? nil : reference, nil, reason)
        }
    }

    @Test func framesAreWrittenAsProtobufCWritesThemAndReadBack() throws {
        var generator = SeededGenerator(seed: 1)
        for _ in 0..<2_000 {
            let frame = Self.randomFrame(&generator)
            let bytes = FrameEnvelope.bytes(of: frame)
            #expect(bytes.count == FrameEnvelope.size(of: frame))
            #expect(bytes == frame.serializedBytes(), "\(frame)")
            #expect(try bytes.withUnsafeBytes { try FrameEnvelope.decode($0) } == frame)
        }
        #expect(FrameEnvelope.bytes(of: RpcV1.Frame()).isEmpty)
        #expect(FrameEnvelope.bytes(of: RoundTripTests.fullFrame) == RoundTripTests.fullFrame.serializedBytes())
    }

    @Test(arguments: MalformedInputTests.malformedFrames)
    func refusesWhatProtobufCRefuses(_ description: String, _ bytes: [UInt8]) {
        #expect(throws: FrameEnvelope.DecodeError.self, "\(description)") {
            try bytes.withUnsafeBytes { try FrameEnvelope.decode($0) }
        }
    }

    /// Every prefix of a frame, and frames with one to four bytes replaced at random: whatever protobuf-c makes of
    /// them, so does the hand codec (a refusal or the same frame).
    @Test func cutAndDamagedFramesGetProtobufCsVerdict() {
        var generator = SeededGenerator(seed: 7)
        var disagreements: [String] = []
        func compare(_ bytes: [UInt8]) {
            let (reference, hand, refusal) = Self.bothDecodings(bytes)
            if reference != hand, disagreements.count < 5 {
                disagreements.append(
                    "\(bytes): protobuf-c \(reference.map { "\($0)" } ?? "refused"), hand \(hand.map { "\($0)" } ?? "refused: \(refusal)")"
                )
            }
        }
        let full = RoundTripTests.fullFrame.serializedBytes()
        for length in 0...full.count { compare(Array(full[..<length])) }
        for _ in 0..<8_000 {
            var frame = Self.randomFrame(&generator)
            if frame.payload.count > 300 { frame.payload = Array(frame.payload.prefix(300)) }
            var bytes = frame.serializedBytes()
            guard !bytes.isEmpty else { continue }
            for _ in 0..<Int.random(in: 1...4, using: &generator) {
                bytes[Int.random(in: 0..<bytes.count, using: &generator)] = UInt8.random(in: 0...255, using: &generator)
            }
            compare(bytes)
        }
        #expect(disagreements.isEmpty, "\(disagreements.joined(separator: "\n"))")
    }

    @Test func aNULInsideAStringIsRefusedUnlessKept() throws {
        let bytes: [UInt8] = [0x1A, 0x03, 0x61, 0x00, 0x62, 0x2A, 0x05, 0x0A, 0x03, 0x6B, 0x00, 0x79]
        #expect(throws: FrameEnvelope.DecodeError.self) { try bytes.withUnsafeBytes { try FrameEnvelope.decode($0) } }
        let kept = try bytes.withUnsafeBytes { try RpcV1.Frame(envelopeKeepingNUL: $0) }
        #expect(kept.method == "a\0b" && kept.metadata == [RpcV1.MetadataEntry(key: "k\0y")])
    }
}
