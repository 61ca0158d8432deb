import Schema
import Testing

/// The strict RFC 8259 parser and the writer.
@Suite struct JSONParserTests {
    func reason(_ text: String, limits: JSONParser.Limits = JSONParser.Limits()) -> String? {
        do {
            _ = try JSONParser.parse(text, limits: limits)
            return nil
        } catch {
            return error.description
        }
    }

    @Test func parsesEveryKindOfValue() throws {
        let value = try JSONValue(
            parsing: #" { "a" : [1, -2.5e3, true, false, null, "x\u00e9\ud83d\ude00"], "b": {} } "#)
        #expect(
            value
                == .object([
                    JSONMember(
                        "a",
                        .array([
                            .number(1), .number(JSONNumber(literal: "-2.5e3")!), .bool(true), .bool(false), .null,
                            .string("xé😀"),
                        ])),
                    JSONMember("b", .object([])),
                ]))
        #expect(try JSONValue(parsing: "0") == .number(0))
        #expect(try JSONValue(parsing: #""\"\\\/\b\f\n\r\t""#) == .string("\"\\/\u{8}\u{c}\n\r\t"))
    }

    @Test(arguments: [
        ("", "end of text"), ("{", "end of text"), ("[1,", "end of text"), (#"{"a":"#, "end of text"),
        (#""abc"#, "unterminated string"), ("tru", "expected true"), ("nul", "expected null"),
        ("[1,]", "expected a value"), (#"{"a":1,}"#, "expected a member name"), ("{a:1}", "expected a member name"),
        ("[1 2]", "expected ','"), ("01", "invalid number"), ("1.", "invalid number"), (".5", "expected a value"),
        ("+1", "expected a value"), ("1e", "invalid number"), ("-", "invalid number"), ("NaN", "expected a value"),
        (#""\x""#, "invalid escape"), (#""\u12G4""#, "invalid hex digit"), (#""\u12""#, "truncated"),
        (#""\ud800""#, "unpaired high surrogate"), (#""\udc00""#, "unpaired low surrogate"),
        (#""\ud800\u0041""#, "not followed by a low surrogate"), ("\"a\nb\"", "control character"),
        (#"{"a":1,"a":2}"#, "duplicate key \"a\""), ("1 2", "after the value"), ("{} x", "after the value"),
        ("[1]]", "after the value"), ("// c\n1", "expected a value"), ("'a'", "expected a value"),
    ])
    func rejectsMalformedText(text: String, expected: String) {
        let reason = reason(text)
        #expect(reason?.contains(expected) == true, "\(text.debugDescription): \(reason ?? "accepted")")
    }

    @Test func rejectsInvalidUTF8() {
        #expect(throws: JSONParseError.self) { try JSONParser.parse([0x22, 0xC3, 0x28, 0x22]) }
        // encoded surrogate
        #expect(throws: JSONParseError.self) { try JSONParser.parse([0x22, 0xED, 0xA0, 0x80, 0x22]) }
    }

    @Test func boundsDepthAndSize() throws {
        let deep = String(repeating: "[", count: 101) + String(repeating: "]", count: 101)
        #expect(reason(deep)?.contains("nesting deeper than 100") == true)
        let fits = String(repeating: "[", count: 100) + String(repeating: "]", count: 100)
        #expect(reason(fits) == nil)
        // Far deeper than any stack would survive unbounded: refused, not a crash.
        #expect(reason(String(repeating: "{\"a\":", count: 200_000))?.contains("nesting") == true)
        #expect(reason("[1, 2, 3]", limits: JSONParser.Limits(maxBytes: 8))?.contains("exceeds the limit of 8") == true)
    }

    @Test func writerEscapesControlCharactersAndKeepsNonBMPText() throws {
        let text = "q\"\\/\n\r\t\u{0}\u{1}\u{1F}\u{7F}é😀\u{2028}"
        let compact = JSONValue.string(text).serialized()
        #expect(compact == #""q\"\\/\n\r\t\u0000\u0001\u001f"# + "\u{7F}é😀" + #"\u2028""#)
        #expect(JSONValue.string("é😀").serialized(asciiOnly: true) == #""\u00e9\ud83d\ude00""#)
        for serialized in [compact, JSONValue.string(text).serialized(asciiOnly: true)] {
            #expect(try JSONValue(parsing: serialized) == .string(text))
        }
    }

    @Test func prettyAndCompactLayouts() {
        let value = JSONValue.object([
            JSONMember("a", .array([.number(1), .null])), JSONMember("b", .object([])), JSONMember("c", .array([])),
        ])
        #expect(value.serialized() == #"{"a":[1,null],"b":{},"c":[]}"#)
        #expect(value.serialized(.pretty) == "{\n  \"a\": [\n    1,\n    null\n  ],\n  \"b\": {},\n  \"c\": []\n}")
    }

    @Test func numbersKeepTheirLiteralAndCompareByValueSemantically() throws {
        let big = try JSONValue(parsing: "12345678901234567890123")
        #expect(big.serialized() == "12345678901234567890123")
        #expect(try JSONValue(parsing: "1.0").isSemanticallyEqual(to: .number(1)))
        #expect(try JSONValue(parsing: "1.0") != .number(1))
        #expect(
            try JSONValue(parsing: #"{"a":1,"b":2}"#).isSemanticallyEqual(to: JSONValue(parsing: #"{"b":2,"a":1}"#)))
        #expect(JSONNumber(Double.nan) == nil && JSONNumber(Double.infinity) == nil)
        #expect(
            JSONNumber(literal: "1e5") != nil && JSONNumber(literal: "1e+") == nil && JSONNumber(literal: "00") == nil)
    }
}
