import FixturesAPI
import Foundation
import RPCWire
import TestSupport
import Testing

@testable import Schema

/// Bytes that are not a valid message throw `SchemaError`; nothing crashes or leaks.
@Suite struct MalformedInputTests {
    static let malformedFrames: [(String, [UInt8])] = [
        ("tag without its varint", [0x08]),
        ("varint longer than ten bytes", [0x08] + [UInt8](repeating: 0xFF, count: 10) + [0x01]),
        ("string length past the end", [0x1A, 0x05, 0x61]),
        ("length-delimited tag without a length", [0x3A]),
        ("huge length", [0x3A, 0xFF, 0xFF, 0xFF, 0xFF, 0x0F]),
        ("field number zero", [0x00, 0x01]),
        ("wire type 7", [0x0F, 0x01]),
        ("varint field sent as fixed32", [0x0D, 0x01, 0x02, 0x03, 0x04]),
        ("nested metadata entry truncated", [0x2A, 0x03, 0x0A, 0x05, 0x61]),
        ("unknown field truncated", [0x98, 0x06]),
    ]

    @Test(arguments: malformedFrames)
    func rejects(_ description: String, _ bytes: [UInt8]) {
        #expect(throws: SchemaError(messageName: "menagerie.rpc.v1.Frame", byteCount: bytes.count), "\(description)") {
            try RpcV1.Frame(serializedBytes: bytes)
        }
    }

    @Test func everyTruncationInsideAFieldThrows() throws {
        let bytes = RoundTripTests.fullFrame.serializedBytes()
        // Prefixes that end on a field boundary are valid (shorter) frames; all others must throw.
        var boundaries: Set<Int> = [0]
        var frame = RpcV1.Frame()
        for field in [
            RpcV1.Frame(callID: 42), RpcV1.Frame(kind: .request), RpcV1.Frame(method: RoundTripTests.fullFrame.method),
            RpcV1.Frame(timeoutMicros: RoundTripTests.fullFrame.timeoutMicros),
        ] + RoundTripTests.fullFrame.metadata.map({ RpcV1.Frame(metadata: [$0]) }) + [
            RpcV1.Frame(hasPayload: true), RpcV1.Frame(payload: RoundTripTests.fullFrame.payload),
            RpcV1.Frame(statusCode: 5),
            RpcV1.Frame(statusMessage: RoundTripTests.fullFrame.statusMessage),
        ] {
            boundaries.insert(boundaries.max()! + field.serializedBytes().count)
            frame = field
        }
        _ = frame
        #expect(boundaries.max() == bytes.count)
        for length in 0..<bytes.count {
            let prefix = Array(bytes[..<length])
            if boundaries.contains(length) {
                #expect(throws: Never.self) { try RpcV1.Frame(serializedBytes: prefix) }
            } else {
                #expect(throws: SchemaError.self, "prefix of \(length) bytes") {
                    try RpcV1.Frame(serializedBytes: prefix)
                }
            }
        }
    }

    /// Decodes `bytes` if it can; when it can, re-encoding and decoding again must give the same value.
    func checkDecodeIsStable<Message: ProtoMessage>(_ type: Message.Type, _ bytes: [UInt8]) -> Bool {
        guard let message = try? Message(serializedBytes: bytes) else { return false }
        #expect((try? Message(serializedBytes: message.serializedBytes())) == message, "input \(bytes)")
        return true
    }

    @Test func randomBytesNeverCrash() {
        var random = SeededGenerator(seed: 0x5EED)
        var decoded = 0
        for _ in 0..<3000 {
            let bytes = (0..<Int.random(in: 0...64, using: &random)).map { _ in
                UInt8.random(in: 0...255, using: &random)
            }
            if checkDecodeIsStable(RpcV1.Frame.self, bytes) { decoded += 1 }
            _ = checkDecodeIsStable(FixturesV1.Envelope.self, bytes)
            _ = checkDecodeIsStable(FixturesV1.Repeateds.self, bytes)
        }
        // Most random inputs are malformed, some are not: both paths ran.
        #expect(decoded > 0 && decoded < 3000)
    }

    @Test func mutatedValidMessagesNeverCrash() {
        var random = SeededGenerator(seed: 0xF00D)
        let seeds = [
            RoundTripTests.fullFrame.serializedBytes(),
            FixturesV1.Envelope(
                inner: .init(mood: .happy, note: "x"), inners: [.init(note: "y")], entry: .init(key: "k", value: "v"),
                kinds: [.request], userID: "u", farAway: 3
            ).serializedBytes(),
        ]
        var rejected = 0
        for iteration in 0..<4000 {
            var bytes = seeds[iteration % seeds.count]
            for _ in 0..<Int.random(in: 1...4, using: &random) {
                let index = Int.random(in: 0..<bytes.count, using: &random)
                switch Int.random(in: 0..<4, using: &random) {
                case 0: bytes[index] = UInt8.random(in: 0...255, using: &random)
                case 1: bytes[index] ^= 1 << UInt8.random(in: 0..<8, using: &random)
                case 2: bytes.removeSubrange(index...)
                default: bytes.insert(UInt8.random(in: 0...255, using: &random), at: index)
                }
                if bytes.isEmpty { bytes = [0xFF] }
            }
            if !checkDecodeIsStable(RpcV1.Frame.self, bytes) { rejected += 1 }
            _ = checkDecodeIsStable(FixturesV1.Envelope.self, bytes)
        }
        #expect(rejected > 0 && rejected < 4000)
    }

    /// Resident memory of this process, from Linux's /proc.
    static func residentBytes() throws -> Int {
        let fields = try String(contentsOfFile: "/proc/self/statm", encoding: .utf8).split(separator: " ")
        return Int(fields[1])! * Int(sysconf(Int32(_SC_PAGESIZE)))
    }

    /// Whether AddressSanitizer is linked in: it quarantines freed memory, so resident size always grows
    /// (and its LeakSanitizer checks for leaks instead).
    static let underAddressSanitizer = dlsym(dlopen(nil, RTLD_NOW), "__asan_init") != nil

    @Test(
        .enabled(if: FileManager.default.fileExists(atPath: "/proc/self/statm"), "needs Linux /proc to measure memory"),
        .disabled(
            if: underAddressSanitizer,
            "resident size is meaningless under AddressSanitizer; LeakSanitizer checks instead"))
    func failedAndSuccessfulDecodesLeakNothing() throws {
        let valid = RoundTripTests.fullFrame.serializedBytes()
        // Fails only at the very end, after protobuf-c has allocated every field of the frame.
        let invalid = valid + [0x08]
        let iterations = 20_000
        var growths: [Int] = []
        for _ in 0..<5 {
            let before = try Self.residentBytes()
            for _ in 0..<iterations {
                _ = try? RpcV1.Frame(serializedBytes: invalid)
                _ = try RpcV1.Frame(serializedBytes: valid).serializedBytes()
            }
            growths.append(try Self.residentBytes() - before)
        }
        // Leaking even 32 bytes a round trip grows every round by over 512 KB; tests running in
        // parallel add noise to some rounds, hardly to all five.
        #expect(growths.min()! < 512 * 1024, "resident memory growth per round of \(iterations): \(growths)")
    }
}
