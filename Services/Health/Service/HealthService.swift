import Base
import Foundation
import HealthAPI
import HealthBridge
import HealthCore
import Identity
import RPC
import Schema
import WorkLane

/// The health service's RPC methods (`menagerie.health.v1.Health`): thin handlers that take the caller the
/// server's guard established from `authorization: Bearer <token>` (the stack's shared identity), convert the
/// request, ask the store, and convert the answer. Without an identity (unit tests) they check tokens in the
/// store, as before the identity existed.
/// Domain, storage and lane errors carry their category (`CategorizedError`), which the RPC server answers with
/// its status, so handlers do not catch them.
public struct HealthService: HealthV1.Health.ServiceProtocol {
    public let store: HealthStore
    /// The heavy-work lane: statistics over long periods and large writes run there, so a year of minute
    /// samples or a 10,000-sample batch does not hold a worker of the call queue. Without one (tests) they
    /// run in the handler.
    public let lane: WorkLane?
    /// The most a query returns, and a pull page holds.
    static let maxPage = 10_000
    static let defaultPage = 1_000

    /// The stack's users and tokens: signing up and tokens go there, so every service knows them. Nil (tests):
    /// health's own table, as before.
    public let identity: IdentityStore?
    /// Open sign-up's limit (`--open-signup`): sign-ups counted per source network, as failed logins are, so one
    /// source cannot make thousands of users (26,000 in 78 s before). Nil: sign-up needs an admin token (health.proto),
    /// and is not limited; with open sign-up an operator makes users beside the stack (`gateway user create`).
    public let signupLimit: FailedAuthThrottle?

    public init(
        store: HealthStore, lane: WorkLane? = nil, identity: IdentityStore? = nil,
        signupLimit: FailedAuthThrottle? = nil
    ) {
        self.store = store
        self.lane = lane
        self.identity = identity
        self.signupLimit = signupLimit
    }

    /// Open sign-up's default limit: 10 users a source network may make at once, then one more after a back-off that
    /// doubles from 6 s to an hour; forgotten after an hour without sign-ups.
    public static func openSignupLimit(logger: Logger? = nil) -> FailedAuthThrottle {
        var policy = FailedAuthThrottle.Policy()
        policy.freeFailures = 10
        policy.initialBackoff = .seconds(6)
        policy.maxBackoff = .seconds(3600)
        policy.forgetAfter = .seconds(3600)
        return FailedAuthThrottle(policy: policy, logger: logger)
    }

    /// Copies health's own tokens (from before the shared identity) into `identity`, revoked ones as revoked, so
    /// every token issued before keeps working, now on every service; idempotent. Returns how many it saw.
    public static func moveAccounts(from store: HealthStore, to identity: IdentityStore) throws -> Int {
        let tokens = try store.storedTokens()
        for token in tokens {
            try identity.adopt(
                hash: token.hash, user: token.user, createdMs: token.createdMs, revokedMs: token.revokedMs)
        }
        return tokens.count
    }

    /// Runs blocking store work on the lane (a full lane answers RESOURCE_EXHAUSTED).
    func offload<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        guard let lane else { return try work() }
        return try await lane.run(work)
    }

    /// A server stream's next page, on the lane a few at a time (`WorkLane.runBulk`): however many streams are
    /// open, quick calls keep their place in the lane's queue.
    func offloadPage<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        guard let lane else { return try work() }
        return try await lane.runBulk(work)
    }

    /// The caller's user: the one the server's guard established (made here on their first call), else (no
    /// identity: unit tests) from the bearer token in the call metadata, checked in the store.
    func caller(_ context: ServerContext) throws -> HealthUser {
        if identity != nil {
            guard let caller = context.caller else {
                throw HealthError(.unauthenticated, "this call needs a user's token")
            }
            return try store.user(namedOrNew: caller.name)
        }
        guard let header = context.metadata["authorization"] else {
            throw HealthError(.unauthenticated, "no authorization metadata; send `authorization: Bearer <token>`")
        }
        let parts = header.split(separator: " ", maxSplits: 1)
        guard parts.count == 2, parts[0].lowercased() == "bearer" else {
            throw HealthError(.unauthenticated, "authorization is not `Bearer <token>`")
        }
        return try store.authenticate(token: parts[1].trimmingCharacters(in: .whitespaces))
    }

    static func token(_ context: ServerContext) -> String {
        context.metadata["authorization"].map { String($0.split(separator: " ", maxSplits: 1).last ?? "") } ?? ""
    }

    /// What a page's sample is reckoned to take while its page is built and sent (the decoded message and its
    /// encoding), and a CSV row: the room a stream reserves before building its first page. Later pages reserve
    /// `nextPageRoom` from the page before, so samples with large metadata are not undercounted.
    static let pageBytesPerSample = 256
    static let csvBytesPerRow = 256

    /// The room for a stream's next page, from the encoded size of its last one (of `items`, the next holding up to
    /// `pageSize`): twice that, the decoded page and its encoding both alive while it is sent.
    static func nextPageRoom(lastEncoded: Int, items: Int, pageSize: Int) -> Int {
        guard items > 0 else { return 0 }
        return 2 * (lastEncoded / items + 1) * pageSize
    }

    static func pageSize(_ requested: UInt32) throws(HealthError) -> Int {
        guard requested <= maxPage else {
            throw HealthError(.invalidArgument, "at most \(maxPage) per page, not \(requested)")
        }
        return requested == 0 ? defaultPage : Int(requested)
    }

    // MARK: Users and tokens

    public func createUser(request: HealthV1.CreateUserRequest, context: ServerContext) async throws
        -> HealthV1.CreateUserResponse
    {
        if let signupLimit {
            let source =
                "sign-ups from "
                + IdentityGuard.network(of: context.peerHost.trimmingCharacters(in: CharacterSet(charactersIn: "[]")))
            if let wait = signupLimit.backoff(for: source)
                ?? signupLimit.recordFailure(source, reason: "signed up \(request.name)")
            {
                throw RPCError(
                    .resourceExhausted,
                    "too many sign-ups from your network: retry in \(Int(wait.seconds.rounded(.up))) s")
            }
        }
        if let identity {
            let token = try identity.createUser(name: request.name)
            return HealthV1.CreateUserResponse(name: try store.user(namedOrNew: request.name).name, token: token)
        }
        let (user, token) = try store.createUser(name: request.name)
        return HealthV1.CreateUserResponse(name: user.name, token: token)
    }

    public func issueToken(request: HealthV1.IssueTokenRequest, context: ServerContext) async throws
        -> HealthV1.IssueTokenResponse
    {
        let user = try caller(context)
        if let identity { return HealthV1.IssueTokenResponse(token: try identity.createToken(user: user.name)) }
        return HealthV1.IssueTokenResponse(token: try store.issueToken(userName: user.name))
    }

    public func revokeToken(request: HealthV1.RevokeTokenRequest, context: ServerContext) async throws
        -> HealthV1.RevokeTokenResponse
    {
        let user = try caller(context)
        let token = request.token.isEmpty ? Self.token(context) : request.token
        if let identity {
            try identity.revokeToken(token, user: user.name)
            try? store.revoke(token: token, user: user.id)  // an old token also in health's table: revoked there too
            return HealthV1.RevokeTokenResponse()
        }
        try store.revoke(token: token, user: user.id)
        return HealthV1.RevokeTokenResponse()
    }

    public func getAccount(request: HealthV1.GetAccountRequest, context: ServerContext) async throws
        -> HealthV1.GetAccountResponse
    {
        let user = try caller(context)
        let store = self.store
        let (anchor, count) = try await offload {
            (try store.anchor(user: user.id), try store.sampleCount(user: user.id))
        }
        return HealthV1.GetAccountResponse(name: user.name, anchor: anchor, sampleCount: Int64(count), userID: user.id)
    }

    // MARK: Samples

    public func addSamples(request: HealthV1.AddSamplesRequest, context: ServerContext) async throws
        -> HealthV1.AddSamplesResponse
    {
        let user = try caller(context)
        try Self.checkBatch(request.samples.count)
        let samples = try request.samples.enumerated().map { index, sample throws(HealthError) in
            try HealthProto.sample(sample, index: index)
        }
        let store = self.store
        return HealthV1.AddSamplesResponse(
            summary: try HealthProto.summary(try await offload { try store.add(samples, user: user.id) }))
    }

    public func deleteSamples(request: HealthV1.DeleteSamplesRequest, context: ServerContext) async throws
        -> HealthV1.DeleteSamplesResponse
    {
        let user = try caller(context)
        try Self.checkBatch(request.uuids.count)
        let uuids = try request.uuids.map { text throws(HealthError) in try HealthProto.uuid(text, "uuids") }
        let store = self.store
        return HealthV1.DeleteSamplesResponse(
            summary: try HealthProto.summary(try await offload { try store.delete(uuids, user: user.id) }))
    }

    public func getSample(request: HealthV1.GetSampleRequest, context: ServerContext) async throws
        -> HealthV1.GetSampleResponse
    {
        let user = try caller(context)
        let sample = try store.sample(try HealthProto.uuid(request.uuid, "uuid"), user: user.id)
        return HealthV1.GetSampleResponse(
            sample: try HealthProto.message(sample, unit: try HealthProto.unit(request.unit)))
    }

    public func querySamples(request: HealthV1.QuerySamplesRequest, context: ServerContext) async throws
        -> HealthV1.QuerySamplesResponse
    {
        let user = try caller(context)
        var options: QueryOptions = []
        if request.strictStart { options.insert(.strictStartDate) }
        if request.strictEnd { options.insert(.strictEndDate) }
        let query = SampleQuery(
            types: try HealthProto.types(request.types), from: request.fromMs, to: request.toMs, options: options,
            sources: request.sources.isEmpty ? nil : request.sources, limit: try Self.pageSize(request.limit),
            ascending: !request.descending, after: request.after.isEmpty ? nil : try SampleCursor(text: request.after))
        let unit = try HealthProto.unit(request.unit)
        let store = self.store
        let page = try await offload { try store.page(query, user: user.id) }
        return HealthV1.QuerySamplesResponse(
            samples: try page.samples.map { sample throws(HealthError) in try HealthProto.message(sample, unit: unit) },
            next: page.next?.text ?? "")
    }

    public func getStatistics(request: HealthV1.GetStatisticsRequest, context: ServerContext) async throws
        -> HealthV1.GetStatisticsResponse
    {
        let user = try caller(context)
        let type = try HealthType.parse(request.type)
        let zoneName = request.timeZone.isEmpty ? "UTC" : request.timeZone
        guard let zone = TimeZone(identifier: zoneName) else {
            throw HealthError(.invalidArgument, "unknown time zone \"\(request.timeZone)\"")
        }
        let range: (from: Int64, to: Int64)
        if let preset = HealthProto.preset(request.preset) {
            // A preset is a whole range: one given beside it would be answered with another range, silently.
            guard request.fromMs == nil, request.toMs == nil else {
                throw HealthError(.invalidArgument, "a preset is a whole range: give it or from_ms and to_ms, not both")
            }
            let now = request.nowMs ?? Int64((Date().timeIntervalSince1970 * 1000).rounded())
            range = preset.range(now: now, timeZone: zone)
        } else if let from = request.fromMs, let to = request.toMs {
            range = (from, to)
        } else {
            throw HealthError(.invalidArgument, "statistics need from_ms and to_ms, or a preset")
        }
        var sleepValues: Set<SleepValue>?
        if !request.sleepValues.isEmpty {
            sleepValues = []
            for name in request.sleepValues {
                guard let value = SleepValue(name: name) else {
                    throw HealthError(.invalidArgument, "unknown sleep value \"\(name)\"")
                }
                sleepValues?.insert(value)
            }
        }
        let statistics = StatisticsRequest(
            type: type, from: range.from, to: range.to, interval: HealthProto.interval(request.interval),
            timeZone: zone,
            unit: try HealthProto.unit(request.unit),
            sourcePriority: request.sourcePriority.isEmpty ? nil : request.sourcePriority,
            sleepValues: sleepValues)
        let store = self.store
        let result = try await offload { try store.statistics(statistics, user: user.id) }
        return HealthV1.GetStatisticsResponse(
            type: type.rawValue, unit: result.unit.symbol,
            buckets: result.buckets.map {
                HealthV1.StatisticsBucket(
                    startMs: $0.start, endMs: $0.end, sum: $0.sum, average: $0.average, minimum: $0.minimum,
                    maximum: $0.maximum, count: Int64($0.count))
            })
    }

    // MARK: Sync

    public func getPushCursor(request: HealthV1.GetPushCursorRequest, context: ServerContext) async throws
        -> HealthV1.GetPushCursorResponse
    {
        let user = try caller(context)
        try store.bindStore(device: request.deviceID, user: user.id)
        return HealthV1.GetPushCursorResponse(
            anchor: try store.pushedAnchor(user: user.id, device: request.deviceID, scope: request.scope))
    }

    /// A client stream of batches: each is validated whole and committed with the device's anchor as it
    /// arrives, so the server holds one batch at a time however long the push. The first bad batch ends the
    /// call with its status; the ones before it stay committed, and the device resumes after them.
    public func push(requests: RequestStream<HealthV1.PushRequest>, context: ServerContext) async throws
        -> HealthV1.PushResponse
    {
        let user = try caller(context)
        var device: String?, scope = ""
        var total = WriteResult()
        var index = 0
        for try await request in requests {
            try context.checkAlive()
            if let device {
                guard request.deviceID == device, request.scope == scope else {
                    throw HealthError(
                        .invalidArgument,
                        "batch #\(index) names device \"\(request.deviceID)\" and scope \"\(request.scope)\"; the push began with \"\(device)\" and \"\(scope)\""
                    )
                }
            } else {
                (device, scope) = (request.deviceID, request.scope)
                // Before anything of the push is stored: a store bound to another user is PERMISSION_DENIED.
                try store.bindStore(device: request.deviceID, user: user.id)
            }
            do {
                try Self.checkBatch(request.samples.count + request.deletions.count)
                let changes = ChangeSet(
                    samples: try request.samples.enumerated().map { index, sample throws(HealthError) in
                        try HealthProto.sample(sample, index: index)
                    },
                    deletions: try request.deletions.map { deletion throws(HealthError) in
                        try HealthProto.deletion(deletion)
                    })
                let batch = PushBatch(changes: changes, through: request.throughAnchor)
                let store = self.store, deviceID = request.deviceID, batchScope = request.scope
                total.merge(
                    try await offload {
                        try store.commitPush(batch, user: user.id, device: deviceID, scope: batchScope)
                    })
            } catch let error as HealthError {
                throw HealthError(error.category, "push batch #\(index) (nothing of it stored): \(error.message)")
            }
            index += 1
        }
        let store = self.store, deviceID = device ?? "", pushScope = scope
        let committed =
            device == nil
            ? 0 : try await offload { try store.pushedAnchor(user: user.id, device: deviceID, scope: pushScope) }
        return HealthV1.PushResponse(summary: try HealthProto.summary(total), committedAnchor: committed)
    }

    public func pull(
        request: HealthV1.PullRequest, response: ResponseWriter<HealthV1.PullResponse>, context: ServerContext
    ) async throws {
        let user = try caller(context)
        let filter = try HealthProto.filter(types: request.types, from: request.fromMs, to: request.toMs)
        let pageSize = try Self.pageSize(request.pageSize)
        // A client older than store binding sends no device id; its pull reads only the caller's own changes.
        if !request.deviceID.isEmpty { try store.bindStore(device: request.deviceID, user: user.id) }
        var anchor = request.sinceAnchor
        let store = self.store, device = request.deviceID.isEmpty ? nil : request.deviceID
        var roomNeeded = pageSize * Self.pageBytesPerSample
        while true {
            try context.checkAlive()
            let since = anchor
            // Room for the page is taken from the memory budget before it is built, so pages built for clients
            // that read nothing cannot pile up outside the budget while they wait for it; the page is made into its
            // message off the loop and only the message comes back, which `send` consumes once encoded.
            let room = try await response.reserveRoom(roomNeeded)
            let (message, items, reached, hasMore) = try await offloadPage {
                // What this device store pushed is not sent back to it: it has it.
                let page = try store.changes(
                    user: user.id, since: since, limit: pageSize, filter: filter, device: device)
                return (
                    HealthV1.PullResponse(
                        samples: try page.changes.samples.map { sample throws(HealthError) in
                            try HealthProto.message(sample)
                        },
                        deletions: page.changes.deletions.map(HealthProto.message), anchor: page.anchor,
                        hasMore: page.hasMore),
                    page.changes.samples.count + page.changes.deletions.count, page.anchor, page.hasMore
                )
            }
            // An empty first page still answers, so the client learns the anchor it is at.
            if reached == anchor, anchor != request.sinceAnchor { return }
            let sent = try await response.send(consume message, in: room)
            if items > 0 { roomNeeded = Self.nextPageRoom(lastEncoded: sent, items: items, pageSize: pageSize) }
            anchor = reached
            if !hasMore { return }
        }
    }

    public func exportCSV(
        request: HealthV1.ExportCSVRequest, response: ResponseWriter<HealthV1.ExportCSVChunk>, context: ServerContext
    ) async throws {
        let user = try caller(context)
        let type = try HealthType.parse(request.type)
        let unit = try HealthProto.unit(request.unit)
        var cursor: CSVCursor?
        var first = true
        let store = self.store
        var roomNeeded = HealthStore.csvPageSize * Self.csvBytesPerRow
        repeat {
            try context.checkAlive()
            let after = cursor
            let header = first ? HealthStore.csvHeader : ""
            let room = try await response.reserveRoom(roomNeeded)
            let (chunk, rows, next) = try await offloadPage {
                let page = try store.csvPage(
                    type: type, user: user.id, unit: unit, from: request.fromMs, to: request.toMs, after: after)
                return (HealthV1.ExportCSVChunk(text: header + page.text), page.rows, page.next)
            }
            let sent = try await response.send(consume chunk, in: room)
            if rows > 0 {
                roomNeeded = Self.nextPageRoom(lastEncoded: sent, items: rows, pageSize: HealthStore.csvPageSize)
            }
            first = false
            cursor = next
        } while cursor != nil
    }

    static func checkBatch(_ count: Int) throws(HealthError) {
        let limit = SampleLimits.standard.maxBatchSamples
        guard count <= limit else {
            throw HealthError(.resourceExhausted, "a batch of \(count) is over the limit of \(limit); split it")
        }
    }
}
