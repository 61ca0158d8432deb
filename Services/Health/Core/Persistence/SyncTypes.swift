import Foundation

/// A deleted sample as the change log reports it; type and times (when known) let a limited sync filter it.
public struct Deletion: Sendable, Hashable {
    public var uuid: UUID
    public var type: HealthType?
    public var start: EpochMilliseconds?
    public var end: EpochMilliseconds?

    public init(uuid: UUID, type: HealthType? = nil, start: EpochMilliseconds? = nil, end: EpochMilliseconds? = nil) {
        self.uuid = uuid
        self.type = type
        self.start = start
        self.end = end
    }
}

/// New samples and deletions written together, in one transaction.
public struct ChangeSet: Sendable, Hashable {
    public var samples: [HealthSample]
    public var deletions: [Deletion]

    public init(samples: [HealthSample] = [], deletions: [Deletion] = []) {
        self.samples = samples
        self.deletions = deletions
    }

    public var isEmpty: Bool { samples.isEmpty && deletions.isEmpty }
    public var count: Int { samples.count + deletions.count }
}

/// One page of a user's change log after an anchor: the samples added and deleted, in anchor order, and
/// the anchor to ask from next. An anchored query in HealthKit's sense.
public struct ChangeBatch: Sendable, Hashable {
    public var changes: ChangeSet
    /// The position this page reaches; pass it as `since` for the next page (unchanged when the page is empty).
    public var anchor: Int64
    /// More changes follow `anchor` (the page was cut at its limit).
    public var hasMore: Bool

    public init(changes: ChangeSet, anchor: Int64, hasMore: Bool) {
        self.changes = changes
        self.anchor = anchor
        self.hasMore = hasMore
    }
}

/// The same UUID arrived with different content. Samples are immutable: the first stored version wins
/// (`stored`); `rejected` is what was refused. On a device pulling from the server the server's version is
/// the first stored one and replaces the local copy, so devices converge.
public struct SampleConflict: Sendable, Hashable {
    public var stored: HealthSample
    public var rejected: HealthSample

    public init(stored: HealthSample, rejected: HealthSample) {
        self.stored = stored
        self.rejected = rejected
    }
}

/// What a write did.
public struct WriteResult: Sendable, Hashable {
    /// New samples stored.
    public var added = 0
    /// Samples already stored with the same content (a re-sent batch).
    public var duplicates = 0
    /// Samples refused because their UUID was deleted before.
    public var alreadyDeleted = 0
    /// Samples removed by this write's deletions.
    public var deleted = 0
    /// Deletions of samples that were already deleted (or never known, for a sync's deletions).
    public var duplicateDeletions = 0
    /// The first `conflictListLimit` conflicts met; `conflictsOmitted` counts the rest, so the result of a
    /// push of a million conflicting samples stays small.
    public var conflicts: [SampleConflict] = []
    public var conflictsOmitted = 0
    /// Every conflict met, listed or not.
    public var conflictCount: Int { conflicts.count + conflictsOmitted }
    public static let conflictListLimit = 1_000
    /// The user's change-log anchor after the write.
    public var anchor: Int64 = 0

    public init() {}

    /// Adds another batch's counts (a sync of several batches reports one total).
    public mutating func merge(_ other: WriteResult) {
        added += other.added
        duplicates += other.duplicates
        alreadyDeleted += other.alreadyDeleted
        deleted += other.deleted
        duplicateDeletions += other.duplicateDeletions
        let room = max(0, Self.conflictListLimit - conflicts.count)
        conflicts += other.conflicts.prefix(room)
        conflictsOmitted += other.conflictsOmitted + max(0, other.conflicts.count - room)
        anchor = max(anchor, other.anchor)
    }
}

/// Limits a sync (or a change-log read) to types and a time range. A limited sync keeps its own cursors
/// (`scope`), so skipping other samples now never makes a later full sync miss them.
public struct SyncFilter: Sendable, Hashable {
    public var types: Set<HealthType>?
    public var from: EpochMilliseconds?
    public var to: EpochMilliseconds?

    public init(types: Set<HealthType>? = nil, from: EpochMilliseconds? = nil, to: EpochMilliseconds? = nil) {
        self.types = types
        self.from = from
        self.to = to
    }

    public static let everything = SyncFilter()

    public var isEverything: Bool { types == nil && from == nil && to == nil }

    /// The cursor key: "" for everything, else the types and the range.
    public var scope: String {
        guard !isEverything else { return "" }
        let names = types.map { $0.sorted().map(\.rawValue).joined(separator: ",") } ?? "*"
        return "\(names)|\(from.map(String.init) ?? "")|\(to.map(String.init) ?? "")"
    }

    /// Whether a sample (or a deletion with what it knows) of `type` over `start…end` is in scope.
    /// A deletion that knows nothing about its sample is always in scope.
    public func matches(type: HealthType?, start: EpochMilliseconds?, end: EpochMilliseconds?) -> Bool {
        if let types, let type, !types.contains(type) { return false }
        // Overlapping, as a sample query: ends after `from` (an instant may sit at `from`).
        if let from, let end, end < from || (end == from && (start ?? end) < end) { return false }
        if let to, let start, start >= to { return false }
        return true
    }

    func matches(_ sample: HealthSample) -> Bool { matches(type: sample.type, start: sample.start, end: sample.end) }
    func matches(_ deletion: Deletion) -> Bool {
        matches(type: deletion.type, start: deletion.start, end: deletion.end)
    }
}

/// Where a write comes from, which decides conflicts and whether the change is pushed later.
public enum WriteOrigin: Sendable {
    /// The user (or a device's push, on the server): first stored version wins; deleting an unknown UUID is
    /// NOT_FOUND when `strictDeletes`.
    case client(strictDeletes: Bool)
    /// A device's push, on the server: as `client` without strict deletes, and the rows written remember the
    /// device store, so its pull does not send them back.
    case push(device: String)
    /// A device applying what it pulled from the server: the server's version wins, and the rows are marked
    /// so the device does not push them back.
    case server
}
