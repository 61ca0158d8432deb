import Foundation
import TestSupport
import Testing

/// The health service through `gateway health …` against compose's stack: users and tokens, the server's samples,
/// two devices (two `--store` files) syncing, isolation between users, import of an export.xml, and kill -9.
@Suite(.serialized) struct HealthStackTests {
    /// Runs `gateway health ARGS` with a scratch `XDG_DATA_HOME` (no token remembered from elsewhere) and no
    /// `MENAGERIE_HEALTH_TOKEN`, so only what the test passes authenticates.
    func health(_ stack: Stack, _ arguments: [String]) async throws -> (status: Int32, output: String) {
        var environment = stack.environment
        environment["XDG_DATA_HOME"] = stack.directory.appendingPathComponent("xdg").path
        environment.removeValue(forKey: "MENAGERIE_HEALTH_TOKEN")
        return try await Stack.run(
            "\(Stack.binDirectory)/gateway", ["health"] + arguments + ["--state", stack.state.path],
            environment: environment)
    }

    /// The whole output as one JSON value: a progress line or anything else beside it fails the test.
    func strictJSON(_ result: (status: Int32, output: String), sourceLocation: SourceLocation = #_sourceLocation) throws
        -> Any
    {
        try #require(result.status == 0, "\(result.output)", sourceLocation: sourceLocation)
        let text = result.output.trimmingCharacters(in: .whitespacesAndNewlines)
        return try #require(
            try? JSONSerialization.jsonObject(with: Data(text.utf8)), "not only JSON: \(result.output)",
            sourceLocation: sourceLocation)
    }

    func object(_ result: (status: Int32, output: String), sourceLocation: SourceLocation = #_sourceLocation) throws
        -> [String: Any]
    {
        try #require(
            try strictJSON(result, sourceLocation: sourceLocation) as? [String: Any], sourceLocation: sourceLocation)
    }

    func status(
        _ result: (status: Int32, output: String), _ code: Int32, _ what: String, contains text: String? = nil,
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        #expect(result.status == code, "\(what): \(result.output)", sourceLocation: sourceLocation)
        if let text {
            #expect(result.output.contains(text), "\(what): \(result.output)", sourceLocation: sourceLocation)
        }
    }

    /// The UUID `gateway health add` printed ("<uuid>: added 1").
    func addedUUID(_ result: (status: Int32, output: String), sourceLocation: SourceLocation = #_sourceLocation) throws
        -> String
    {
        #expect(
            result.status == 0 && result.output.contains(": added 1"), "\(result.output)",
            sourceLocation: sourceLocation)
        return try #require(result.output.split(separator: ":").first.map(String.init), sourceLocation: sourceLocation)
    }

    /// UUIDs `list --json` printed (a QuerySamplesResponse).
    func uuids(_ result: (status: Int32, output: String), sourceLocation: SourceLocation = #_sourceLocation) throws
        -> Set<String>
    {
        let reply = try object(result, sourceLocation: sourceLocation)
        let samples = try #require(reply["samples"] as? [[String: Any]], "\(reply)", sourceLocation: sourceLocation)
        return Set(samples.compactMap { $0["uuid"] as? String })
    }

    /// A 64-bit integer of `--json` output: the JSON mapping spells it as a string.
    static func int64(_ value: Any?) -> Int? { (value as? String).flatMap { Int($0) } }

    /// What `sync --json` printed: two WriteSummary objects, what the server made of the push and what the
    /// device's store made of the pull.
    struct SyncSummary: CustomStringConvertible {
        var pushed: [String: Any], pulled: [String: Any]

        /// Changes a summary accounts for: each sample added, a duplicate, refused as deleted before or in
        /// conflict; each deletion applied or already applied.
        static func changes(_ summary: [String: Any]) -> Int {
            ["added", "duplicates", "alreadyDeleted", "deleted", "duplicateDeletions", "conflictsOmitted"]
                .reduce(0) { $0 + (int64(summary[$1]) ?? 0) } + ((summary["conflicts"] as? [Any])?.count ?? 0)
        }

        var pushedChanges: Int { Self.changes(pushed) }
        var pulledChanges: Int { Self.changes(pulled) }
        var addedOnServer: Int? { int64(pushed["added"]) }
        var addedHere: Int? { int64(pulled["added"]) }
        var deletedHere: Int? { int64(pulled["deleted"]) }
        var description: String { "pushed \(pushed), pulled \(pulled)" }
    }

    /// An export.xml with the inline DTD, `ExportDate` and `Me`, `count` minute-long step records from 2026-01-01
    /// 00:00 UTC (values 1, 2, …, 50, 1, …), a record of a type the service does not model and a `Workout`.
    static func export(steps count: Int) -> String {
        var text = """
            <?xml version="1.0" encoding="UTF-8"?>
            <!DOCTYPE HealthData [
            <!-- HealthKit Export Version: 14 -->
            <!ELEMENT HealthData (ExportDate,Me,(Record|Correlation|Workout|ActivitySummary)*)>
            <!ATTLIST HealthData locale CDATA #REQUIRED>
            ]>
            <HealthData locale="en_US">
             <ExportDate value="2026-05-02 10:00:00 +0200"/>
             <Me HKCharacteristicTypeIdentifierBiologicalSex="HKBiologicalSexFemale"/>
             <Record type="HKQuantityTypeIdentifierVO2Max" sourceName="Watch" unit="mL/min·kg" startDate="2026-01-01 07:00:00 +0200" endDate="2026-01-01 07:00:00 +0200" value="41.2"/>
             <Workout workoutActivityType="HKWorkoutActivityTypeRunning" duration="30" startDate="2026-01-01 07:00:00 +0200" endDate="2026-01-01 07:30:00 +0200">
              <MetadataEntry key="HKIndoorWorkout" value="0"/>
             </Workout>

            """
        text.reserveCapacity(count * 230)
        let base = 1_767_225_600  // 2026-01-01T00:00:00Z
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyy-MM-dd HH:mm:ss"
        for index in 0..<count {
            let start = formatter.string(from: Date(timeIntervalSince1970: Double(base + index * 60)))
            let end = formatter.string(from: Date(timeIntervalSince1970: Double(base + index * 60 + 60)))
            text +=
                #" <Record type="HKQuantityTypeIdentifierStepCount" sourceName="Watch" unit="count" startDate="\#(start) +0000" endDate="\#(end) +0000" value="\#(index % 50 + 1)"/>"#
            text += "\n"
        }
        return text + "</HealthData>\n"
    }

    /// The sum of `export(steps:)`'s values.
    static func stepSum(_ count: Int) -> Int { (0..<count).reduce(0) { $0 + $1 % 50 + 1 } }

    /// The sample count and step sum in January 2026, on the server or (with `store`) in a device's store.
    func januarySteps(_ stack: Stack, token: String, store: String? = nil) async throws -> (count: Int, sum: Int) {
        var arguments = [
            "stats", "stepCount", "--from", "2026-01-01", "--to", "2026-02-01", "--tz", "UTC", "--json", "--token",
            token,
        ]
        if let store { arguments += ["--local", "--store", store] }
        let stats = try object(try await health(stack, arguments))
        let bucket = try #require((stats["buckets"] as? [[String: Any]])?.first, "\(stats)")
        return (Self.int64(bucket["count"]) ?? -1, Int(((bucket["sum"] as? Double) ?? -1).rounded()))
    }

    func serverSamples(_ stack: Stack, token: String) async throws -> Int {
        try #require(
            Self.int64(try object(try await health(stack, ["account", "--json", "--token", token]))["sampleCount"]))
    }

    /// `sync --json` of `store`, which must print only its JSON (no progress lines: the output is a pipe).
    func sync(_ stack: Stack, token: String, store: String, sourceLocation: SourceLocation = #_sourceLocation)
        async throws -> SyncSummary
    {
        try summary(
            try await health(stack, ["sync", "--json", "--token", token, "--store", store]),
            sourceLocation: sourceLocation)
    }

    func summary(_ result: (status: Int32, output: String), sourceLocation: SourceLocation = #_sourceLocation) throws
        -> SyncSummary
    {
        let both = try #require(
            try strictJSON(result, sourceLocation: sourceLocation) as? [[String: Any]], sourceLocation: sourceLocation)
        try #require(both.count == 2, "\(both)", sourceLocation: sourceLocation)
        return SyncSummary(pushed: both[0], pulled: both[1])
    }

    /// Waits until compose has restarted `replica` (a pid other than `victim`) and it answers.
    func waitRestarted(_ stack: Stack, _ replica: String, victim: Int32) async throws {
        var restarted = false
        for _ in 0..<Int(300 * TestTime.scale) where !restarted {
            try await Task.sleep(for: .milliseconds(100))
            if let pid = try? stack.servicePids()[replica], pid != victim, Stack.isRunning(pid) { restarted = true }
        }
        try #require(restarted, "compose did not restart \(replica)")
        try await Stack.waitServing(port: try #require(stack.basePorts["health"]))
    }

    @Test func usersSamplesDevicesAndImportThroughTheGateway() async throws {
        try await Stack.with(services: ["health"]) { stack in
            let up = try await stack.compose("up")
            try #require(up.status == 0, "compose up failed: \(up.output)")
            let files = stack.directory.appendingPathComponent("files")
            try FileManager.default.createDirectory(at: files, withIntermediateDirectories: true)

            // A user and its token (printed once).
            let jana = try object(try await health(stack, ["user", "create", "jana", "--json"]))
            let token = try #require(jana["token"] as? String)
            #expect(jana["name"] as? String == "jana" && token.count >= 43, "\(jana)")
            status(try await health(stack, ["user", "create", "jana"]), 6, "the same name again")

            // On the server: add, show, list, stats --json, delete.
            let steps = try addedUUID(
                try await health(
                    stack,
                    [
                        "add", "stepCount", "400", "--start", "2026-05-01T23:45", "--end", "2026-05-02T00:45", "--tz",
                        "UTC", "--token", token,
                    ]))
            let water = try addedUUID(
                try await health(
                    stack,
                    [
                        "add", "dietaryWater", "0.25", "--unit", "L", "--start", "2026-05-01T09:00", "--tz", "UTC",
                        "--token", token,
                    ]))
            let shown = try #require(
                try object(try await health(stack, ["show", water, "--unit", "mL", "--json", "--token", token]))[
                    "sample"] as? [String: Any])
            #expect(
                shown["type"] as? String == "dietaryWater" && shown["value"] as? Double == 250
                    && shown["unit"] as? String == "mL", "\(shown)")
            #expect(
                try uuids(
                    try await health(
                        stack,
                        [
                            "list", "stepCount", "--json", "--from", "2026-05-01", "--to", "2026-05-03", "--tz", "UTC",
                            "--token", token,
                        ])) == [steps])
            let stats = try object(
                try await health(
                    stack,
                    [
                        "stats", "stepCount", "--period", "day", "--from", "2026-05-01", "--to", "2026-05-03", "--tz",
                        "UTC", "--json", "--token", token,
                    ]))
            #expect(stats["type"] as? String == "stepCount" && stats["unit"] as? String == "count", "\(stats)")
            let buckets = try #require(stats["buckets"] as? [[String: Any]])
            #expect(buckets.map { $0["sum"] as? Double } == [100, 300], "a sample over midnight is split: \(buckets)")
            // 2026-05-01T00:00:00Z and the next day, in epoch milliseconds spelled as strings (int64 in the JSON mapping).
            #expect(buckets.map { $0["startMs"] as? String } == ["1777593600000", "1777680000000"], "\(buckets)")
            status(try await health(stack, ["delete", water, "--token", token]), 0, "delete", contains: "deleted 1")
            #expect(
                try uuids(
                    try await health(
                        stack,
                        [
                            "list", "dietaryWater", "--json", "--from", "2026-05-01", "--to", "2026-05-02", "--tz",
                            "UTC", "--token", token,
                        ])
                ).isEmpty)
            status(try await health(stack, ["show", water, "--token", token]), 5, "a deleted sample")

            // Bad values: exit 3 (INVALID_ARGUMENT), nothing stored.
            status(
                try await health(stack, ["add", "stepCount", "10", "--start", "garbage", "--token", token]), 3,
                "a garbage --start", contains: "garbage")
            status(
                try await health(stack, ["add", "heartRate", "500", "--token", token]), 3, "an implausible heart rate")
            status(
                try await health(stack, ["add", "dietaryWater", "1", "--unit", "kg", "--token", token]), 3,
                "a unit of another dimension")
            status(
                try await health(
                    stack, ["add", "stepCount", "10", "--start", "2026-05-02", "--end", "2026-05-01", "--token", token]),
                3, "an end before the start")
            status(
                try await health(stack, ["list", "stepCount", "--from", "yesterday-ish", "--token", token]), 3,
                "a garbage --from")
            #expect(try await serverSamples(stack, token: token) == 1)

            // Another user: the first user's UUID is NOT_FOUND (exit 5) whatever it asks; it sees nothing.
            let piotr = try #require(
                try object(try await health(stack, ["user", "create", "piotr", "--json"]))["token"] as? String)
            status(
                try await health(stack, ["show", steps, "--token", piotr]), 5, "another user's sample",
                contains: "NOT_FOUND")
            status(
                try await health(stack, ["delete", steps, "--token", piotr]), 5, "deleting another user's sample",
                contains: "NOT_FOUND")
            #expect(
                try uuids(
                    try await health(
                        stack,
                        [
                            "list", "stepCount", "--json", "--from", "2026-05-01", "--to", "2026-05-03", "--tz", "UTC",
                            "--token", piotr,
                        ])
                ).isEmpty)
            #expect(try await serverSamples(stack, token: piotr) == 0)
            #expect(try await serverSamples(stack, token: token) == 1, "the other user's delete changed nothing")

            // No token, or a wrong one: UNAUTHENTICATED (exit 16).
            status(try await health(stack, ["account"]), 16, "no token", contains: "UNAUTHENTICATED")
            status(
                try await health(stack, ["account", "--token", "not-a-token"]), 16, "a wrong token",
                contains: "UNAUTHENTICATED")
            status(
                try await health(stack, ["list", "stepCount", "--token", String(token.reversed())]), 16, "a wrong token"
            )

            // Two devices of jana's: each adds offline, each syncs, both converge; a second sync changes nothing.
            let phone = files.appendingPathComponent("phone.sqlite").path,
                watch = files.appendingPathComponent("watch.sqlite").path
            let onPhone = try addedUUID(
                try await health(
                    stack,
                    [
                        "add", "stepCount", "120", "--start", "2026-05-03T08:00", "--end", "2026-05-03T08:10", "--tz",
                        "UTC", "--local", "--store", phone, "--token", token,
                    ]))
            let doomed = try addedUUID(
                try await health(
                    stack,
                    [
                        "add", "stepCount", "7", "--start", "2026-05-03T09:00", "--end", "2026-05-03T09:01", "--tz",
                        "UTC", "--local", "--store", phone, "--token", token,
                    ]))
            let onWatch = try addedUUID(
                try await health(
                    stack,
                    [
                        "add", "heartRate", "61", "--start", "2026-05-03T08:05", "--tz", "UTC", "--local", "--store",
                        watch, "--token", token,
                    ]))
            let phoneFirst = try await sync(stack, token: token, store: phone)
            #expect(
                phoneFirst.pushedChanges == 2 && phoneFirst.addedOnServer == 2 && phoneFirst.addedHere == 1,
                "the server's sample comes down: \(phoneFirst)")
            let watchFirst = try await sync(stack, token: token, store: watch)
            #expect(
                watchFirst.pushedChanges == 1 && watchFirst.addedHere == 3,
                "the server's sample and the phone's two: \(watchFirst)")
            let phoneSecond = try await sync(stack, token: token, store: phone)
            #expect(phoneSecond.pushedChanges == 0 && phoneSecond.addedHere == 1, "the watch's sample: \(phoneSecond)")
            for store in [phone, watch] {
                let again = try await sync(stack, token: token, store: store)
                #expect(again.pushedChanges == 0 && again.pulledChanges == 0 && again.addedHere == 0, "\(again)")
                let local = try uuids(
                    try await health(
                        stack,
                        [
                            "list", "stepCount", "--oldest-first", "--local", "--store", store, "--json", "--from",
                            "2026-05-01", "--to", "2026-05-04", "--tz", "UTC", "--token", token,
                        ]))
                #expect(local == [steps, onPhone, doomed], "\(store)")
                let beats = try uuids(
                    try await health(
                        stack,
                        [
                            "list", "heartRate", "--local", "--store", store, "--json", "--from", "2026-05-03", "--to",
                            "2026-05-04", "--tz", "UTC", "--token", token,
                        ]))
                #expect(beats == [onWatch], "\(store)")
            }
            // A deletion on the watch travels through the server to the phone.
            status(
                try await health(stack, ["delete", doomed, "--local", "--store", watch, "--token", token]), 0,
                "a local delete", contains: "deleted 1")
            #expect(try await sync(stack, token: token, store: watch).pushedChanges == 1)
            let deletedHere = try await sync(stack, token: token, store: phone)
            #expect(deletedHere.deletedHere == 1, "\(deletedHere)")
            status(
                try await health(stack, ["show", doomed, "--local", "--store", phone, "--token", token]), 5,
                "a sample deleted on the other device")
            #expect(try await serverSamples(stack, token: token) == 3)

            // Import an export.xml into the phone's store (only JSON with --json; plain progress lines without),
            // a second import adds nothing, and the next sync sends it on.
            let export = files.appendingPathComponent("export.xml")
            try Self.export(steps: 30).write(to: export, atomically: true, encoding: .utf8)
            let imported = try object(
                try await health(stack, ["import", export.path, "--json", "--store", phone, "--token", token]))
            #expect(imported["records"] as? String == "31" && imported["added"] as? String == "30", "\(imported)")
            #expect(
                (imported["skippedTypes"] as? [String: String])?["HKQuantityTypeIdentifierVO2Max"] == "1", "\(imported)"
            )
            #expect((imported["skippedElements"] as? [String: String])?["Workout"] == "1", "\(imported)")
            let again = try await health(stack, ["import", export.path, "--store", phone, "--token", token])
            #expect(again.status == 0 && again.output.contains("added 0, 30 already stored"), "\(again.output)")
            #expect(
                again.output.contains("100% ") && !again.output.contains("\r"),
                "plain progress lines on a pipe: \(again.output)")
            let sent = try await sync(stack, token: token, store: phone)
            #expect(sent.pushedChanges == 30 && sent.addedOnServer == 30, "\(sent)")
            #expect(try await januarySteps(stack, token: token) == (30, Self.stepSum(30)))
            // Without --json on a pipe: plain progress lines, the pull's fraction reaching 100%, then the summary.
            let watchText = try await health(stack, ["sync", "--store", watch, "--token", token])
            #expect(
                watchText.status == 0 && watchText.output.contains("100% pulling: ")
                    && !watchText.output.contains("\r"), "\(watchText.output)")
            #expect(watchText.output.contains("pulled 30 (added 30, deleted 0)"), "\(watchText.output)")
            let broken = files.appendingPathComponent("broken.xml")
            try "<HealthData>\n <Record type=\"HKQuantityTypeIdentifierStepCount\" value=\"1\"\n".write(
                to: broken, atomically: true, encoding: .utf8)
            status(
                try await health(stack, ["import", broken.path, "--store", watch, "--token", token]), 3,
                "a malformed file", contains: "line")

            // Tokens: a further one works until revoked; login remembers one for later commands.
            let second = try #require(
                try object(try await health(stack, ["token", "issue", "--json", "--token", token]))["token"] as? String)
            #expect(try await serverSamples(stack, token: second) == 33)
            status(
                try await health(stack, ["token", "revoke", second, "--token", token]), 0, "revoke", contains: "revoked"
            )
            status(
                try await health(stack, ["account", "--token", second]), 16, "a revoked token",
                contains: "UNAUTHENTICATED")
            status(
                try await health(stack, ["token", "revoke", token, "--token", piotr]), 5,
                "revoking another user's token")
            // A token that cannot be saved is an error (before: exit 0, "logged in", and the next command had no token).
            let tokenFile = stack.directory.appendingPathComponent("xdg/menagerie/health/token")
            try FileManager.default.createDirectory(at: tokenFile, withIntermediateDirectories: true)
            status(
                try await health(stack, ["login", token]), 73, "login with its token file unwritable",
                contains: "cannot write the login token file")
            try FileManager.default.removeItem(at: tokenFile)
            status(try await health(stack, ["login", token]), 0, "login", contains: "logged in as jana")
            status(try await health(stack, ["account"]), 0, "the remembered token", contains: "jana: 33 samples")
            let mode = try FileManager.default.attributesOfItem(atPath: tokenFile.path)[.posixPermissions] as? Int
            #expect(mode == 0o600, "the saved token is its owner's only: \(String(mode ?? 0, radix: 8))")
        }
    }

    /// Acknowledged writes survive kill -9 of the replica; a sync cut off by one resumes without loss or duplicates.
    @Test func killMinusNineLosesNothingAndAnInterruptedSyncResumes() async throws {
        try await Stack.with(services: ["health"]) { stack in
            let up = try await stack.compose("up")
            try #require(up.status == 0, "compose up failed: \(up.output)")
            let files = stack.directory.appendingPathComponent("files")
            try FileManager.default.createDirectory(at: files, withIntermediateDirectories: true)
            let token = try #require(
                try object(try await health(stack, ["user", "create", "jana", "--json"]))["token"] as? String)
            let phone = files.appendingPathComponent("phone.sqlite").path

            // Synced samples survive kill -9; the next sync finds nothing to do.
            let export = files.appendingPathComponent("small.xml")
            try Self.export(steps: 200).write(to: export, atomically: true, encoding: .utf8)
            #expect(
                try object(
                    try await health(stack, ["import", export.path, "--json", "--store", phone, "--token", token]))[
                        "added"] as? String == "200")
            _ = try addedUUID(
                try await health(
                    stack,
                    ["add", "dietaryWater", "300", "--start", "2026-05-01T09:00", "--tz", "UTC", "--token", token]))
            #expect(try await sync(stack, token: token, store: phone).addedOnServer == 200)
            let before = try object(try await health(stack, ["account", "--json", "--token", token]))
            #expect(before["sampleCount"] as? String == "201", "\(before)")
            let victim = try #require(try stack.servicePids()["health.0"])
            kill(victim, SIGKILL)
            try await waitRestarted(stack, "health.0", victim: victim)
            let after = try object(try await health(stack, ["account", "--json", "--token", token]))
            #expect(
                after["sampleCount"] as? String == "201" && after["anchor"] as? String == before["anchor"] as? String,
                "\(before) → \(after)")
            let quiet = try await sync(stack, token: token, store: phone)
            #expect(quiet.pushedChanges == 0 && quiet.pulledChanges == 0, "\(quiet)")

            // kill -9 while a large push runs: the sync fails, a re-run completes, and nothing is lost or doubled.
            let total = 40_000
            let big = files.appendingPathComponent("big.xml")
            try Self.export(steps: total).write(to: big, atomically: true, encoding: .utf8)
            let tablet = files.appendingPathComponent("tablet.sqlite").path
            #expect(
                try object(
                    try await health(stack, ["import", big.path, "--json", "--store", tablet, "--token", token]))[
                        "added"] as? String == String(total))
            var environment = stack.environment
            environment["XDG_DATA_HOME"] = stack.directory.appendingPathComponent("xdg").path
            let gateway = Process()
            gateway.executableURL = URL(fileURLWithPath: "\(Stack.binDirectory)/gateway")
            gateway.arguments = ["health", "sync", "--store", tablet, "--token", token, "--state", stack.state.path]
            gateway.environment = environment
            gateway.standardOutput = FileHandle.nullDevice
            gateway.standardError = FileHandle.nullDevice
            gateway.standardInput = FileHandle.nullDevice
            try gateway.run()
            defer { if gateway.isRunning { gateway.terminate() } }
            // Once the server has committed part of the push (the January steps: 200 from the phone, more now), kill.
            var midway = false
            for _ in 0..<Int(600 * TestTime.scale) where !midway && gateway.isRunning {
                try await Task.sleep(for: .milliseconds(50))
                let count = (try? await januarySteps(stack, token: token).count) ?? 0
                midway = count > 200 && count < total
            }
            let second = try #require(try stack.servicePids()["health.0"])
            kill(second, SIGKILL)
            if !midway {
                Issue.record("the push ended before the kill; it proves nothing about resuming (a faster machine?)")
            }
            let exited = try await offPool { () -> Bool in
                for _ in 0..<Int(1200 * TestTime.scale) where gateway.isRunning { usleep(100_000) }
                return !gateway.isRunning
            }
            try #require(exited, "the sync did not end within \(TestTime.scaled(.seconds(120))) of the kill")
            try await waitRestarted(stack, "health.0", victim: second)

            let resumed = try summary(try await health(stack, ["sync", "--json", "--store", tablet, "--token", token]))
            #expect(resumed.pushedChanges < total || !midway, "the re-run sent everything again: \(resumed)")
            // The tablet's 40,000 steps start where the phone's 200 did: the same records, so their UUIDs are the same.
            #expect(try await januarySteps(stack, token: token) == (total, Self.stepSum(total)), "the server's January")
            #expect(
                try await januarySteps(stack, token: token, store: tablet) == (total, Self.stepSum(total)),
                "the tablet's January")
            #expect(try await serverSamples(stack, token: token) == total + 1)
            let quietAgain = try await sync(stack, token: token, store: tablet)
            #expect(quietAgain.pushedChanges == 0 && quietAgain.pulledChanges == 0, "\(quietAgain)")
        }
    }

    /// Runs `python3 -c SCRIPT ARGS` (python3 is one of compose's packages): the zips below are made with its
    /// zipfile module, or byte by byte where a zip must lie.
    static func python(_ script: String, _ arguments: [String]) async throws {
        let result = try await Stack.run(
            "/usr/bin/python3", ["-c", script] + arguments, environment: ProcessInfo.processInfo.environment)
        try #require(result.status == 0, "python3: \(result.output)")
    }

    /// The issue's scenario: Jana imports into a device store and syncs it; Petr's token on the same store is
    /// PERMISSION_DENIED (by the gateway before it sends, and by the server for a copy of the store that does
    /// not know its owner), and nothing of Jana's reaches Petr's account; a second token of Jana's still syncs;
    /// `list --local` with Petr's token shows nothing of hers; `login` as Petr warns and picks another store.
    @Test func aDeviceStoreBelongsToTheAccountThatFirstSyncedIt() async throws {
        try await Stack.with(services: ["health"]) { stack in
            let up = try await stack.compose("up")
            try #require(up.status == 0, "compose up failed: \(up.output)")
            let files = stack.directory.appendingPathComponent("files")
            try FileManager.default.createDirectory(at: files, withIntermediateDirectories: true)
            let jana = try #require(
                try object(try await health(stack, ["user", "create", "jana", "--json"]))["token"] as? String)
            let petr = try #require(
                try object(try await health(stack, ["user", "create", "petr", "--json"]))["token"] as? String)

            let export = files.appendingPathComponent("export.xml")
            try Self.export(steps: 2).write(to: export, atomically: true, encoding: .utf8)
            let device = files.appendingPathComponent("dev.sqlite").path,
                copy = files.appendingPathComponent("copy.sqlite").path
            #expect(
                try object(
                    try await health(stack, ["import", export.path, "--json", "--store", device, "--token", jana]))[
                        "added"] as? String == "2")
            // A copy taken before the first sync: the same store id, but no owner recorded in it.
            try FileManager.default.copyItem(atPath: device, toPath: copy)
            #expect(try await sync(stack, token: jana, store: device).addedOnServer == 2)

            // Petr's token: refused by the gateway before it sends (the store records Jana as its owner)…
            let refused = try await health(stack, ["sync", "--store", device, "--token", petr])
            status(refused, 7, "Petr syncing Jana's store", contains: "PERMISSION_DENIED")
            #expect(
                refused.output.contains("belongs to jana") && refused.output.contains("--store PATH"),
                "\(refused.output)")
            // …and by the server, for the copy that does not know its owner: the server bound its id to Jana.
            let byServer = try await health(stack, ["sync", "--store", copy, "--token", petr])
            status(byServer, 7, "Petr syncing a copy of Jana's store", contains: "belongs to jana")
            #expect(try await serverSamples(stack, token: petr) == 0, "nothing of Jana's in Petr's account")
            #expect(try await januarySteps(stack, token: petr) == (0, 0))
            #expect(try await serverSamples(stack, token: jana) == 2)

            // A second token of Jana's: the store is bound to her, not to a token.
            let second = try #require(
                try object(try await health(stack, ["token", "issue", "--json", "--token", jana]))["token"] as? String)
            let again = try await sync(stack, token: second, store: device)
            #expect(again.pushedChanges == 0 && again.pulledChanges == 0, "\(again)")
            #expect(try await sync(stack, token: second, store: copy).addedOnServer == 0, "Jana may sync the copy")

            // Local commands show and change only the owner's data.
            let listed = try await health(
                stack,
                [
                    "list", "stepCount", "--local", "--store", device, "--from", "2026-01-01", "--to", "2026-01-02",
                    "--tz", "UTC", "--token", petr,
                ])
            status(listed, 7, "Petr listing Jana's store", contains: "belongs to jana")
            #expect(!listed.output.contains("Watch"), "\(listed.output)")
            status(
                try await health(stack, ["add", "stepCount", "5", "--local", "--store", device, "--token", petr]), 7,
                "Petr adding to Jana's store")
            status(
                try await health(stack, ["import", export.path, "--store", device, "--token", petr]), 7,
                "Petr importing into Jana's store")
            #expect(try await januarySteps(stack, token: jana, store: device) == (2, 3))
            #expect(try await januarySteps(stack, token: second, store: device) == (2, 3))

            // login: the default store is Jana's once she synced it; logging in as Petr warns and does not reuse it.
            status(try await health(stack, ["login", jana]), 0, "login as jana")
            #expect(try object(try await health(stack, ["import", export.path, "--json"]))["added"] as? String == "2")
            status(try await health(stack, ["sync"]), 0, "jana's default store")
            let petrLogin = try await health(stack, ["login", petr])
            status(petrLogin, 0, "login as petr", contains: "logged in as petr")
            #expect(
                petrLogin.output.contains("warning: the device store") && petrLogin.output.contains("belongs to jana"),
                "\(petrLogin.output)")
            let petrSync = try await health(stack, ["sync", "--json"])
            #expect(
                try summary(petrSync).pushedChanges == 0, "Petr's own store has nothing of Jana's: \(petrSync.output)")
            #expect(try await serverSamples(stack, token: petr) == 0)
            let petrLocal = try await health(
                stack,
                ["list", "stepCount", "--local", "--json", "--from", "2026-01-01", "--to", "2026-01-02", "--tz", "UTC"])
            #expect(try uuids(petrLocal).isEmpty, "\(petrLocal.output)")
            // Back as Jana: the default store (Petr's now) warns again, and she is back on her own.
            let janaAgain = try await health(stack, ["login", jana])
            status(janaAgain, 0, "login as jana again", contains: "belongs to petr")
            let janaLocal = try await health(
                stack,
                ["list", "stepCount", "--local", "--json", "--from", "2026-01-01", "--to", "2026-01-02", "--tz", "UTC"])
            #expect(try uuids(janaLocal).count == 2, "\(janaLocal.output)")
        }
    }

    /// The Health app's export.zip imports directly (export.xml inflated as it is read; the CDA file and
    /// workout routes left alone); a zip that declares more than an entry may hold is refused unread, and one
    /// that inflates past what it declared is refused while being read: nothing is imported either way.
    @Test func exportZipImportsDirectlyAndZipBombsAreRefused() async throws {
        try await Stack.with(services: ["health"]) { stack in
            let up = try await stack.compose("up")
            try #require(up.status == 0, "compose up failed: \(up.output)")
            let files = stack.directory.appendingPathComponent("files")
            try FileManager.default.createDirectory(at: files, withIntermediateDirectories: true)
            let jana = try #require(
                try object(try await health(stack, ["user", "create", "jana", "--json"]))["token"] as? String)
            let store = files.appendingPathComponent("phone.sqlite").path

            let xml = files.appendingPathComponent("export.xml"), zip = files.appendingPathComponent("export.zip")
            try Self.export(steps: 500).write(to: xml, atomically: true, encoding: .utf8)
            try await Self.python(
                """
                import sys, zipfile
                with zipfile.ZipFile(sys.argv[2], "w", zipfile.ZIP_DEFLATED) as z:
                    z.write(sys.argv[1], "apple_health_export/export.xml")
                    z.writestr("apple_health_export/export_cda.xml", "<ClinicalDocument/>")
                    z.writestr("apple_health_export/workout-routes/route_2026-01-01_7.00am.gpx", "<gpx/>")
                """, [xml.path, zip.path])
            let imported = try object(
                try await health(stack, ["import", zip.path, "--json", "--store", store, "--token", jana]))
            #expect(imported["records"] as? String == "501" && imported["added"] as? String == "500", "\(imported)")
            #expect((imported["skippedElements"] as? [String: String])?["Workout"] == "1", "\(imported)")
            #expect(try await januarySteps(stack, token: jana, store: store) == (500, Self.stepSum(500)))
            let twice = try await health(stack, ["import", zip.path, "--store", store, "--token", jana])
            #expect(twice.status == 0 && twice.output.contains("added 0, 500 already stored"), "\(twice.output)")

            // Hand-made zips: one deflated entry whose directory declares `size` (zip64 when it must).
            let liar = """
                import struct, sys, zlib
                path, declared, real = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
                data = b"<HealthData>" + b" " * real + b"</HealthData>"
                c = zlib.compressobj(9, zlib.DEFLATED, -15); packed = c.compress(data) + c.flush()
                name = b"apple_health_export/export.xml"; crc = zlib.crc32(data)
                local = struct.pack("<IHHHHHIIIHH", 0x04034b50, 20, 0, 8, 0, 0, crc, len(packed), min(declared, 0xFFFFFFFF), len(name), 0) + name
                big = declared >= 0xFFFFFFFF
                extra = struct.pack("<HHQ", 1, 8, declared) if big else b""
                central = struct.pack("<IHHHHHHIIIHHHHHII", 0x02014b50, 45, 45, 0, 8, 0, 0, crc, len(packed),
                    0xFFFFFFFF if big else declared, len(name), len(extra), 0, 0, 0, 0, 0) + name + extra
                offset = len(local) + len(packed)
                end = struct.pack("<IHHHHIIH", 0x06054b50, 0, 0, 1, 1, len(central), offset, 0)
                open(path, "wb").write(local + packed + central + end)
                """
            let bomb = files.appendingPathComponent("bomb.zip")
            try await Self.python(liar, [bomb.path, String(100 << 30), "1000"])
            let refused = try await health(stack, ["import", bomb.path, "--store", store, "--token", jana])
            status(refused, 8, "a zip declaring 100 GiB", contains: "100.0 GiB")
            #expect(refused.output.contains("before inflating"), "\(refused.output)")
            let lying = files.appendingPathComponent("lying.zip")
            try await Self.python(liar, [lying.path, "1000", String(20 << 20)])
            status(
                try await health(stack, ["import", lying.path, "--store", store, "--token", jana]), 3,
                "a zip inflating past its declared size",
                contains: "inflates past the 1000 bytes")
            let notExport = files.appendingPathComponent("photos.zip")
            try await Self.python(
                "import sys, zipfile\nzipfile.ZipFile(sys.argv[1], 'w').writestr('IMG_0001.txt', 'x')", [notExport.path]
            )
            status(
                try await health(stack, ["import", notExport.path, "--store", store, "--token", jana]), 3,
                "a zip without export.xml",
                contains: "no export.xml")
            #expect(
                try await januarySteps(stack, token: jana, store: store) == (500, Self.stepSum(500)),
                "nothing more imported")
        }
    }

    /// Samples dated far in the future are refused like negative values (by the server, the device's store and
    /// an import); errors name dates as ISO 8601, not epoch milliseconds.
    @Test func futureSamplesAreRefusedAndErrorsShowDates() async throws {
        try await Stack.with(services: ["health"]) { stack in
            let up = try await stack.compose("up")
            try #require(up.status == 0, "compose up failed: \(up.output)")
            let files = stack.directory.appendingPathComponent("files")
            try FileManager.default.createDirectory(at: files, withIntermediateDirectories: true)
            let jana = try #require(
                try object(try await health(stack, ["user", "create", "jana", "--json"]))["token"] as? String)
            let store = files.appendingPathComponent("phone.sqlite").path
            status(
                try await health(
                    stack, ["add", "stepCount", "10", "--start", "2199-01-01", "--tz", "UTC", "--token", jana]), 3,
                "a sample in 2199", contains: "2199-01-01T00:00:00Z, in the future")
            status(
                try await health(
                    stack,
                    [
                        "add", "stepCount", "10", "--start", "2199-01-01", "--tz", "UTC", "--local", "--store", store,
                        "--token", jana,
                    ]), 3,
                "a sample in 2199 on the device", contains: "in the future")
            #expect(try await serverSamples(stack, token: jana) == 0)
            let backwards = try await health(
                stack,
                [
                    "add", "stepCount", "10", "--start", "2026-05-02", "--end", "2026-05-01", "--tz", "UTC", "--token",
                    jana,
                ])
            status(
                backwards, 3, "an end before the start",
                contains: "end 2026-05-01T00:00:00Z is before start 2026-05-02T00:00:00Z")
            status(
                try await health(
                    stack,
                    [
                        "stats", "stepCount", "--from", "2026-05-02", "--to", "2026-05-01", "--tz", "UTC", "--token",
                        jana,
                    ]), 3,
                "a range ending before it starts",
                contains: "ends (2026-05-01T00:00:00Z) before it starts (2026-05-02T00:00:00Z)")
            status(
                try await health(
                    stack,
                    ["list", "stepCount", "--from", "2026-05-02", "--to", "2026-05-01", "--tz", "UTC", "--token", jana]),
                3,
                "a query ending before it starts", contains: "ends (2026-05-01T00:00:00Z) before it starts")

            let export = files.appendingPathComponent("future.xml")
            try Self.export(steps: 3)
                .replacingOccurrences(
                    of: "</HealthData>",
                    with:
                        #" <Record type="HKQuantityTypeIdentifierStepCount" sourceName="Watch" unit="count" startDate="2199-01-01 00:00:00 +0000" endDate="2199-01-01 00:01:00 +0000" value="5"/>"#
                        + "\n</HealthData>"
                )
                .write(to: export, atomically: true, encoding: .utf8)
            let imported = try object(
                try await health(stack, ["import", export.path, "--json", "--store", store, "--token", jana]))
            #expect(imported["added"] as? String == "3" && imported["rejected"] as? String == "1", "\(imported)")
            #expect((imported["rejections"] as? [String])?.first?.contains("in the future") == true, "\(imported)")
        }
    }
}
