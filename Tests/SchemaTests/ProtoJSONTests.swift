import FixturesAPI
import OCRAPI
import RPCWire
import Schema
import Testing

/// The mapping's rules on the fixtures (every field kind), independent of Python.
@Suite struct ProtoJSONTests {
    typealias Scalars = FixturesV1.Scalars

    func decode<Message: ProtoJSONMessage>(
        _ type: Message.Type, _ text: String, options: ProtoJSONOptions = ProtoJSONOptions()
    ) throws(ProtoJSONError) -> Message {
        try Message(jsonString: text, options: options)
    }

    func error<Message: ProtoJSONMessage>(
        _ type: Message.Type, _ text: String, options: ProtoJSONOptions = ProtoJSONOptions()
    ) -> String? {
        do {
            _ = try Message(jsonString: text, options: options)
            return nil
        } catch {
            return error.description
        }
    }

    @Test func encodesEachKindAsTheSpecSays() {
        let scalars = Scalars(
            aDouble: 0.5, aFloat: 1.1, anInt32: -7, anInt64: .min, aUint32: .max, aUint64: .max, aSint32: 1, aSint64: 2,
            aFixed32: 3, aFixed64: 4, anSfixed32: 5, anSfixed64: 6, aBool: true, aString: "ž", someBytes: [0xFB, 0xFF],
            color: .infrared)
        #expect(
            scalars.jsonString() == #"{"aDouble":0.5,"aFloat":1.1,"anInt32":-7,"anInt64":"-9223372036854775808","#
                + #""aUint32":4294967295,"aUint64":"18446744073709551615","aSint32":1,"aSint64":"2","aFixed32":3,"aFixed64":"4","#
                + #""anSfixed32":5,"anSfixed64":"6","aBool":true,"aString":"ž","someBytes":"+/8=","color":"COLOR_INFRARED"}"#
        )
        // Floats as protobuf's C++ and Python print them: at least 6 significant digits' worth, as few as round-trip.
        #expect(Scalars(aFloat: .leastNonzeroMagnitude).jsonString() == #"{"aFloat":1.4013e-45}"#)
        #expect(Scalars(aFloat: .greatestFiniteMagnitude).jsonString() == #"{"aFloat":3.4028235e+38}"#)
        #expect(Scalars(aFloat: 0.1).jsonString() == #"{"aFloat":0.1}"#)
        #expect(
            Scalars(aDouble: .nan, aFloat: .infinity, color: .unrecognized(42)).jsonString()
                == #"{"aDouble":"NaN","aFloat":"Infinity","color":42}"#)
        #expect(
            Scalars(aDouble: -.infinity).jsonString(options: .init(preserveProtoFieldNames: true))
                == #"{"a_double":"-Infinity"}"#)
    }

    @Test func emitDefaultsPrintsFieldsWithoutPresenceOnly() {
        #expect(Scalars().jsonString() == "{}")
        let defaults = Scalars().jsonValue(options: .init(emitDefaults: true))
        #expect(
            defaults["anInt64"] == .string("0") && defaults["aDouble"]?.doubleValue == 0
                && defaults["color"] == .string("COLOR_UNSPECIFIED"))
        #expect(defaults["someBytes"] == .string("") && defaults["aBool"] == .bool(false))
        #expect(defaults.objectValue?.count == 16)
        // Unset optionals and messages stay omitted; set ones print even at zero.
        #expect(FixturesV1.Optionals().jsonString(options: .init(emitDefaults: true)) == "{}")
        #expect(FixturesV1.Optionals(anInt64: 0, scalars: Scalars()).jsonString() == #"{"anInt64":"0","scalars":{}}"#)
        let repeateds = FixturesV1.Repeateds().jsonValue(options: .init(emitDefaults: true))
        #expect(repeateds["int64s"] == .array([]) && repeateds["scalars"] == .array([]))
        // Nested: a box at x = 0 still shows x.
        let observation = OcrV1.Observation(box: OcrV1.NormalizedBox(x: 0, y: 0.5))
        #expect(observation.jsonValue(options: .init(emitDefaults: true))["box"]?["x"]?.doubleValue == 0)
        #expect(observation.jsonString() == #"{"box":{"y":0.5}}"#)
    }

    @Test func decodesIntegersFromNumbersAndStrings() throws {
        #expect(
            try decode(Scalars.self, #"{"anInt64":"-9223372036854775808","aUint64":18446744073709551615}"#)
                == Scalars(anInt64: .min, aUint64: .max))
        #expect(
            try decode(Scalars.self, #"{"anInt32":"12","aUint32":1e3,"aSint32":2.50e1,"anSfixed32":-0}"#)
                == Scalars(anInt32: 12, aUint32: 1000, aSint32: 25))
        #expect(try decode(Scalars.self, #"{"anInt64":"1.0e2"}"#) == Scalars(anInt64: 100))
        #expect(error(Scalars.self, #"{"anInt32":1.5}"#) == "anInt32: expected an integer, found 1.5")
        #expect(error(Scalars.self, #"{"anInt32":1e-1}"#) == "anInt32: expected an integer, found 1e-1")
        #expect(error(Scalars.self, #"{"anInt32":2147483648}"#) == "anInt32: 2147483648 is out of range for Int32")
        #expect(error(Scalars.self, #"{"aUint32":-1}"#) == "aUint32: -1 is out of range for UInt32")
        #expect(error(Scalars.self, #"{"anInt64":"9223372036854775808"}"#)?.contains("out of range") == true)
        #expect(error(Scalars.self, #"{"anInt64":1e400}"#)?.contains("anInt64") == true)
        #expect(error(Scalars.self, #"{"anInt64":" 1"}"#) == #"anInt64: expected an integer, found the string " 1""#)
        #expect(error(Scalars.self, #"{"anInt32":true}"#) == "anInt32: expected an integer, found a boolean")
    }

    @Test func decodesFloatsEnumsBytesAndNames() throws {
        let decoded = try decode(
            Scalars.self, #"{"a_double":"NaN","aFloat":"-Infinity","color":"COLOR_GREEN","some_bytes":"-_8"}"#)
        #expect(
            decoded.aDouble.isNaN && decoded.aFloat == -.infinity && decoded.color == .green
                && decoded.someBytes == [0xFB, 0xFF])
        #expect(
            try decode(Scalars.self, #"{"aDouble":"2.5","color":-1,"someBytes":"+/8="}"#)
                == Scalars(aDouble: 2.5, someBytes: [0xFB, 0xFF], color: .infrared))
        #expect(try decode(Scalars.self, #"{"color":7}"#).color == .unrecognized(7))
        #expect(error(Scalars.self, #"{"aFloat":1e39}"#) == "aFloat: 1e39 is out of range for Float")
        #expect(error(Scalars.self, #"{"aDouble":"nan"}"#) == #"aDouble: expected a number, found the string "nan""#)
        #expect(error(Scalars.self, #"{"color":"PURPLE"}"#) == #"color: unknown enum value name "PURPLE""#)
        #expect(error(Scalars.self, #"{"someBytes":"a"}"#) == "someBytes: invalid base64")
        #expect(error(Scalars.self, #"{"someBytes":"ab=c"}"#) == "someBytes: invalid base64")
        #expect(error(Scalars.self, #"{"aBool":"true"}"#) == "aBool: expected true or false, found a string")
        #expect(
            Base64.decode("YQ") == [0x61] && Base64.decode("YQ==") == [0x61] && Base64.decode("YWI") == [0x61, 0x62])
        #expect(Base64.decode("YR==") == nil && Base64.decode("Y===") == nil && Base64.decode("") == [])
    }

    @Test func nullUnknownAndDuplicateFields() throws {
        #expect(try decode(FixturesV1.Optionals.self, #"{"anInt64":null,"scalars":null}"#) == FixturesV1.Optionals())
        #expect(try decode(FixturesV1.Repeateds.self, #"{"int64s":null}"#) == FixturesV1.Repeateds())
        #expect(
            error(FixturesV1.Repeateds.self, #"{"int64s":["1",null]}"#)
                == "int64s[1]: null is not allowed in a repeated field")
        #expect(error(Scalars.self, #"{"aDouble":1,"zebra":2}"#) == "zebra: unknown field")
        #expect(
            try decode(Scalars.self, #"{"aDouble":1,"zebra":{"x":[]}}"#, options: .init(ignoreUnknownFields: true))
                == Scalars(aDouble: 1))
        #expect(
            try decode(Scalars.self, #"{"color":"PURPLE","aBool":true}"#, options: .init(ignoreUnknownFields: true))
                == Scalars(aBool: true))
        #expect(error(Scalars.self, #"{"aDouble":1,"a_double":2}"#) == "a_double: field a_double given more than once")
        #expect(error(Scalars.self, #"{"aDouble":1,"aDouble":2}"#)?.contains("duplicate key") == true)
        #expect(error(Scalars.self, "[]") == "expected an object, found an array")
        #expect(error(Scalars.self, #"{"aDouble":1} x"#)?.contains("after the value") == true)
    }

    @Test func errorsNameThePathOfTheBadField() {
        #expect(
            error(OcrV1.Observation.self, #"{"box":{"x":"left"}}"#)
                == #"box.x: expected a number, found the string "left""#)
        #expect(
            error(OcrV1.ScanResponse.self, #"{"observations":[{},{"boxPx":{"width":1.5}}]}"#)
                == "observations[1].boxPx.width: expected an integer, found 1.5")
        #expect(
            error(FixturesV1.Envelope.self, #"{"inners":[{"mood":"SAD"}]}"#)
                == #"inners[0].mood: unknown enum value name "SAD""#)
    }

    /// protobuf-c carries strings as C strings: a NUL would cut the text there ("Nul\u0000Evil" stored as "Nul"), so the
    /// JSON reader refuses it, naming the field, as the binary protocol's decoder does — in a field, a nested message
    /// and a repeated string alike. Other control characters are text and pass.
    @Test func aNULInAnyStringIsRefusedNamingTheField() throws {
        #expect(
            error(Scalars.self, #"{"aString":"Nul\u0000Evil"}"#)
                == #"aString: a string may not contain a NUL character (\u0000)"#)
        #expect(
            error(FixturesV1.Envelope.self, #"{"inners":[{"note":"V\u0000olts"}]}"#)?.hasPrefix(
                "inners[0].note: a string may not") == true)
        #expect(
            error(FixturesV1.Repeateds.self, #"{"strings":["ok","le\u0000v"]}"#)?.hasPrefix(
                "strings[1]: a string may not") == true)
        #expect(try decode(Scalars.self, #"{"aString":"tab\there\u0001"}"#).aString == "tab\there\u{1}")
    }

    @Test func emptyMessagesAndRoundTrips() throws {
        #expect(RpcV1.ListServicesRequest().jsonString(options: .init(emitDefaults: true)) == "{}")
        #expect(try decode(RpcV1.ListServicesRequest.self, "{}") == RpcV1.ListServicesRequest())
        #expect(error(RpcV1.ListServicesRequest.self, #"{"a":1}"#) == "a: unknown field")
        let envelope = FixturesV1.Envelope(
            inner: .init(mood: .happy, note: "n"), inners: [.init(), .init(note: "😀")], mood: .happy,
            entry: .init(key: "k", value: "v"), kinds: [.request, .unrecognized(-5)], userID: "u", avatarURL: "a",
            default: true, class: "c", farAway: 7)
        for options in [
            ProtoJSONOptions(), ProtoJSONOptions(emitDefaults: true), ProtoJSONOptions(preserveProtoFieldNames: true),
        ] {
            #expect(
                try decode(FixturesV1.Envelope.self, envelope.jsonString(options: options, layout: .pretty)) == envelope
            )
        }
        #expect(envelope.jsonValue(options: .init())["userId"] == .string("u"))
        #expect(envelope.jsonValue(options: .init(preserveProtoFieldNames: true))["far_away"] == .number(7))
    }
}
