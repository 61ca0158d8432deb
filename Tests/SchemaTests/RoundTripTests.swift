import FixturesAPI
import RPCWire
import Schema
import Testing

/// Values survive encode → decode through protobuf-c, for every field kind and shape.
@Suite struct RoundTripTests {
    static let extremes = FixturesV1.Scalars(
        aDouble: -1.5e300, aFloat: 3.25, anInt32: .min, anInt64: .min, aUint32: .max, aUint64: .max,
        aSint32: -123_456, aSint64: .min, aFixed32: .max, aFixed64: 0x0102_0304_0506_0708, anSfixed32: -7,
        anSfixed64: .max, aBool: true, aString: "zebra 🦓 – ünïcode", someBytes: [0, 1, 0xFF, 0, 0x80],
        color: .infrared)

    static let fullFrame = RpcV1.Frame(
        callID: 42, kind: .request, method: "/menagerie.zoo.v1.Zoo/SearchAnimals", timeoutMicros: 1_500_000,
        metadata: [.init(key: "authorization", value: "Bearer t0k3n"), .init(key: "request-id", value: "r-1")],
        hasPayload: true, payload: Array(0...255), statusCode: 5, statusMessage: "no animal with id 42")

    func roundTrip<Message: ProtoMessage>(_ message: Message) throws -> Message {
        try Message(serializedBytes: message.serializedBytes())
    }

    @Test func scalarsAtTheirExtremes() throws {
        #expect(try roundTrip(Self.extremes) == Self.extremes)
        let small = FixturesV1.Scalars(
            aDouble: .leastNonzeroMagnitude, aFloat: -.greatestFiniteMagnitude, anInt32: -1, aSint32: .min,
            anSfixed32: .min, color: .green)
        #expect(try roundTrip(small) == small)
    }

    @Test func defaultsEncodeToNothing() throws {
        #expect(FixturesV1.Scalars().serializedBytes().isEmpty)
        #expect(RpcV1.Frame().serializedBytes().isEmpty)
        #expect(try FixturesV1.Scalars(serializedBytes: []) == FixturesV1.Scalars())
        #expect(try RpcV1.ListServicesRequest(serializedBytes: []) == RpcV1.ListServicesRequest())
    }

    @Test func optionalsKeepPresenceEvenAtZero() throws {
        let zeros = FixturesV1.Optionals(
            aDouble: 0, aFloat: 0, anInt32: 0, anInt64: 0, aUint32: 0, aUint64: 0, aSint32: 0, aSint64: 0,
            aFixed32: 0, aFixed64: 0, anSfixed32: 0, anSfixed64: 0, aBool: false, aString: "", someBytes: [],
            color: .unspecified, scalars: FixturesV1.Scalars())
        let decoded = try roundTrip(zeros)
        #expect(decoded == zeros)
        #expect(decoded.aUint64 == 0 && decoded.aString == "" && decoded.someBytes == [] && decoded.scalars != nil)
        // Each present field costs at least a tag and a value byte.
        #expect(zeros.serializedBytes().count >= 2 * 17)

        #expect(try roundTrip(FixturesV1.Optionals()) == FixturesV1.Optionals())
        #expect(FixturesV1.Optionals().serializedBytes().isEmpty)

        let values = FixturesV1.Optionals(
            aDouble: 2.5, anInt64: -9, aSint64: 77, anSfixed32: -3, aString: "x", color: .red,
            scalars: Self.extremes)
        #expect(try roundTrip(values) == values)
    }

    @Test func repeatedFieldsOfEveryKind() throws {
        let repeateds = FixturesV1.Repeateds(
            doubles: [0, -1.25, .greatestFiniteMagnitude], floats: [1, 2, 3], int32s: [.min, -1, 0, .max],
            int64s: [.min, .max], uint32s: [0, .max], uint64s: [.max, 1], sint32s: [-1, 1, .min],
            sint64s: [.min, .max],
            fixed32s: [7], fixed64s: [8, 9], sfixed32s: [-10], sfixed64s: [-11, 11], bools: [true, false, true],
            strings: ["", "a", "ß", ""], byteStrings: [[], [0], [1, 2, 3]], colors: [.red, .infrared, .unspecified],
            scalars: [Self.extremes, FixturesV1.Scalars(), FixturesV1.Scalars(aString: "second")],
            unpackedInt32s: [3, -4, 5])
        #expect(try roundTrip(repeateds) == repeateds)
        #expect(try roundTrip(FixturesV1.Repeateds()) == FixturesV1.Repeateds())
    }

    @Test func nestedCrossPackageAndEscapedFields() throws {
        let envelope = FixturesV1.Envelope(
            inner: .init(mood: .happy, note: "inside"), inners: [.init(), .init(mood: .happy), .init(note: "n")],
            mood: .happy, entry: .init(key: "k", value: "v"), kinds: [.cancel, .request, .unrecognized(99)],
            userID: "u-1", avatarURL: "https://example.org/a.png", default: true, class: "Mammalia",
            farAway: -5)
        #expect(try roundTrip(envelope) == envelope)
        // A present but empty nested message stays present.
        let emptyInner = FixturesV1.Envelope(inner: .init())
        #expect(try roundTrip(emptyInner).inner == .init())
        #expect(try roundTrip(FixturesV1.Envelope()).inner == nil)
    }

    @Test func frame() throws {
        #expect(try roundTrip(Self.fullFrame) == Self.fullFrame)
        let status = RpcV1.Frame(callID: .max, kind: .status, timeoutMicros: 0, statusCode: 0)
        let decoded = try roundTrip(status)
        #expect(decoded == status)
        #expect(decoded.timeoutMicros == 0)
    }

    @Test func unknownEnumValuesSurvive() throws {
        let scalars = FixturesV1.Scalars(color: .unrecognized(12345))
        let decoded = try roundTrip(scalars)
        #expect(decoded.color == .unrecognized(12345))
        #expect(decoded.color.rawValue == 12345)
        #expect(FixturesV1.Color(rawValue: -1) == .infrared)
        #expect(FixturesV1.Color.allCases == [.unspecified, .red, .green, .infrared])
    }

    @Test func knownEncoding() throws {
        // call_id = 150 (varint 96 01), kind = STATUS, status_message = "ok"
        let frame = RpcV1.Frame(callID: 150, kind: .status, statusMessage: "ok")
        #expect(frame.serializedBytes() == [0x08, 0x96, 0x01, 0x10, 0x03, 0x4A, 0x02, 0x6F, 0x6B])
        // int32 -1 is a ten-byte varint; sint32 -1 zigzags to 1.
        #expect(
            FixturesV1.Scalars(anInt32: -1).serializedBytes() == [0x18] + [UInt8](repeating: 0xFF, count: 9) + [0x01])
        #expect(FixturesV1.Scalars(aSint32: -1).serializedBytes() == [0x38, 0x01])
        // Field 100000: tag (100000 << 3) as a varint.
        #expect(FixturesV1.Envelope(farAway: 1).serializedBytes() == [0x80, 0xEA, 0x30, 0x01])
    }

    @Test func invalidUTF8IsRepairedNotTrusted() throws {
        // field 14 (a_string), length 3: "a", a lone continuation byte, "b"
        let decoded = try FixturesV1.Scalars(serializedBytes: [0x72, 0x03, 0x61, 0x80, 0x62])
        #expect(decoded.aString == "a\u{FFFD}b")
    }

    @Test func aStringWithANULInsideIsRefusedNotCut() throws {
        // protobuf-c strings are C strings: "a\0b" used to decode as "a".
        #expect(throws: SchemaError.self) { try FixturesV1.Scalars(serializedBytes: [0x72, 0x03, 0x61, 0x00, 0x62]) }
        // Also in a repeated field and a nested message (MetadataEntry in a Frame).
        #expect(throws: SchemaError.self) {
            try RpcV1.Frame(serializedBytes: [0x2A, 0x05, 0x0A, 0x03, 0x6B, 0x00, 0x79])
        }
        // A frame's envelope can be read whole, for the server to answer that call INVALID_ARGUMENT.
        let frame = try [UInt8]([0x1A, 0x03, 0x61, 0x00, 0x62]).withUnsafeBytes {
            try RpcV1.Frame(envelopeKeepingNUL: $0)
        }
        #expect(frame.method == "a\u{0}b")
        // A NUL at the very end, an empty string and ordinary strings are unaffected.
        #expect(throws: SchemaError.self) { try FixturesV1.Scalars(serializedBytes: [0x72, 0x02, 0x61, 0x00]) }
        #expect(try FixturesV1.Scalars(serializedBytes: [0x72, 0x00]).aString == "")
        #expect(try FixturesV1.Scalars(serializedBytes: [0x72, 0x02, 0x61, 0x62]).aString == "ab")
    }

    @Test func unknownFieldsAreSkipped() throws {
        // field 99 varint, then call_id = 1
        let frame = try RpcV1.Frame(serializedBytes: [0x98, 0x06, 0x07, 0x08, 0x01])
        #expect(frame == RpcV1.Frame(callID: 1))
    }

    @Test func services() {
        #expect(RpcV1.Health.name == "menagerie.rpc.v1.Health")
        #expect(RpcV1.Health.check.path == "/menagerie.rpc.v1.Health/Check")
        #expect(
            RpcV1.Health.methods == [
                ProtoMethodInfo(
                    path: "/menagerie.rpc.v1.Health/Check", serverStreaming: false, idempotent: true,
                    sideEffectFree: true,
                    access: .public, maxRequestBytes: 65536, requestType: "menagerie.rpc.v1.HealthCheckRequest",
                    responseType: "menagerie.rpc.v1.HealthCheckResponse")
            ])
        #expect(RpcV1.Echo.echo.idempotent && !RpcV1.Echo.echo.serverStreaming)
        #expect(RpcV1.Echo.stream.serverStreaming && !RpcV1.Echo.stream.idempotent)
        #expect(
            RpcV1.Echo.methods.map(\.path)
                == ["Echo", "Stream", "Collect", "Chat"].map { "/menagerie.rpc.v1.Echo/\($0)" })
        #expect(RpcV1.Echo.methods.map(\.clientStreaming) == [false, false, true, true])
        #expect(RpcV1.Echo.methods.map(\.serverStreaming) == [false, true, false, true])
        #expect(FixturesV1.Fixtures.reflect.idempotent)
        #expect(RpcV1.Frame.protoName == "menagerie.rpc.v1.Frame")
        #expect(FixturesV1.Envelope.Inner.protoName == "menagerie.fixtures.v1.Envelope.Inner")
    }
}
