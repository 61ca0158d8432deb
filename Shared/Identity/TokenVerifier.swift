import Base
import Foundation
import RPC
import Synchronization

/// Checks bearer tokens in memory: a snapshot of the identity store's token table, keyed by SHA-256 of the
/// token, re-read at most every `refreshInterval` by the first check that finds it older (so a revocation
/// reaches every replica within about a second, with no thread and no call to another service), and at once
/// (at most every 100 ms) when a token is unknown, so a token created a moment ago works on its first call.
/// A check costs one SHA-256 of the token and a dictionary lookup under a lock (see `IdentityTests`' figure).
public final class TokenVerifier: Sendable {
    /// Why a token was refused, and whose it was when known (for the per-user throttle).
    public struct Refusal: Error, Sendable, Equatable {
        public let message: String
        /// The user an expired or revoked token belonged to; nil for an unknown token.
        public let user: String?

        public init(message: String, user: String?) {
            self.message = message
            self.user = user
        }
    }

    public let refreshInterval: Duration
    private let store: IdentityStore?
    /// The admin token given to this process (`MENAGERIE_ADMIN_TOKEN`), by hash: valid even without a store.
    private let adminHash: [UInt8]?
    private let snapshot: Mutex<Snapshot>
    private let missReloadInterval: Duration = .milliseconds(100)

    private struct Snapshot {
        var entries: [[UInt8]: IdentityStore.TokenEntry] = [:]
        var loadedAt: ContinuousClock.Instant?
        var reloading = false
    }

    /// A verifier over `store` (nil: only the admin token is known), accepting `adminToken` as the admin's.
    public init(store: IdentityStore?, adminToken: String? = nil, refreshInterval: Duration = .seconds(1)) throws {
        self.store = store
        self.refreshInterval = refreshInterval
        adminHash = adminToken.map { IdentityStore.hash($0) }
        snapshot = Mutex(Snapshot())
        if let store, let adminToken { try store.ensureAdmin(token: adminToken) }
        try reload()
    }

    /// The caller `token` names; a `Refusal` for an unknown, expired or revoked one.
    public func verify(_ token: String, nowMs: Int64 = Int64(Date().timeIntervalSince1970 * 1000)) throws(Refusal) -> Caller {
        let hash = IdentityStore.hash(token)
        if hash == adminHash { return Caller(name: IdentityStore.adminName, isAdmin: true) }
        let now = ContinuousClock.now
        var entry = lookup(hash, now: now, staleAfter: refreshInterval)
        if entry == nil { entry = lookup(hash, now: now, staleAfter: missReloadInterval) }
        guard let entry else { throw Refusal(message: "unknown token", user: nil) }
        if entry.isRevoked { throw Refusal(message: "token revoked", user: entry.user) }
        if let expires = entry.expiresMs, expires <= nowMs { throw Refusal(message: "token expired", user: entry.user) }
        return Caller(name: entry.user, isAdmin: entry.isAdmin)
    }

    /// Re-reads the store now (tests; the verifier does so by itself as snapshots age).
    public func reload() throws {
        guard let store else { return }
        let entries = try store.tokens()
        snapshot.withLock {
            $0.entries = entries
            $0.loadedAt = .now
        }
    }

    /// The entry for `hash`, re-reading the store first when the snapshot is older than `staleAfter` and no
    /// other thread is re-reading it already (that thread's callers use the older snapshot meanwhile). A store
    /// that fails to read (busy) leaves the old snapshot in place until the next try.
    private func lookup(_ hash: [UInt8], now: ContinuousClock.Instant, staleAfter: Duration) -> IdentityStore.TokenEntry? {
        let (entry, mustReload) = snapshot.withLock { state -> (IdentityStore.TokenEntry?, Bool) in
            let stale = store != nil && !state.reloading && (state.loadedAt.map { now - $0 >= staleAfter } ?? true)
            if stale { state.reloading = true }
            return (state.entries[hash], stale)
        }
        guard mustReload else { return entry }
        let entries = try? store?.tokens()
        return snapshot.withLock { state in
            state.reloading = false
            // A failed read counts as a load too, so a busy file is not re-read on every call.
            state.loadedAt = .now
            if let entries { state.entries = entries }
            return state.entries[hash]
        }
    }
}
