import Foundation
import Testing

/// `gateway health` on the device's own store (`--local`, nothing listening): what its options mean, through the
/// executable.
@Suite struct HealthCommandLineTests {
    let scratch: URL

    init() throws {
        scratch = FileManager.default.temporaryDirectory.appendingPathComponent("health-cli-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
    }

    var store: [String] { ["--store", scratch.appendingPathComponent("device.sqlite").path, "--tz", "Europe/Prague"] }

    func health(_ arguments: String...) throws -> Gateway.Result {
        try Gateway.run(["health"] + arguments + store)
    }

    /// Issue 39: `--to` alone and `--preset` with `--from`/`--to` answered the last 7 days (or today) with 0 steps
    /// and exit 0. They are usage errors now; `--from` alone runs until now.
    @Test func statisticsRangeOptionsAreHonouredOrRefused() throws {
        defer { try? FileManager.default.removeItem(at: scratch) }
        let added = try health(
            "add", "stepCount", "120", "--start", "2026-03-28T12:00", "--end", "2026-03-28T12:10", "--local")
        try #require(added.status == 0, "\(added)")
        let fromAlone = try health("stats", "stepCount", "--from", "2026-03-28T11:00", "--local", "--json")
        #expect(fromAlone.status == 0, "\(fromAlone)")
        #expect(
            fromAlone.stdout.contains("\"sum\": 120") || fromAlone.stdout.contains("\"sum\":120"), "\(fromAlone.stdout)"
        )
        #expect(
            fromAlone.stdout.contains("\"startMs\": \"1774692000000\"")
                || fromAlone.stdout.contains("\"startMs\":\"1774692000000\""), "\(fromAlone.stdout)")
        for (arguments, says) in [
            (["--to", "2026-03-28T18:00"], "--to needs --from"),
            (
                ["--preset", "today", "--from", "2026-03-28T12:00", "--to", "2026-03-28T18:00"],
                "--preset is a whole range"
            ),
            (["--preset", "today", "--from", "2026-03-28T12:00"], "--preset is a whole range"),
        ] {
            let result = try Gateway.run(["health", "stats", "stepCount", "--local"] + arguments + store)
            #expect(result.status == 64, "\(arguments): \(result)")
            #expect(
                result.stderr.contains(says) && result.stderr.contains("Usage: gateway health stats"),
                "\(arguments): \(result.stderr)")
            #expect(result.stdout.isEmpty, "\(arguments): \(result.stdout)")
        }
    }

    /// Issue 38: an empty `--token ""` is a usage error (64), not a fall-back to the saved login or the environment's.
    @Test func anEmptyTokenIsAUsageErrorNotAFallBack() throws {
        defer { try? FileManager.default.removeItem(at: scratch) }
        let result = try health("list", "--token", "", "--local")
        #expect(result.status == 64 && result.stderr.contains("--token is empty"), "\(result)")
    }

    /// Issue 39: `list` showed the 1,000 oldest samples and stopped without a word. Newest first, a page at a time,
    /// and standard error says how to get the next.
    @Test func listPagesNewestFirstAndSaysWhenThereIsMore() throws {
        defer { try? FileManager.default.removeItem(at: scratch) }
        for minute in ["09:00", "09:01", "09:02"] {
            let added = try health("add", "stepCount", "10", "--start", "2026-03-28T\(minute)", "--local")
            try #require(added.status == 0, "\(added)")
        }
        let first = try health("list", "stepCount", "--limit", "2", "--local")
        #expect(first.status == 0, "\(first)")
        #expect(
            first.stdout.contains("09:02:00") && first.stdout.contains("09:01:00")
                && !first.stdout.contains("09:00:00"), "\(first.stdout)")
        let cursor = try #require(
            first.stderr.components(separatedBy: "--after ").last?.trimmingCharacters(in: .whitespacesAndNewlines))
        let second = try health("list", "stepCount", "--limit", "2", "--local", "--after", cursor)
        #expect(
            second.status == 0 && second.stdout.contains("09:00:00") && !second.stdout.contains("09:01:00"), "\(second)"
        )
        #expect(!second.stderr.contains("more samples"), "\(second.stderr)")
        let json = try health("list", "stepCount", "--limit", "2", "--local", "--json")
        #expect(json.stdout.contains("\"next\""), "\(json.stdout)")
        let bad = try health("list", "stepCount", "--local", "--after", "yesterday")
        #expect(bad.status == 3 && bad.stderr.contains("not a page cursor"), "\(bad)")
    }

    /// Issue 39: a local time the clocks skip was stored an hour later, and one they show twice with the later
    /// offset, silently. Resolved as java.time does, with a warning on standard error.
    @Test func skippedAndRepeatedLocalTimesAreResolvedWithAWarning() throws {
        defer { try? FileManager.default.removeItem(at: scratch) }
        let skipped = try health("add", "stepCount", "10", "--start", "2026-03-29T02:30", "--local")
        #expect(
            skipped.status == 0
                && skipped.stderr.contains("warning: 2026-03-29T02:30:00 does not exist in Europe/Prague"), "\(skipped)"
        )
        #expect(skipped.stderr.contains("2026-03-29T03:30:00+02:00"), "\(skipped.stderr)")
        let twice = try health("add", "stepCount", "20", "--start", "2026-10-25T02:30", "--local")
        #expect(twice.status == 0 && twice.stderr.contains("happens twice"), "\(twice)")
        let listed = try health("list", "stepCount", "--local", "--json")
        // 02:30 skipped is 01:30Z (03:30+02:00); 02:30 twice is first at 00:30Z (+02:00).
        for instant in ["1774747800000", "1792888200000"] {
            #expect(listed.stdout.contains(instant), "\(instant) in \(listed.stdout)")
        }
        let plain = try health("add", "stepCount", "30", "--start", "2026-10-25T04:30", "--local")
        #expect(plain.status == 0 && !plain.stderr.contains("warning"), "\(plain)")
    }
}
