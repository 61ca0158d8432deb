import ArgumentParser
import Foundation
import GatewayKit
import HealthAPI
import HealthBridge
import HealthCore
import RPC
import Schema

/// `gateway health user create NAME`.
struct HealthUser: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "user", abstract: "Manage users.", subcommands: [Create.self])

    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "create", abstract: "Create a user and print its token (shown once; only its hash is kept).")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The user's name.") var name: String

        func run() async throws {
            try await global.withHealth { health in
                let reply = try await health.createUser(.init(name: name), options: global.callOptions)
                try global.render(reply, text: { print(reply.token) })
            }
        }
    }
}

/// `gateway health token issue|revoke`: a further token for another device, and revoking one.
struct HealthToken: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "token", abstract: "Issue or revoke tokens of the user the token belongs to.",
        subcommands: [Issue.self, Revoke.self])

    struct Issue: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "issue", abstract: "Print a further token (for another device).")
        @OptionGroup var global: GlobalOptions
        @OptionGroup var health: HealthOptions

        func run() async throws {
            try await global.withHealth { client in
                let reply = try await client.issueToken(.init(), options: try health.callOptions(global))
                try global.render(reply, text: { print(reply.token) })
            }
        }
    }

    struct Revoke: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "revoke", abstract: "Revoke a token of the same user (default: the one the call carries).",
            discussion: "--json prints the empty RevokeTokenResponse: {}.")
        @OptionGroup var global: GlobalOptions
        @OptionGroup var health: HealthOptions
        @Argument(help: "The token to revoke.") var revoked: String?

        func run() async throws {
            try await global.withHealth { client in
                let reply = try await client.revokeToken(
                    .init(token: revoked ?? ""), options: try health.callOptions(global))
                try global.render(reply, text: { print("revoked") })
            }
        }
    }
}

/// `gateway health account`: whose token it is, the change-log anchor and the sample count on the server.
struct HealthAccount: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "account", abstract: "Show the token's user, anchor and sample count.")
    @OptionGroup var global: GlobalOptions
    @OptionGroup var health: HealthOptions

    func run() async throws {
        try await global.withHealth { client in
            let account = try await client.getAccount(.init(), options: try health.callOptions(global))
            try global.render(
                account,
                text: { print("\(account.name): \(account.sampleCount) samples, anchor \(account.anchor)") })
        }
    }
}

/// `gateway health login TOKEN`: checks the token and remembers it for later commands.
struct HealthLogin: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "login", abstract: "Check a token and remember it.",
        discussion: "--json prints the token's GetAccountResponse.")
    @OptionGroup var global: GlobalOptions
    @Argument(help: "The token `user create` printed.") var token: String

    /// An empty token (a variable that was not set) is a usage error, as `--token ""` is.
    func validate() throws {
        if token.isEmpty { throw ValidationError("the token is empty: give the token `user create` printed") }
    }

    func run() async throws {
        try await global.withHealth { health in
            var options = global.callOptions
            options.metadata["authorization"] = "Bearer \(token)"
            let account = try await health.getAccount(.init(), options: options)
            let file = HealthOptions.tokenFile
            try Self.save(token: token, to: file)
            try chooseStore(for: StoreOwner(id: account.userID, name: account.name))
            try global.render(account, text: { print("logged in as \(account.name)") })
        }
    }

    /// Writes the token readable by its owner only; a token that cannot be saved is an error (exit 73), not
    /// a login that seems to work until the next command asks for a token again.
    static func save(token: String, to file: URL) throws {
        do {
            try FileManager.default.createDirectory(
                at: file.deletingLastPathComponent(), withIntermediateDirectories: true)
        } catch {
            throw FileError(
                .notWritable, path: file.deletingLastPathComponent().path, reason: error.localizedDescription,
                role: "the login's folder")
        }
        let descriptor = open(file.path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            throw FileError(
                .notWritable, path: file.path, reason: String(cString: strerror(errno)), role: "the login token file")
        }
        defer { close(descriptor) }
        let bytes = Array((token + "\n").utf8)
        let written = bytes.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
        guard written == bytes.count, fchmod(descriptor, 0o600) == 0 else {
            throw FileError(
                .notWritable, path: file.path, reason: String(cString: strerror(errno)), role: "the login token file")
        }
    }

    /// Makes the default device store one `account` may use: the current default when it is unowned or
    /// `account`'s; otherwise (a warning on standard error) the first of `device.sqlite` and
    /// `device-NAME.sqlite` that is `account`'s, else an unowned one, else a new `device-NAME-ID.sqlite`.
    /// A store is never shared between accounts: what one person recorded never syncs into another's account.
    func chooseStore(for account: StoreOwner) throws {
        func owner(_ path: String) throws -> StoreOwner? {
            FileManager.default.fileExists(atPath: path) ? try DeviceStore(path: path).owner() : nil
        }
        let current = HealthOptions.defaultStorePath
        let currentOwner = try owner(current)
        if let currentOwner, currentOwner.isSameUser(as: account) { return }
        let safe = String(
            account.name.unicodeScalars.map {
                CharacterSet.alphanumerics.contains($0) && $0.isASCII ? Character($0) : "_"
            })
        let directory = HealthOptions.dataDirectory.path
        let candidates = [
            HealthOptions.firstStorePath, "\(directory)/device-\(safe).sqlite",
            "\(directory)/device-\(safe)-\(account.id).sqlite",
        ]
        let owners = try candidates.map { (path: $0, owner: try owner($0)) }
        let chosen =
            owners.first { $0.owner?.isSameUser(as: account) == true }?.path
            ?? (currentOwner == nil ? current : nil)
            ?? owners.first { $0.owner == nil }?.path ?? candidates[2]
        if let currentOwner {
            FileHandle.standardError.write(
                Data(
                    "warning: the device store \(current) belongs to \(currentOwner.name), not \(account.name); \(account.name)'s samples go to \(chosen) (--store PATH for another)\n"
                        .utf8))
        }
        if chosen == HealthOptions.firstStorePath {
            try? FileManager.default.removeItem(at: HealthOptions.storeChoiceFile)
        } else {
            try Data((chosen + "\n").utf8).write(to: HealthOptions.storeChoiceFile)
        }
    }
}

/// `gateway health add TYPE VALUE --start T --end T`.
struct HealthAdd: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "add", abstract: "Add a sample.",
        discussion:
            "--json prints the AddSamplesResponse: {\"summary\": {\"added\", \"duplicates\", …}}, with --local as the device's store answers it."
    )
    @OptionGroup var global: GlobalOptions
    @OptionGroup var health: HealthOptions
    @Argument(help: "stepCount, dietaryWater, heartRate, sleepAnalysis, …") var type: String
    @Argument(help: "The value (for sleepAnalysis: inBed, asleepCore, …).") var value: String
    @Option(help: "The value's unit (default: the type's).") var unit: String?
    @Option(help: "Start time (default: now).") var start: String = "now"
    @Option(help: "End time (default: the start).") var end: String?
    @Option(help: "The recording device or app.") var source = "gateway"
    @Flag(help: "Work on the device's store instead of the server.") var local = false

    func run() async throws { try await reportingFailures(json: global.json) { try await asStatus(body) } }

    func body() async throws {
        let startMs = try health.instant(start), endMs = try end.map(health.instant) ?? startMs
        let number = Double(value) ?? SleepValue(name: value).map { Double($0.rawValue) }
        guard let number else {
            throw InvalidValue("\"\(value)\" is neither a number nor a sleep value (inBed, asleepCore, …)")
        }
        let message = HealthV1.Sample(
            uuid: UUID().uuidString, type: type, value: number, unit: unit ?? "", startMs: startMs, endMs: endMs,
            source: source,
            timeZone: try health.timeZone().identifier)
        // The sample is checked here as the service would check it (a negative step count, an unknown type), before
        // anything connects: a bad value on the command line.
        do { try HealthProto.sample(message, index: 0).validate() } catch { throw InvalidValue(error.message) }
        if local {
            try await locally(json: global.json) {
                let result = try await health.openOwnedStore(global).add([try HealthProto.sample(message, index: 0)])
                try show(HealthV1.AddSamplesResponse(summary: try HealthProto.summary(result)), of: message)
            }
        } else {
            try await global.withHealth { client in
                let reply = try await client.addSamples(
                    .init(samples: [message]), options: try health.callOptions(global))
                try show(reply, of: message)
            }
        }
    }

    func show(_ reply: HealthV1.AddSamplesResponse, of message: HealthV1.Sample) throws {
        try global.render(
            reply,
            text: { print("\(message.uuid.lowercased()): " + HealthFormat.summaryLine(reply.summary ?? .init())) })
    }
}

/// `gateway health list TYPE [--from T --to T]`: a page of samples, newest first, and how to get the next.
struct HealthList: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "list", abstract: "List samples of a type, a page at a time, newest first.",
        discussion: """
            When more samples match than the page holds, standard error says so with the --after cursor of the next \
            page; --json prints the QuerySamplesResponse with it as "next" (absent on the last page).
            """)
    @OptionGroup var global: GlobalOptions
    @OptionGroup var health: HealthOptions
    @Argument(help: "The sample type, e.g. stepCount.") var type: String
    @Option(help: "Samples ending after this time (default: the first).") var from: String?
    @Option(help: "Samples starting before this time (default: the last).") var to: String?
    @Option(help: "The unit to show values in (default: the type's).") var unit: String?
    @Option(help: "At most this many (1–10000).") var limit: UInt32 = 1000
    @Option(help: "Continue after a previous page: the cursor it printed (default: the first page).") var after: String?
    @Flag(help: "Oldest first instead of newest first.") var oldestFirst = false
    @Flag(help: "Work on the device's store instead of the server.") var local = false

    func run() async throws { try await reportingFailures(json: global.json) { try await asStatus(body) } }

    func body() async throws {
        let request = HealthV1.QuerySamplesRequest(
            types: [type], fromMs: try from.map(health.instant), toMs: try to.map(health.instant), limit: limit,
            descending: !oldestFirst, unit: unit ?? "", after: after ?? "")
        var reply = HealthV1.QuerySamplesResponse()
        if local {
            try await locally(json: global.json) {
                let query = SampleQuery(
                    types: try HealthProto.types(request.types), from: request.fromMs, to: request.toMs,
                    limit: Int(limit),
                    ascending: oldestFirst,
                    after: try after.map { text throws(HealthError) in try SampleCursor(text: text) })
                let target = try HealthProto.unit(request.unit)
                let page = try await health.openOwnedStore(global).page(query)
                reply.samples = try page.samples.map { try HealthProto.message($0, unit: target) }
                reply.next = page.next?.text ?? ""
            }
        } else {
            try await global.withHealth { client in
                reply = try await client.querySamples(request, options: try health.callOptions(global))
            }
        }
        try global.render(
            reply,
            text: {
                printTable(
                    ["UUID", "TYPE", "VALUE", "UNIT", "START", "END", "SOURCE"],
                    reply.samples.map(HealthFormat.sampleRow))
                // A note, not a result: standard error, so the table stays the output.
                if !reply.next.isEmpty {
                    writeStandardError("more samples match: the next page with --after \(reply.next)\n")
                }
            })
    }
}

/// `gateway health show UUID`: one sample; another user's UUID is NOT_FOUND, as one that never existed.
struct HealthShow: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "show", abstract: "Show one sample by its UUID.")
    @OptionGroup var global: GlobalOptions
    @OptionGroup var health: HealthOptions
    @Argument(help: "The sample's UUID.") var uuid: String
    @Option(help: "The unit to show the value in (default: the type's).") var unit: String?
    @Flag(help: "Work on the device's store instead of the server.") var local = false

    func run() async throws { try await reportingFailures(json: global.json) { try await asStatus(body) } }

    func body() async throws {
        var reply = HealthV1.GetSampleResponse()
        if local {
            try await locally(json: global.json) {
                let target = try HealthProto.unit(unit ?? "")
                reply.sample = try HealthProto.message(
                    try await health.openOwnedStore(global).sample(try HealthProto.uuid(uuid, "uuid")), unit: target)
            }
        } else {
            try await global.withHealth { client in
                reply = try await client.getSample(
                    .init(uuid: uuid, unit: unit ?? ""), options: try health.callOptions(global))
            }
        }
        try global.render(
            reply,
            text: {
                printTable(
                    ["UUID", "TYPE", "VALUE", "UNIT", "START", "END", "SOURCE"],
                    [HealthFormat.sampleRow(reply.sample ?? .init())])
            })
    }
}

/// `gateway health stats TYPE --period day …`.
struct HealthStats: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "stats",
        abstract: "Sum (cumulative types), average/min/max (discrete) or merged time asleep (sleep), by period.",
        discussion: """
            A sample spanning a bucket boundary is split in proportion to its time in each bucket. The first and last \
            buckets are cut to the range: only what lies between --from and --to counts. --json prints the \
            GetStatisticsResponse: {"type", "unit", "buckets": [{"startMs", "endMs", "sum" or "average", "minimum", \
            "maximum", "count"}]}, times as epoch milliseconds (strings, as the JSON mapping spells 64-bit integers).
            """)
    @OptionGroup var global: GlobalOptions
    @OptionGroup var health: HealthOptions
    @Argument(help: "The sample type, e.g. stepCount.") var type: String
    @Option(help: "One bucket per period (default: one figure over the whole range).") var period: StatisticsInterval?
    @Option(
        help: "The range's start; alone, the range runs until now (default: the last 7 days, as --preset last7Days).")
    var from: String?
    @Option(help: "The range's end; needs --from (default: now with --from, else the last 7 days).") var to: String?
    @Option(help: "A named range; not with --from/--to (default: last7Days).") var preset: StatisticsPreset?
    @Option(help: "The unit of the answer (default: the type's).") var unit: String?
    @Option(
        help:
            "Source priority for de-duplicating overlapping sources (repeatable, first wins; default: every source counted)."
    ) var prefer: [String] = []
    @Flag(help: "Work on the device's store instead of the server.") var local = false

    /// A range the options cannot name is a usage error rather than another range answered in its place: `--to`
    /// alone has no start (HealthKit's statistics need one), and a preset is a whole range of its own. `--from`
    /// alone is clear: from then until now.
    func validate() throws {
        if preset != nil, from != nil || to != nil {
            throw ValidationError("--preset is a whole range: give it or --from (and --to), not both")
        }
        if to != nil, from == nil {
            throw ValidationError("--to needs --from: the range's start (--from alone runs until now)")
        }
    }

    func run() async throws { try await reportingFailures(json: global.json) { try await asStatus(body) } }

    func body() async throws {
        let zone = try health.timeZone()
        let interval = period, presetValue = preset
        var range: (Int64, Int64)
        if let presetValue {
            range = presetValue.range(now: try health.instant("now"), timeZone: zone)
        } else if let from {
            range = (try health.instant(from), try health.instant(to ?? "now"))
        } else {
            range = StatisticsPreset.last7Days.range(now: try health.instant("now"), timeZone: zone)
        }
        var reply = HealthV1.GetStatisticsResponse()
        if local {
            try await locally(json: global.json) {
                let result = try await health.openOwnedStore(global).statistics(
                    StatisticsRequest(
                        type: try HealthType.parse(type), from: range.0, to: range.1, interval: interval,
                        timeZone: zone,
                        unit: try HealthProto.unit(unit ?? ""), sourcePriority: prefer.isEmpty ? nil : prefer))
                reply = HealthV1.GetStatisticsResponse(
                    type: result.type.rawValue, unit: result.unit.symbol,
                    buckets: result.buckets.map {
                        HealthV1.StatisticsBucket(
                            startMs: $0.start, endMs: $0.end, sum: $0.sum, average: $0.average,
                            minimum: $0.minimum, maximum: $0.maximum, count: Int64($0.count))
                    })
            }
        } else {
            let wire: HealthV1.StatisticsInterval =
                switch interval {
                case .hour: .hour
                case .day: .day
                case .week: .week
                case .month: .month
                case nil: .none
                }
            try await global.withHealth { client in
                reply = try await client.getStatistics(
                    .init(
                        type: type, fromMs: range.0, toMs: range.1, interval: wire, timeZone: zone.identifier,
                        unit: unit ?? "",
                        sourcePriority: prefer), options: try health.callOptions(global))
            }
        }
        let offset = { (ms: Int64) in HealthFormat.time(ms, zone: zone.identifier) }
        try global.render(
            reply,
            text: {
                printTable(
                    [
                        "START", "END", reply.buckets.first?.sum != nil ? "SUM (\(reply.unit))" : "AVG (\(reply.unit))",
                        "MIN", "MAX", "SAMPLES",
                    ],
                    reply.buckets.map {
                        [
                            offset($0.startMs), offset($0.endMs),
                            ($0.sum ?? $0.average).map(HealthFormat.number) ?? "-",
                            $0.minimum.map(HealthFormat.number) ?? "", $0.maximum.map(HealthFormat.number) ?? "",
                            String($0.count),
                        ]
                    })
            })
    }
}

/// `gateway health delete UUID…`.
struct HealthDelete: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "delete", abstract: "Delete samples (a tombstone travels with sync).",
        discussion:
            "--json prints the DeleteSamplesResponse: {\"summary\": {\"deleted\", \"alreadyDeleted\", …}}, with --local as the device's store answers it."
    )
    @OptionGroup var global: GlobalOptions
    @OptionGroup var health: HealthOptions
    @Argument(help: "UUIDs of the samples.") var uuids: [String]
    @Flag(help: "Work on the device's store instead of the server.") var local = false

    func run() async throws {
        if local {
            try await locally(json: global.json) {
                let result = try await health.openOwnedStore(global).delete(
                    try uuids.map { try HealthProto.uuid($0, "uuid") })
                try show(HealthV1.DeleteSamplesResponse(summary: try HealthProto.summary(result)))
            }
        } else {
            try await global.withHealth { client in
                let reply = try await client.deleteSamples(.init(uuids: uuids), options: try health.callOptions(global))
                try show(reply)
            }
        }
    }

    func show(_ reply: HealthV1.DeleteSamplesResponse) throws {
        try global.render(reply, text: { print(HealthFormat.summaryLine(reply.summary ?? .init())) })
    }
}

/// `gateway health sync`: push the device's changes, pull the server's.
struct HealthSyncCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sync",
        abstract: "Two-way incremental sync of the device's store with the server; run again, it changes nothing.",
        discussion: """
            --json prints a JSON array of two WriteSummary objects: what the server made of the changes pushed, then \
            what the device's store made of the changes pulled ({"added", "duplicates", "alreadyDeleted", "deleted", \
            "duplicateDeletions", "conflicts", "anchor", "conflictsOmitted"}).
            """)
    @OptionGroup var global: GlobalOptions
    @OptionGroup var health: HealthOptions
    @Option(help: "Only these types (repeatable; default: every type).") var type: [String] = []
    @Option(help: "Only samples ending after this time (default: no limit).") var from: String?
    @Option(help: "Only samples starting before this time (default: no limit).") var to: String?

    func run() async throws { try await reportingFailures(json: global.json) { try await asStatus(body) } }

    func body() async throws {
        let store = try health.openStore()
        let token = try health.resolvedToken()
        let filter = try HealthProto.filter(
            types: type, from: try from.map(health.instant), to: try to.map(health.instant))
        try await global.withHealth { client in
            // Whose token it is, so a store that belongs to another user is refused before anything is sent (the
            // server refuses it too) and a store's first sync records its owner.
            var options = global.callOptions
            options.metadata["authorization"] = "Bearer \(token)"
            let reply = try await client.getAccount(.init(), options: options)
            let account = StoreOwner(id: reply.userID, name: reply.name)
            if let owner = try store.owner(), !owner.isSameUser(as: account) {
                throw HealthOptions.notYourStore(health.storePath, owner: owner, account: account)
            }
            // No progress lines with --json: they would go to standard output before the JSON and break it.
            let progress = SharedProgress(display: global.json ? nil : ProgressDisplay())
            let sync = HealthSync(
                device: store,
                remote: RPCHealthRemote(client: client, token: token, timeout: .seconds(max(global.timeout, 60))),
                account: account, token: token)
            // With --json nothing watches, so the sync does not ask the server's anchor for the fraction either.
            let show: @Sendable (SyncProgress) -> Void = { state in
                progress.update(
                    fraction: state.fraction ?? 0,
                    state.phase == .push
                        ? "pushing: \(state.pushed) sent" : "pulling: \(state.pulled) received (\(state.pushed) sent)")
            }
            let report = try await sync.run(filter: filter, progress: global.json ? nil : show)
            progress.finish()
            let summaries = [try HealthProto.summary(report.pushed), try HealthProto.summary(report.pulled)]
            try global.render(
                jsonValue: { .array(summaries.map(\.outputJSON)) },
                text: { for line in report.lines { print(line) } })
        }
    }
}

/// `gateway health import export.xml`: an Apple Health export into the device's store.
struct HealthImport: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "import",
        abstract:
            "Import the Health app's export.zip (or its export.xml) into the device's store (the next sync sends it).",
        discussion: """
            The import runs on this device, so --json prints its report rather than a response, spelled as the JSON \
            mapping would: {"records", "added", "duplicates", "rejected", "rejections": ["line N: reason"], \
            "skippedTypes": {TYPE: count}, "skippedElements": {NAME: count}, "correlations"}, counts as strings.
            """)
    @OptionGroup var global: GlobalOptions
    @OptionGroup var health: HealthOptions
    @Argument(help: "The export: export.xml.", completion: .file(extensions: ["xml", "zip"])) var path: String

    func run() async throws {
        try InputFile.check(path)
        try await locally(json: global.json) {
            let store = try await health.openOwnedStore(global)
            let progress = global.json ? nil : ProgressDisplay()
            // Reported per 1 MiB chunk; shown when the percentage moves (a pipe gets at most 101 lines).
            var shown = -1
            let report = try HealthExportImporter(store: store.store, user: store.user).importFile(atPath: path) {
                read, total in
                let fraction = total > 0 ? Double(read) / Double(total) : 0
                guard Int(fraction * 100) != shown else { return }
                shown = Int(fraction * 100)
                progress?.update(fraction: fraction, message: "\(read / 1_000_000) of \(total / 1_000_000) MB read")
            }
            progress?.finish()
            try global.render(
                jsonValue: { Self.json(report) },
                text: {
                    print(
                        "\(report.records) records: added \(report.added), \(report.duplicates) already stored, \(report.rejected) rejected"
                    )
                    for (type, count) in report.skippedTypes.sorted(by: { $0.key < $1.key }) {
                        print("skipped \(count) \(type)")
                    }
                    for (name, count) in report.skippedElements.sorted(by: { $0.key < $1.key }) {
                        print("skipped \(count) \(name)")
                    }
                    // Per-record errors are diagnostics: standard error, beside the progress.
                    for rejection in report.rejections { writeStandardError("rejected \(rejection)\n") }
                })
        }
    }
}

extension HealthImport {
    /// The import's report in the gateway's JSON spelling: lowerCamelCase names, counts as strings (as the JSON
    /// mapping spells 64-bit integers), maps as objects with sorted keys.
    static func json(_ report: ImportReport) -> JSONValue {
        func count(_ value: Int) -> JSONValue { .string(String(value)) }
        func counts(_ map: [String: Int]) -> JSONValue {
            .object(map.sorted { $0.key < $1.key }.map { JSONMember($0.key, count($0.value)) })
        }
        return .object([
            JSONMember("records", count(report.records)), JSONMember("added", count(report.added)),
            JSONMember("duplicates", count(report.duplicates)), JSONMember("rejected", count(report.rejected)),
            JSONMember("rejections", .array(report.rejections.map(JSONValue.string))),
            JSONMember("skippedTypes", counts(report.skippedTypes)),
            JSONMember("skippedElements", counts(report.skippedElements)),
            JSONMember("correlations", count(report.correlations)),
        ])
    }
}

/// `gateway health export TYPE`: CSV on standard output.
struct HealthExport: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "export", abstract: "Write a type's samples as CSV.")
    @OptionGroup var global: GlobalOptions
    @OptionGroup var health: HealthOptions
    @Argument(help: "The sample type, e.g. stepCount.") var type: String
    @Option(help: "The unit of the values (default: the type's).") var unit: String?
    @Flag(help: "Work on the device's store instead of the server.") var local = false

    func run() async throws {
        if local {
            try await locally(json: global.json) {
                try await health.openOwnedStore(global).store.exportCSV(
                    type: try HealthType.parse(type), user: 1, unit: try HealthProto.unit(unit ?? "")
                ) {
                    FileHandle.standardOutput.write(Data($0.utf8))
                }
            }
        } else {
            try await global.withHealth { client in
                for try await chunk in client.exportCSV(
                    .init(type: type, unit: unit ?? ""), options: try health.callOptions(global))
                {
                    FileHandle.standardOutput.write(Data(chunk.text.utf8))
                }
            }
        }
    }
}

/// The progress display, for the sync's `@Sendable` progress callback (called from one task at a time);
/// none (with `--json`) shows nothing.
final class SharedProgress: @unchecked Sendable {
    private let lock = NSLock()
    private let display: ProgressDisplay?

    init(display: ProgressDisplay?) { self.display = display }

    func update(fraction: Double, _ message: String) {
        lock.withLock { display?.update(fraction: fraction, message: message) }
    }
    func finish() { lock.withLock { display?.finish() } }
}
