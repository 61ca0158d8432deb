import Foundation
import Testing

/// A service's `--log-format` (issue 9, #10), through a real executable: every line it writes is one JSON
/// object (or one logfmt record), and an unknown format is a usage error.
@Suite struct ServiceLogFormatTests {
    /// Runs zoo with a data directory it cannot create: it logs why and exits at once.
    func failingStart(_ format: String) async throws -> (status: Int32, output: String) {
        try await Stack.run(
            "\(Stack.binDirectory)/zoo",
            ["--port", "0", "--data-dir", "/proc/menagerie\nforged", "--log-format", format],
            environment: [:])
    }

    @Test func jsonLinesAndLogfmt() async throws {
        let json = try await failingStart("json")
        #expect(json.status != 0)
        let lines = json.output.split(separator: "\n")
        #expect(!lines.isEmpty)
        for line in lines {
            let object = try #require(
                try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: String], "\(line)")
            #expect(object["service"] == "zoo" && object["level"] != nil && object["ts"] != nil, "\(line)")
        }
        #expect(lines.contains { $0.contains(#"/proc/menagerie\nforged"#) }, "\(json.output)")

        let logfmt = try await failingStart("logfmt")
        #expect(
            logfmt.output.split(separator: "\n").allSatisfy {
                $0.hasPrefix("ts=") && $0.contains(" service=\"zoo\" msg=\"")
            },
            "\(logfmt.output)")
    }

    @Test func anUnknownFormatIsAUsageError() async throws {
        let result = try await failingStart("xml")
        #expect(result.status == 64 && result.output.contains("--log-format"), "\(result.output)")
    }
}
