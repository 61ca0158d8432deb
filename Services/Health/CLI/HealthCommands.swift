import ArgumentParser
import Foundation
import GatewayKit
import HealthAPI
import HealthBridge
import HealthCore
import RPC
import Schema

/// `gateway health …`: a user's health samples, on the server or in this device's own store, and the sync
/// between them. Everything it shares with other groups (options, endpoints, output, exit codes) is GatewayKit's.
public struct HealthCommands: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "health",
        abstract: "Health samples, statistics, and two-way sync between this device's store and the server.",
        discussion: """
            The token comes from --token, $MENAGERIE_HEALTH_TOKEN, or what `gateway health login` remembered. \
            add, list, stats, delete and export work on the server, or offline on the device's store with --local \
            (--store PATH, default $XDG_DATA_HOME/menagerie/health/device.sqlite); import loads the Health app's \
            export.zip (or its export.xml) into the device's store and sync sends it on. A device store belongs to \
            the account that first synced it: another user's token is PERMISSION_DENIED on it. Times: 2026-05-01T09:00:00+02:00, ...Z, or \
            2026-05-01 / 2026-05-01T09:00 in --tz; a local time the clocks skip is moved later by the gap, one they \
            show twice is the first (as java.time resolves them), each with a warning on standard error.
            """,
        subcommands: [
            HealthUser.self, HealthToken.self, HealthAccount.self, HealthLogin.self, HealthAdd.self, HealthList.self,
            HealthShow.self, HealthStats.self, HealthDelete.self,
            HealthSyncCommand.self, HealthImport.self, HealthExport.self,
        ])

    public init() {}
}

// `--period` and `--preset` take the domain's own names, so completion and errors list them.
extension StatisticsInterval: ExpressibleByArgument {}
extension StatisticsPreset: ExpressibleByArgument {}

/// Options of every health command that talks to the server or the device's store.
struct HealthOptions: ParsableArguments {
    @Option(help: "The user's token (default: $MENAGERIE_HEALTH_TOKEN, else the one `gateway health login` saved).")
    var token: String?

    @Option(
        help: "The device's local store (default: $XDG_DATA_HOME/menagerie/health/device.sqlite).",
        completion: .file(extensions: ["sqlite"]))
    var store: String?

    @Option(help: "IANA time zone for dates without an offset and for statistics (default: this machine's).")
    var tz: String?

    static var dataDirectory: URL {
        let environment = ProcessInfo.processInfo.environment
        let base =
            environment["XDG_DATA_HOME"].map { URL(fileURLWithPath: $0) }
            ?? FileManager.default.homeDirectoryForCurrentUser.appendingPathComponent(".local/share")
        return base.appendingPathComponent("menagerie/health")
    }

    static var tokenFile: URL { dataDirectory.appendingPathComponent("token") }

    /// An empty `--token ""` is a mistake (a variable that was not set), never a reason to use another token: it fell
    /// back to `$MENAGERIE_HEALTH_TOKEN` or the saved login, so a call went out as whoever logged in last.
    func validate() throws {
        if let token, token.isEmpty {
            throw ValidationError(
                "--token is empty: give the token, or leave --token out for $MENAGERIE_HEALTH_TOKEN or the saved login")
        }
    }

    /// Where health's commands take their token from, for an UNAUTHENTICATED answer: not the gateway's MENAGERIE_TOKEN.
    static let tokenHint =
        "health's commands send --token, else $MENAGERIE_HEALTH_TOKEN, else the token `gateway health login` saved"

    func resolvedToken() throws -> String {
        if let token, !token.isEmpty { return token }
        if let token = ProcessInfo.processInfo.environment["MENAGERIE_HEALTH_TOKEN"], !token.isEmpty { return token }
        if let saved = try? String(contentsOf: Self.tokenFile, encoding: .utf8).trimmingCharacters(
            in: .whitespacesAndNewlines),
            !saved.isEmpty
        {
            return saved
        }
        throw RPCError(
            .unauthenticated, "no token: pass --token, set MENAGERIE_HEALTH_TOKEN, or run `gateway health login TOKEN`")
    }

    func timeZone() throws -> TimeZone {
        guard let tz else { return TimeZone.current }
        guard let zone = TimeZone(identifier: tz) else {
            throw RPCError(.invalidArgument, "unknown time zone \"\(tz)\"")
        }
        return zone
    }

    /// The first device store: the default until a login as another user than its owner chooses another.
    static var firstStorePath: String { dataDirectory.appendingPathComponent("device.sqlite").path }

    /// Where `login` remembers the default store it chose (absent: `firstStorePath`).
    static var storeChoiceFile: URL { dataDirectory.appendingPathComponent("store") }

    /// The store without --store: the one `login` chose for its user, else the first.
    static var defaultStorePath: String {
        if let chosen = try? String(contentsOf: storeChoiceFile, encoding: .utf8).trimmingCharacters(
            in: .whitespacesAndNewlines),
            !chosen.isEmpty
        {
            return chosen
        }
        return firstStorePath
    }

    var storePath: String { store ?? Self.defaultStorePath }

    /// Opens (creating) the device store, whoever it belongs to: for `sync`, which checks its owner itself.
    func openStore() throws -> DeviceStore {
        let path = storePath
        try FileManager.default.createDirectory(
            at: URL(fileURLWithPath: path).deletingLastPathComponent(), withIntermediateDirectories: true)
        return try DeviceStore(path: path)
    }

    /// Opens the device store for a local command, which shows and changes only its owner's data: with a token
    /// the store has not seen (not one that synced it), the server is asked whose it is, and another user's is
    /// PERMISSION_DENIED. A store never synced has no owner yet; without any token nothing is checked (the
    /// device's own holder, offline).
    func openOwnedStore(_ global: GlobalOptions) async throws -> DeviceStore {
        let device = try openStore()
        guard let owner = try device.owner(), let token = try? resolvedToken(), !(try device.isOwnerToken(token)) else {
            return device
        }
        let account = try await Self.account(global, token: token)
        guard owner.isSameUser(as: account) else { throw Self.notYourStore(storePath, owner: owner, account: account) }
        try device.claim(for: account, token: token)
        return device
    }

    /// The account `token` belongs to, as the server says.
    static func account(_ global: GlobalOptions, token: String) async throws -> StoreOwner {
        var account = HealthV1.GetAccountResponse()
        try await global.withHealth { client in
            var options = global.callOptions
            options.metadata["authorization"] = "Bearer \(token)"
            account = try await client.getAccount(.init(), options: options)
        }
        return StoreOwner(id: account.userID, name: account.name)
    }

    static func notYourStore(_ path: String, owner: StoreOwner, account: StoreOwner) -> RPCError {
        RPCError(
            .permissionDenied,
            "the device store \(path) belongs to \(owner.name); \(account.name)'s token cannot use it. "
                + "Start another store for \(account.name) with --store PATH (or `gateway health login` as \(account.name))"
        )
    }

    func callOptions(_ global: GlobalOptions) throws -> CallOptions {
        var options = global.callOptions
        options.metadata["authorization"] = "Bearer \(try resolvedToken())"
        return options
    }

    /// An instant from the command line: ISO 8601 with an offset, or a local date (time) in --tz. A local time
    /// the clocks skip or show twice is resolved as java.time does, with a warning on standard error saying how.
    func instant(_ text: String) throws -> Int64 {
        if text == "now" { return Int64((Date().timeIntervalSince1970 * 1000).rounded()) }
        if let (instant, _) = Timestamps.parse(text) { return instant }
        var local = text
        if local.count == 10 { local += "T00:00:00" } else if local.count == 16 { local += ":00" }
        if let (wall, _) = Timestamps.parse(local + "Z") {
            let resolution = LocalTime.resolve(wall: wall, in: try timeZone())
            if let note = resolution.note { writeStandardError("warning: \(note)\n") }
            return resolution.instant
        }
        throw RPCError(.invalidArgument, "\"\(text)\" is not a time like 2026-05-01T09:00:00+02:00 or 2026-05-01")
    }
}

extension GlobalOptions {
    /// Runs `body` with a typed client of the health service; failures print their status and exit with its code.
    /// The device store's errors (a sync writes to it between calls) exit with their status too.
    func withHealth(_ body: (HealthV1.Health.Client) async throws -> Void) async throws {
        try await withClient(for: "health", tokenHint: HealthOptions.tokenHint, HealthV1.Health.Client.init(wrapping:))
        { client in
            try await asStatus { try await body(client) }
        }
    }
}

/// Runs `body` on the device's store; a domain error prints its status on standard error (with `json`, as the
/// JSON error object) and exits with its code, as calls do.
func locally(json: Bool, _ body: () async throws -> Void) async throws {
    try await reportingFailures(json: json) { try await asStatus(body) }
}

/// Rethrows a domain error (a bad time on the command line, a sample the device's store refuses) as its
/// RPC status, so every failure of a health command prints a status and exits with its code.
func asStatus(_ body: () async throws -> Void) async throws {
    do {
        try await body()
    } catch let error as HealthError {
        throw RPCError(StatusCode(error.category), error.message)
    }
}

enum HealthFormat {
    static func time(_ ms: Int64, zone: String?) -> String {
        let offset =
            zone.flatMap(TimeZoneName.timeZone)?.secondsFromGMT(for: Date(timeIntervalSince1970: Double(ms) / 1000))
            ?? 0
        return Timestamps.format(ms, offset: offset)
    }

    static func number(_ value: Double) -> String {
        value.rounded() == value && abs(value) < 1e15 ? String(Int64(value)) : String(format: "%.3f", value)
    }

    static func sampleRow(_ sample: HealthV1.Sample) -> [String] {
        [
            sample.uuid, sample.type, number(sample.value), sample.unit, time(sample.startMs, zone: sample.timeZone),
            time(sample.endMs, zone: sample.timeZone), sample.source,
        ]
    }

    static func summaryLine(_ summary: HealthV1.WriteSummary) -> String {
        var parts = ["added \(summary.added)"]
        if summary.duplicates > 0 { parts.append("\(summary.duplicates) already stored") }
        if summary.deleted > 0 { parts.append("deleted \(summary.deleted)") }
        if summary.alreadyDeleted > 0 { parts.append("\(summary.alreadyDeleted) deleted before") }
        let conflicts = Int64(summary.conflicts.count) + summary.conflictsOmitted
        if conflicts > 0 { parts.append("\(conflicts) conflicts (the stored version kept)") }
        return parts.joined(separator: ", ")
    }
}
