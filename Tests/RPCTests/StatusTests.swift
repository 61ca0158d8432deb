import Testing

@testable import RPC

@Suite struct StatusTests {
    @Test func hasGRPCsSeventeenCodesInOrder() {
        #expect(StatusCode.all.count == 17)
        #expect(StatusCode.all.map(\.rawValue) == Array(0...16))
        #expect(StatusCode.notFound.name == "NOT_FOUND")
        #expect(StatusCode.internalError.name == "INTERNAL")
        #expect(StatusCode.unauthenticated.rawValue == 16)
        #expect(StatusCode(rawValue: 42).name == "CODE_42")
    }

    @Test func parsesNamesAndNumbers() {
        #expect(StatusCode(name: "deadline_exceeded") == .deadlineExceeded)
        #expect(StatusCode(name: "14") == .unavailable)
        #expect(StatusCode(name: "NOPE") == nil)
    }

    @Test func metadataKeysAreCaseInsensitive() {
        var metadata: Metadata = ["Request-ID": "abc"]
        #expect(metadata["request-id"] == "abc")
        metadata["REQUEST-ID"] = "def"
        #expect(metadata.entries.count == 1)
        #expect(metadata["request-id"] == "def")
        metadata.add("tag", "a")
        metadata.add("tag", "b")
        #expect(metadata.entries.count == 3)
    }

    @Test func histogramPercentilesBracketTheSamples() {
        var histogram = LatencyHistogram()
        for micros in 1...1000 { histogram.add(micros: Int64(micros)) }
        let p50 = histogram.percentile(0.5)
        let p99 = histogram.percentile(0.99)
        #expect(p50 >= 500 && p50 <= 530)
        #expect(p99 >= 990 && p99 <= 1045)
    }
}
