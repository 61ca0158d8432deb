import Testing

@testable import Connect
@testable import Framing
@testable import ServerCore
@testable import ServerSeam
@testable import TCP
@testable import TLSStreams
@testable import Transport

/// Content-Type's media type as Connect dispatches on it: before any parameter, without spaces or tabs, lowercased.
@Suite struct ConnectMediaTypeTests {
    @Test func theMediaTypeIsCutTrimmedAndLowercased() {
        #expect(ConnectProtocol.mediaType("application/json") == "application/json")
        #expect(ConnectProtocol.mediaType(" \tApplication/JSON ; charset=utf-8") == "application/json")
        #expect(ConnectProtocol.mediaType("application/connect+proto;") == "application/connect+proto")
        #expect(
            ConnectProtocol.mediaType(nil) == "" && ConnectProtocol.mediaType("   ") == ""
                && ConnectProtocol.mediaType(";x") == "")
        // only spaces and tabs are HTTP's whitespace
        #expect(ConnectProtocol.mediaType("text/plain\u{0B}") == "text/plain\u{0B}")
        #expect(ConnectProtocol.Call.codings(["gzip, Identity;q=0.5", "BR"]) == ["gzip", "identity", "br"])
    }
}
