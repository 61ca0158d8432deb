import Testing

@testable import HTTP

/// Field names compare ignoring ASCII case only, byte by byte.
@Suite struct HTTPHeadersTests {
    @Test func namesMatchIgnoringASCIICaseAndNothingElse() {
        var headers: HTTPHeaders = ["Content-Type": "application/json", "X-Trace-ID": "a", "x-trace-id": "b"]
        #expect(headers["content-type"] == "application/json")
        #expect(headers["CONTENT-TYPE"] == "application/json")
        #expect(headers.values("X-TRACE-id") == ["a", "b"])
        #expect(headers["content_type"] == nil)  // '-' and '_' differ by 0x20 less one: not the same letter
        #expect(headers["content-typ"] == nil && headers["content-types"] == nil)
        #expect(!HTTPHeaders.sameName("a-b", "A\u{0D}B"))  // 0x2D | 0x20 == 0x0D | 0x20: case folds only letters
        #expect(!HTTPHeaders.sameName("[", "{"))  // 0x5B and 0x7B differ by 0x20 but are not letters
        headers.set("CONTENT-type", "text/plain")
        #expect(headers.values("content-type") == ["text/plain"])
    }
}
