import Foundation
import HealthAPI
import HealthCore
import RPC
import Schema

/// The server as a device's sync sees it, over the typed client: what the gateway plugs into `HealthSync`.
/// Every call carries the user's token.
/// Pushes are one client stream of batches, pulls one server stream of pages.
///
/// `timeout` is the deadline of each unary call, but not of the streams: a first sync of a million samples
/// takes longer than any fixed deadline. A stream fails with DEADLINE_EXCEEDED only when no batch moves for
/// `timeout` (a stalled server or link), however long it runs while batches do move.
public struct RPCHealthRemote: HealthRemote {
    public let client: HealthV1.Health.Client
    /// The unary calls' options (with the deadline).
    public let options: CallOptions
    /// The streams' options: the token, no deadline for the whole call.
    public let streamOptions: CallOptions
    public let stallLimit: Duration?

    public init(client: HealthV1.Health.Client, token: String, timeout: Duration? = .seconds(60)) {
        self.client = client
        options = CallOptions(timeout: timeout, metadata: ["authorization": "Bearer \(token)"])
        streamOptions = CallOptions(timeout: nil, metadata: ["authorization": "Bearer \(token)"])
        stallLimit = timeout
    }

    public func currentAnchor() async throws -> Int64? {
        try await client.getAccount(HealthV1.GetAccountRequest(), options: options).anchor
    }

    public func pushedAnchor(device: String, scope: String) async throws -> Int64 {
        try await client.getPushCursor(HealthV1.GetPushCursorRequest(deviceID: device, scope: scope), options: options)
            .anchor
    }

    /// One client-streaming call; each batch is encoded as the device's writer reaches it, and `send`
    /// waits while the server is a window behind, so a million samples are never all in memory.
    public func push(
        device: String, scope: String, batches: @escaping @Sendable (PushWriter) async throws -> Void
    ) async throws -> WriteResult {
        let client = self.client, options = streamOptions
        let response = try await withStallLimit(stallLimit, what: "push") { moved in
            try await client.push(options: options) { writer in
                try await batches(
                    PushWriter { batch in
                        try await writer.send(
                            HealthV1.PushRequest(
                                deviceID: device, scope: scope,
                                samples: try batch.changes.samples.map { sample throws(HealthError) in
                                    try HealthProto.message(sample)
                                },
                                deletions: batch.changes.deletions.map(HealthProto.message),
                                throughAnchor: batch.through))
                        moved()
                    })
            }
        }
        return try HealthProto.result(response.summary ?? HealthV1.WriteSummary())
    }

    public func pull(
        device: String, since: Int64, filter: SyncFilter, pageSize: Int,
        receive: @escaping @Sendable (ChangeBatch) async throws -> Void
    ) async throws {
        let request = HealthV1.PullRequest(
            sinceAnchor: since, types: filter.types.map { $0.sorted().map(\.rawValue) } ?? [], fromMs: filter.from,
            toMs: filter.to, pageSize: UInt32(clamping: pageSize), deviceID: device)
        let client = self.client, options = streamOptions
        try await withStallLimit(stallLimit, what: "pull") { moved in
            for try await page in client.pull(request, options: options) {
                moved()
                let changes = ChangeSet(
                    samples: try page.samples.enumerated().map { index, sample throws(HealthError) in
                        try HealthProto.sample(sample, index: index)
                    },
                    deletions: try page.deletions.map { deletion throws(HealthError) in
                        try HealthProto.deletion(deletion)
                    })
                guard page.anchor > since || !changes.isEmpty else { continue }
                try await receive(ChangeBatch(changes: changes, anchor: page.anchor, hasMore: page.hasMore))
                moved()
            }
        }
    }
}

/// Runs a stream call `body`, which calls `moved` whenever a batch goes out or comes in; fails it with
/// DEADLINE_EXCEEDED (cancelling the call) once nothing moved for `limit`. nil: no limit.
func withStallLimit<T: Sendable>(
    _ limit: Duration?, what: String,
    _ body: @escaping @Sendable (_ moved: @escaping @Sendable () -> Void) async throws -> T
) async throws -> T {
    guard let limit else { return try await body({}) }
    let last = LastMove()
    return try await withThrowingTaskGroup(of: T?.self) { group in
        group.addTask { try await body { last.touch() } }
        group.addTask {
            while true {
                let due = last.time + limit
                if ContinuousClock.now >= due {
                    throw RPCError(.deadlineExceeded, "the \(what) stream moved no batch for \(limit)")
                }
                try await Task.sleep(until: due, clock: .continuous)
            }
        }
        defer { group.cancelAll() }
        while let result = try await group.next() {
            if let result { return result }
        }
        throw CancellationError()
    }
}

/// When a stream last moved a batch.
private final class LastMove: @unchecked Sendable {
    private let lock = NSLock()
    private var instant = ContinuousClock.now
    var time: ContinuousClock.Instant { lock.withLock { instant } }
    func touch() { lock.withLock { instant = .now } }
}

extension HealthProto {
    /// A write summary back into the domain's result (the client side of a push).
    public static func result(_ summary: HealthV1.WriteSummary) throws(HealthError) -> WriteResult {
        var result = WriteResult()
        result.added = Int(summary.added)
        result.duplicates = Int(summary.duplicates)
        result.alreadyDeleted = Int(summary.alreadyDeleted)
        result.deleted = Int(summary.deleted)
        result.duplicateDeletions = Int(summary.duplicateDeletions)
        result.anchor = summary.anchor
        result.conflictsOmitted = Int(summary.conflictsOmitted)
        for conflict in summary.conflicts {
            guard let stored = conflict.stored, let rejected = conflict.rejected else { continue }
            result.conflicts.append(
                SampleConflict(stored: try sample(stored, index: 0), rejected: try sample(rejected, index: 0)))
        }
        return result
    }
}
