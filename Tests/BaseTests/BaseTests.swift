import Base
import Foundation
import Testing

@Suite struct HeapTests {
    @Test func popsInAscendingOrderWhateverThePushOrder() {
        var generator = SystemRandomNumberGenerator()
        for count in [0, 1, 2, 3, 10, 257] {
            let values = (0..<count).map { _ in Int.random(in: 0..<50, using: &generator) }
            var heap = Heap<Int>(capacity: count)
            for value in values { heap.push(value) }
            #expect(heap.count == count && heap.first == values.min())
            var popped: [Int] = []
            while let value = heap.popFirst() { popped.append(value) }
            #expect(popped == values.sorted())
            #expect(heap.isEmpty)
        }
    }

    @Test func removingElementsKeepsTheOrder() {
        var heap = Heap<Int>()
        for value in [9, 4, 7, 1, 8, 2, 6, 3, 5, 0] { heap.push(value) }
        heap.removeAll { $0 % 3 == 0 }
        var popped: [Int] = []
        while let value = heap.popFirst() { popped.append(value) }
        #expect(popped == [1, 2, 4, 5, 7, 8])
    }
}

@Suite struct UpwardSearchTests {
    @Test func candidatesClimbFromEachStartToBelowTheRoot() {
        let candidates = UpwardSearch.candidates(
            "x/y", from: [URL(fileURLWithPath: "/a/b"), URL(fileURLWithPath: "/c")])
        #expect(candidates.map(\.path) == ["/a/b/x/y", "/a/x/y", "/c/x/y"])
    }

    @Test func findsTheSourceTreeAboveTheTestExecutable() throws {
        let found = try #require(UpwardSearch.find("compose/services.conf"))
        #expect(
            FileManager.default.fileExists(
                atPath: found.deletingLastPathComponent().appendingPathComponent("compose").path))
        #expect(UpwardSearch.find("no/such/file-\(UUID().uuidString)") == nil)
    }
}

@Suite struct LogSanitizingTests {
    @Test func controlCharactersFromClientsCannotForgeOrGarbleLogLines() {
        let forged = "/menagerie.zoo.v1.Zoo/Search\n2026-11-22T10:00:00.000Z info zoo: started"
        #expect(
            Logger.sanitized(forged) == #"/menagerie.zoo.v1.Zoo/Search\n2026-11-22T10:00:00.000Z info zoo: started"#)
        #expect(Logger.sanitized("zel\0xyz\r\t\u{1B}[31m\u{7F}\u{85}") == #"zel\u{0}xyz\r\t\u{1b}[31m\u{7f}\u{85}"#)
        // Printable text, diacritics and signs included, is written as it is.
        #expect(Logger.sanitized("želva § ① 🐢") == "želva § ① 🐢")
    }

    @Test func aHugeMessageIsCutAndTheRestCounted() {
        let message = String(repeating: "ž", count: 10_000)  // 20,000 bytes
        let line = Logger.sanitized(message)
        #expect(line.utf8.count < Logger.maxMessageBytes + 40)
        #expect(line.hasSuffix("… (\(20_000 - Logger.maxMessageBytes) more bytes)"))
    }
}

/// `--log-format` (issue 9, #10): logfmt and JSON lines, each one line whatever the message quotes.
@Suite struct LogFormatTests {
    static let hostile =
        "/menagerie.zoo.v1.Zoo/Search\n{\"ts\":\"forged\"} \"quoted\" back\\slash zel\0xyz \u{1B}[31m\u{2028}ž"

    @Test func formatsAreNamedAsTheFlagTakesThem() {
        #expect(LogFormat.allCases.map(\.name) == ["text", "logfmt", "json"])
        #expect(
            LogFormat(name: "JSON") == .json && LogFormat(name: "logfmt") == .logfmt && LogFormat(name: "xml") == nil)
    }

    @Test func jsonLinesDecodeToTheMessageAsLogged() throws {
        let line = Logger.line(
            timestamp: "2026-11-22T10:00:00.000Z", level: .warning, label: "zoo", message: Self.hostile, format: .json)
        #expect(line.hasSuffix("}\n") && line.dropLast().firstIndex(of: "\n") == nil)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: String])
        #expect(
            object == ["ts": "2026-11-22T10:00:00.000Z", "level": "warning", "service": "zoo", "msg": Self.hostile])
    }

    @Test func logfmtQuotesAndEscapesTheMessage() {
        let line = Logger.line(timestamp: "T", level: .info, label: "zoo", message: Self.hostile, format: .logfmt)
        #expect(
            line
                == #"ts=T level=info service="zoo" msg="/menagerie.zoo.v1.Zoo/Search\n{\"ts\":\"forged\"} \"quoted\" back\\slash zel\u{0}xyz \u{1b}[31m\u{2028}ž""#
                + "\n")
    }

    @Test func textStaysAsItWas() {
        let line = Logger.line(timestamp: "T", level: .error, label: "zoo", message: "a\nb", format: .text)
        #expect(line == "T error zoo: a\\nb\n")
    }

    @Test func aHugeMessageIsCutInEveryFormat() throws {
        let message = String(repeating: "\"", count: 10_000)
        let line = Logger.line(timestamp: "T", level: .info, label: "zoo", message: message, format: .json)
        #expect(line.utf8.count < Logger.maxMessageBytes + 100)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: String])
        #expect(object["msg"]?.hasSuffix("more bytes)") == true)
    }
}
