import FixturesAPI
import RPCWire
import Schema
import Testing

/// Our protobuf-c encoding agrees with protoc's independent implementation, in both directions.
@Suite(.enabled(if: Tool.protoc != nil, "needs protoc (Debian: protobuf-compiler) as the reference implementation"))
struct WireCompatibilityTests {
    /// `protoc --decode`: the text format of `bytes` as message `type`.
    func protocDecode(_ type: String, _ bytes: [UInt8], file: String) throws -> String {
        let text = try Tool.protoc!.run(
            ["--decode=\(type)", "-I", Package.protoDirectory.path, file], input: bytes)
        return String(decoding: text, as: UTF8.self)
    }

    /// `protoc --encode`: the wire bytes of a text-format message.
    func protocEncode(_ type: String, _ text: String, file: String) throws -> [UInt8] {
        try Tool.protoc!.run(["--encode=\(type)", "-I", Package.protoDirectory.path, file], input: Array(text.utf8))
    }

    static let rpcProto = "menagerie/rpc/v1/rpc.proto"
    static let fixturesProto = "menagerie/fixtures/v1/fixtures.proto"

    @Test func protocReadsOurFrame() throws {
        let frame = RpcV1.Frame(
            callID: 42, kind: .request, method: "/menagerie.zoo.v1.Zoo/SearchAnimals", timeoutMicros: 0,
            metadata: [.init(key: "authorization", value: "Bearer t0k3n"), .init(key: "request-id", value: "")],
            hasPayload: true, payload: [0, 1, 0xFF], statusCode: 16, statusMessage: "café")
        let text = try protocDecode("menagerie.rpc.v1.Frame", frame.serializedBytes(), file: Self.rpcProto)
        #expect(
            text == """
                call_id: 42
                kind: FRAME_KIND_REQUEST
                method: "/menagerie.zoo.v1.Zoo/SearchAnimals"
                timeout_micros: 0
                metadata {
                  key: "authorization"
                  value: "Bearer t0k3n"
                }
                metadata {
                  key: "request-id"
                }
                has_payload: true
                payload: "\\000\\001\\377"
                status_code: 16
                status_message: "caf\\303\\251"

                """)
    }

    @Test func weReadProtocsFrame() throws {
        let bytes = try protocEncode(
            "menagerie.rpc.v1.Frame",
            """
            call_id: 18446744073709551615
            kind: FRAME_KIND_STATUS
            timeout_micros: 0
            metadata { key: "k" value: "v" }
            metadata { }
            has_payload: true
            payload: "\\x01\\x02"
            status_code: 5
            status_message: "no animal with id 42"
            """, file: Self.rpcProto)
        let frame = try RpcV1.Frame(serializedBytes: bytes)
        #expect(
            frame
                == RpcV1.Frame(
                    callID: .max, kind: .status, timeoutMicros: 0, metadata: [.init(key: "k", value: "v"), .init()],
                    hasPayload: true, payload: [1, 2], statusCode: 5, statusMessage: "no animal with id 42"))
        #expect(
            try RpcV1.Frame(serializedBytes: protocEncode("menagerie.rpc.v1.Frame", "", file: Self.rpcProto))
                .timeoutMicros == nil)
    }

    static let fixtureTexts: [(type: String, text: String)] = [
        (
            "Scalars",
            """
            a_double: -1.5e300 a_float: 3.25 an_int32: -2147483648 an_int64: -9223372036854775808
            a_uint32: 4294967295 a_uint64: 18446744073709551615 a_sint32: -123456 a_sint64: -9223372036854775808
            a_fixed32: 4294967295 a_fixed64: 72623859790382856 an_sfixed32: -7 an_sfixed64: 9223372036854775807
            a_bool: true a_string: "zebra \\360\\237\\246\\223" some_bytes: "\\000\\001\\377" color: COLOR_INFRARED
            """
        ),
        (
            "Optionals",
            """
            a_double: 0 a_float: 0 an_int32: 0 an_int64: 0 a_uint32: 0 a_uint64: 0 a_sint32: 0 a_sint64: 0
            a_fixed32: 0 a_fixed64: 0 an_sfixed32: 0 an_sfixed64: 0 a_bool: false a_string: "" some_bytes: ""
            color: COLOR_UNSPECIFIED scalars { }
            """
        ),
        ("Optionals", "an_int64: -9 a_string: \"x\" color: COLOR_RED scalars { a_bool: true }"),
        (
            "Repeateds",
            """
            doubles: [0, -1.25] floats: [1, 2] int32s: [-2147483648, -1, 0, 2147483647] int64s: [-1]
            uint32s: [0, 4294967295] uint64s: [18446744073709551615] sint32s: [-1, 1] sint64s: [-9223372036854775808]
            fixed32s: [7] fixed64s: [8, 9] sfixed32s: [-10] sfixed64s: [11] bools: [true, false]
            strings: ["", "a"] byte_strings: ["", "\\001"] colors: [COLOR_RED, COLOR_INFRARED]
            scalars { an_int32: 1 } scalars { } unpacked_int32s: [3, -4]
            """
        ),
        (
            "Envelope",
            """
            inner { mood: MOOD_HAPPY note: "inside" } inners { } inners { note: "n" } mood: MOOD_HAPPY
            entry { key: "k" value: "v" } kinds: [FRAME_KIND_CANCEL, FRAME_KIND_REQUEST] user_id: "u"
            avatar_url: "https://example.org" default: true class: "Mammalia" far_away: -5
            """
        ),
    ]

    /// protoc encodes, we decode and re-encode, protoc decodes both: same text.
    @Test(arguments: fixtureTexts)
    func fixturesSurviveTheRoundTripThroughUs(_ type: String, _ text: String) throws {
        let fullType = "menagerie.fixtures.v1.\(type)"
        let reference = try protocEncode(fullType, text, file: Self.fixturesProto)
        let ours: [UInt8] =
            switch type {
            case "Scalars": try FixturesV1.Scalars(serializedBytes: reference).serializedBytes()
            case "Optionals": try FixturesV1.Optionals(serializedBytes: reference).serializedBytes()
            case "Repeateds": try FixturesV1.Repeateds(serializedBytes: reference).serializedBytes()
            default: try FixturesV1.Envelope(serializedBytes: reference).serializedBytes()
            }
        let expected = try protocDecode(fullType, reference, file: Self.fixturesProto)
        #expect(try protocDecode(fullType, ours, file: Self.fixturesProto) == expected)
        #expect(!expected.isEmpty)
    }

    @Test func protocsScalarsDecodeToTheExpectedValues() throws {
        let bytes = try protocEncode(
            "menagerie.fixtures.v1.Scalars", Self.fixtureTexts[0].text, file: Self.fixturesProto)
        #expect(
            try FixturesV1.Scalars(serializedBytes: bytes)
                == FixturesV1.Scalars(
                    aDouble: -1.5e300, aFloat: 3.25, anInt32: .min, anInt64: .min, aUint32: .max, aUint64: .max,
                    aSint32: -123_456, aSint64: .min, aFixed32: .max, aFixed64: 0x0102_0304_0506_0708, anSfixed32: -7,
                    anSfixed64: .max, aBool: true, aString: "zebra 🦓", someBytes: [0, 1, 0xFF], color: .infrared))
    }
}
