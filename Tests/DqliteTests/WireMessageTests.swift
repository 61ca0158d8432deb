import Testing

@testable import Dqlite

@Suite struct WireMessageTests {
    @Test func stringsEndWithNulAndArePaddedToAWord() throws {
        var encoder = WireEncoder()
        encoder.string("abcdefg")  // 7 bytes + NUL: exactly one word
        encoder.string("abcdefgh")  // 8 bytes + NUL: two words
        #expect(encoder.body.count == 24)
        #expect(encoder.body[7] == 0 && encoder.body[8] == UInt8(ascii: "a") && encoder.body[16] == 0)
        var decoder = WireDecoder(type: WireType.node, body: encoder.body)
        #expect(try decoder.string() == "abcdefg")
        #expect(try decoder.string() == "abcdefgh")
        #expect(decoder.isAtEnd)
    }

    @Test func headerCountsWordsAndCarriesTypeAndSchema() {
        var encoder = WireEncoder()
        encoder.uint64(7)
        encoder.string("SELECT 1")
        let message = encoder.message(type: WireType.querySQL, schema: 0)
        #expect(Array(message[0..<8]) == [3, 0, 0, 0, 9, 0, 0, 0])
        #expect(message.count == 8 + 24)
    }

    @Test func parametersAreACountTypesPaddingAndValues() throws {
        var encoder = WireEncoder()
        try encoder.parameters([.integer(-2), .text("x"), .null, .blob([1, 2, 3]), .real(1.5)])
        #expect(Array(encoder.body[0..<8]) == [5, 1, 3, 5, 4, 2, 0, 0])
        var decoder = WireDecoder(type: WireType.rows, body: encoder.body)
        _ = try decoder.uint64()
        #expect(try decoder.int64() == -2)
        #expect(try decoder.string() == "x")
        #expect(try decoder.uint64() == 0)
        #expect(try decoder.blob() == [1, 2, 3])
        #expect(try decoder.double() == 1.5)
        #expect(decoder.isAtEnd)
    }

    @Test func noParametersEncodeNothing() throws {
        var encoder = WireEncoder()
        try encoder.parameters([])
        #expect(encoder.body.isEmpty)
    }

    @Test func moreThan255ParametersAndNulInTextAreRefused() {
        var encoder = WireEncoder()
        #expect(throws: DqliteError.self) { try encoder.parameters(Array(repeating: .null, count: 256)) }
        #expect(throws: DqliteError.self) { try encoder.parameters([.text("a\u{0}b")]) }
    }

    @Test func aTruncatedResponseIsAProtocolViolationNotACrash() throws {
        var decoder = WireDecoder(type: WireType.result, body: [1, 2, 3])
        #expect { try decoder.uint64() } throws: { ($0 as? DqliteError)?.kind == .protocolViolation }
        var unterminated = WireDecoder(type: WireType.node, body: Array("abc".utf8))
        #expect { try unterminated.string() } throws: { ($0 as? DqliteError)?.kind == .protocolViolation }
    }
}
