import Foundation

/// One batch of a device's push: its changes and the device's local anchor they reach.
public struct PushBatch: Sendable, Hashable {
    public var changes: ChangeSet
    /// The device's own change-log position after this batch; the server stores it with the batch.
    public var through: Int64

    public init(changes: ChangeSet, through: Int64) {
        self.changes = changes
        self.through = through
    }
}

/// Sends the batches of one push, in order (the RPC client's request writer, or a direct call in tests).
public struct PushWriter: Sendable {
    private let sendBatch: @Sendable (PushBatch) async throws -> Void
    public init(_ send: @escaping @Sendable (PushBatch) async throws -> Void) { sendBatch = send }
    public func send(_ batch: PushBatch) async throws { try await sendBatch(batch) }
}

/// The server as a device's sync sees it. The gateway implements it over the RPC client (push as a client
/// stream, pull as a server stream); tests and benchmarks use `InProcessRemote`.
public protocol HealthRemote: Sendable {
    /// How far this device's pushes for `scope` have been committed: where a push resumes. The first call for a
    /// device store binds it to the caller's user; PERMISSION_DENIED when it is bound to another (so are `push`
    /// and `pull`).
    func pushedAnchor(device: String, scope: String) async throws -> Int64
    /// One push: `batches` sends them; the server commits each with its `through` as it arrives.
    /// Returns the server's counts over the whole push (its conflicts included).
    func push(
        device: String, scope: String, batches: @escaping @Sendable (PushWriter) async throws -> Void
    ) async throws -> WriteResult
    /// The server's changes after `since`, page by page, in `filter`'s scope; `receive` is called for each page
    /// in order, and a page is only sent once the previous one was received.
    func pull(
        device: String, since: Int64, filter: SyncFilter, pageSize: Int,
        receive: @escaping @Sendable (ChangeBatch) async throws -> Void
    ) async throws
    /// The user's anchor on the server now, so a pull's progress can be a fraction; nil when not known.
    func currentAnchor() async throws -> Int64?
}

extension HealthRemote {
    public func currentAnchor() async throws -> Int64? { nil }
}

/// How far a running sync is.
public struct SyncProgress: Sendable, Hashable {
    public enum Phase: Sendable, Hashable { case push, pull }
    public var phase: Phase
    /// Changes sent and received so far.
    public var pushed: Int
    public var pulled: Int
    /// How much of the current phase is done, 0…1: the position reached in the change log (the device's for
    /// the push, the server's for the pull) between where the phase started and where the log ended when it
    /// started. nil when the remote does not say its anchor.
    public var fraction: Double?

    public init(phase: Phase, pushed: Int, pulled: Int, fraction: Double?) {
        self.phase = phase
        self.pushed = pushed
        self.pulled = pulled
        self.fraction = fraction
    }

    static func fraction(at anchor: Int64, from start: Int64, to end: Int64?) -> Double? {
        guard let end else { return nil }
        guard end > start else { return 1 }
        return min(1, max(0, Double(anchor - start) / Double(end - start)))
    }
}

/// What a sync did.
public struct SyncReport: Sendable, Hashable {
    /// Changes the device sent, and what the server made of them.
    public var pushedChanges = 0
    public var pushed = WriteResult()
    /// Changes the device received, and what its store made of them.
    public var pulledChanges = 0
    public var pulled = WriteResult()

    /// Every conflict met, once: the version kept and the one refused or replaced. A device's version the
    /// server refused comes back as the server's on the pull, the same conflict met twice.
    public var conflicts: [SampleConflict] {
        let pushedUUIDs = Set(pushed.conflicts.map(\.stored.uuid))
        return pushed.conflicts + pulled.conflicts.filter { !pushedUUIDs.contains($0.stored.uuid) }
    }
    /// Every conflict met, counting those beyond the listed ones (one met both ways once).
    public var conflictCount: Int {
        let pushedUUIDs = Set(pushed.conflicts.map(\.stored.uuid))
        return pushed.conflictCount + pulled.conflictCount
            - pulled.conflicts.filter { pushedUUIDs.contains($0.stored.uuid) }.count
    }
    public init() {}

    /// The report in lines for people: both directions with everything that happened (duplicates, deletions
    /// and samples refused as deleted before, not only what was added), then each conflict once.
    public var lines: [String] {
        func details(_ result: WriteResult) -> String {
            var parts = ["added \(result.added)", "deleted \(result.deleted)"]
            if result.duplicates > 0 { parts.append("\(result.duplicates) already stored") }
            if result.alreadyDeleted > 0 { parts.append("\(result.alreadyDeleted) refused as deleted before") }
            if result.duplicateDeletions > 0 { parts.append("\(result.duplicateDeletions) deletions already applied") }
            return parts.joined(separator: ", ")
        }
        var lines = [
            "pushed \(pushedChanges) changes (server \(details(pushed))), pulled \(pulledChanges) (\(details(pulled)))"
        ]
        for conflict in conflicts {
            lines.append(
                "conflict: \(conflict.stored.uuid.uuidString.lowercased()) kept value \(conflict.stored.value), refused \(conflict.rejected.value)"
            )
        }
        let omitted = conflictCount - conflicts.count
        if omitted > 0 { lines.append("… and \(omitted) more conflicts") }
        return lines
    }
}

/// Two-way incremental sync of a device store with the server: push the device's changes the server has not
/// committed yet, then pull the server's changes after the device's anchor. Each batch commits with its
/// anchor on the receiving side, so an interrupted sync resumes where it stopped, and a sync run again with
/// nothing new changes nothing.
public struct HealthSync: Sendable {
    public let device: DeviceStore
    public let remote: any HealthRemote
    public var batchSize: Int
    /// The account the remote's token belongs to, when known: a store owned by another account is refused
    /// before anything is sent, and an unowned store is recorded as this account's once the server accepted it.
    public var account: StoreOwner?
    /// The token the remote carries, remembered as the owner's (local commands then check it offline).
    public var token: String?

    public init(
        device: DeviceStore, remote: any HealthRemote, batchSize: Int = 1000, account: StoreOwner? = nil,
        token: String? = nil
    ) {
        self.device = device
        self.remote = remote
        self.batchSize = batchSize
        self.account = account
        self.token = token
    }

    /// `progress` is called after each batch sent or received.
    public func run(
        filter: SyncFilter = .everything, progress: (@Sendable (SyncProgress) -> Void)? = nil
    ) async throws -> SyncReport {
        let scope = filter.scope
        var report = SyncReport()
        if let account { try device.checkOwner(account) }

        // Push: from the server's record of this device, so a push cut off after the server committed a batch
        // does not send it again (and one cut off before does). The server binds the store on this first call,
        // so the store records its owner once the server agreed.
        let start = try await remote.pushedAnchor(device: device.deviceID, scope: scope)
        if let account { try device.claim(for: account, token: token) }
        let device = self.device, batchSize = self.batchSize
        let pushEnd = try device.store.anchor(user: device.user)
        let counter = Counter()
        let finalAnchor = Counter()
        report.pushed = try await remote.push(device: device.deviceID, scope: scope) { writer in
            var since = start
            while true {
                let page = try device.store.changes(
                    user: device.user, since: since, limit: batchSize, filter: filter, pushable: true)
                guard page.anchor > since else { break }
                try await writer.send(PushBatch(changes: page.changes, through: page.anchor))
                counter.add(page.changes.count)
                finalAnchor.set(page.anchor)
                progress?(
                    SyncProgress(
                        phase: .push, pushed: counter.value, pulled: 0,
                        fraction: SyncProgress.fraction(at: page.anchor, from: start, to: pushEnd)))
                since = page.anchor
                if !page.hasMore { break }
            }
        }
        report.pushedChanges = counter.value
        if finalAnchor.value > 0 { try device.recordPushed(scope: scope, anchor: Int64(finalAnchor.value)) }

        // Pull: each page is committed locally with the server anchor it reaches.
        let pulledTotal = Counter()
        let pulledResult = ResultBox()
        let pushedCount = counter.value
        let pullStart = try device.pulledAnchor(scope: scope)
        // Only for progress, which must not fail a sync: unknown when the remote cannot say.
        let pullEnd = progress == nil ? nil : ((try? await remote.currentAnchor()) ?? nil)
        try await remote.pull(device: device.deviceID, since: pullStart, filter: filter, pageSize: batchSize) { page in
            let result = try device.applyPulled(page, scope: scope)
            pulledTotal.add(page.changes.count)
            pulledResult.merge(result)
            progress?(
                SyncProgress(
                    phase: .pull, pushed: pushedCount, pulled: pulledTotal.value,
                    fraction: SyncProgress.fraction(at: page.anchor, from: pullStart, to: pullEnd)))
        }
        report.pulledChanges = pulledTotal.value
        report.pulled = pulledResult.value
        return report
    }
}

/// A server store in the same process, as a remote: what tests and benchmarks sync against.
public struct InProcessRemote: HealthRemote {
    public let server: HealthStore
    public let user: Int64

    public init(server: HealthStore, user: Int64) {
        self.server = server
        self.user = user
    }

    public func pushedAnchor(device: String, scope: String) async throws -> Int64 {
        try server.bindStore(device: device, user: user)
        return try server.pushedAnchor(user: user, device: device, scope: scope)
    }

    public func push(
        device: String, scope: String, batches: @escaping @Sendable (PushWriter) async throws -> Void
    ) async throws -> WriteResult {
        let total = ResultBox()
        let server = self.server, user = self.user
        try server.bindStore(device: device, user: user)
        try await batches(
            PushWriter { batch in total.merge(try server.commitPush(batch, user: user, device: device, scope: scope)) })
        return total.value
    }

    public func currentAnchor() async throws -> Int64? { try server.anchor(user: user) }

    public func pull(
        device: String, since: Int64, filter: SyncFilter, pageSize: Int,
        receive: @escaping @Sendable (ChangeBatch) async throws -> Void
    ) async throws {
        try server.bindStore(device: device, user: user)
        var anchor = since
        while true {
            let page = try server.changes(user: user, since: anchor, limit: pageSize, filter: filter, device: device)
            guard page.anchor > anchor else { return }
            try await receive(page)
            anchor = page.anchor
            if !page.hasMore { return }
        }
    }
}

/// Small locked boxes for counts shared with the `@Sendable` closures of a sync.
final class Counter: @unchecked Sendable {
    private let lock = NSLock()
    private var count: Int64 = 0
    var value: Int { lock.withLock { Int(count) } }
    func add(_ amount: Int) { lock.withLock { count += Int64(amount) } }
    func set(_ value: Int64) { lock.withLock { count = value } }
}

final class ResultBox: @unchecked Sendable {
    private let lock = NSLock()
    private var result = WriteResult()
    var value: WriteResult { lock.withLock { result } }
    func merge(_ other: WriteResult) { lock.withLock { result.merge(other) } }
}
