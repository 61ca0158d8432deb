import Base
import Foundation
import RPC
import Synchronization

/// Checks bearer tokens in memory: a snapshot of the identity store's token table, keyed by SHA-256 of the
/// token. Every `checkInterval` (and at once when a token is unknown, so a token made a moment ago works on its
/// first call) the first check asks SQLite whether any process committed to the store since (`PRAGMA
/// data_version`, microseconds) and reads what changed since then (the store numbers every change:
/// `IdentityStore.tokenChanges`), and at least every `reloadInterval` anyway: a
/// revocation written by any process reaches every replica within about `checkInterval` (one written through
/// this process's store, at once), with no thread and no call to another service. A check of a token seen before costs two dictionary lookups under locks (the first
/// sight of a token adds its SHA-256); see `IdentityTests`' figure.
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

    public let checkInterval: Duration
    public let reloadInterval: Duration
    private let store: IdentityStore?
    /// The admin token given to this process (`MENAGERIE_ADMIN_TOKEN`), by hash: valid even without a store.
    private let adminHash: [UInt8]?
    private let snapshot: Mutex<Snapshot>
    /// SHA-256 of tokens that named a user, by token (see `remember`).
    private let hashes = Mutex<[String: [UInt8]]>([:])
    static let maxRemembered = 10_000

    private struct Snapshot {
        var entries: [[UInt8]: IdentityStore.TokenEntry] = [:]
        /// The store's change number `entries` are as of: a look reads only what changed after it.
        var seq: Int64?
        /// The store's `data_version` when `entries` were read.
        var version: Int64?
        var checkedAt: ContinuousClock.Instant?
        /// The store's count of this process's writes when last checked.
        var localWrites = -1
        var loadedAt: ContinuousClock.Instant?
        var checking = false
    }

    /// A verifier over `store` (nil: only the admin token is known), accepting `adminToken` as the admin's.
    public init(
        store: IdentityStore?, adminToken: String? = nil, checkInterval: Duration = .milliseconds(50),
        reloadInterval: Duration = .seconds(1)
    ) throws {
        self.store = store
        self.checkInterval = checkInterval
        self.reloadInterval = reloadInterval
        adminHash = adminToken.map { IdentityStore.hash($0) }
        snapshot = Mutex(Snapshot())
        if let store, let adminToken { try store.ensureAdmin(token: adminToken) }
        try reload()
    }

    /// The caller `token` names; a `Refusal` for an unknown, expired or revoked one.
    public func verify(_ token: String, nowMs: Int64 = Int64(Date().timeIntervalSince1970 * 1000)) throws(Refusal)
        -> Caller
    {
        let hash = hashes.withLock { $0[token] } ?? IdentityStore.hash(token)
        if hash == adminHash {
            remember(token, hash)
            return Caller(name: IdentityStore.adminName, isAdmin: true)
        }
        let now = ContinuousClock.now
        var entry = lookup(hash, now: now, force: false)
        if entry == nil { entry = lookup(hash, now: now, force: true) }
        guard let entry else { throw Refusal(message: "unknown token", user: nil) }
        if entry.isRevoked { throw Refusal(message: "token revoked", user: entry.user) }
        if let expires = entry.expiresMs, expires <= nowMs { throw Refusal(message: "token expired", user: entry.user) }
        remember(token, hash)
        return Caller(name: entry.user, isAdmin: entry.isAdmin)
    }

    /// Keeps the hash of a token that named a user, so its next calls skip SHA-256 (the larger part of a check);
    /// only known tokens are kept, so guesses cannot fill it, and it starts over past `maxRemembered`.
    private func remember(_ token: String, _ hash: [UInt8]) {
        hashes.withLock { hashes in
            guard hashes[token] == nil else { return }
            if hashes.count >= Self.maxRemembered { hashes.removeAll(keepingCapacity: true) }
            hashes[token] = hash
        }
    }

    /// Re-reads the store now (tests; the verifier does so by itself as the store changes).
    public func reload() throws {
        guard let store else { return }
        let written = store.localWrites.load(ordering: .acquiring)
        let version = try store.database.dataVersion
        let (entries, seq) = try store.tokenChanges(since: nil)
        snapshot.withLock {
            $0.localWrites = written
            $0.entries = entries
            $0.seq = seq
            $0.version = version
            $0.loadedAt = .now
            $0.checkedAt = .now
        }
    }

    /// The entry for `hash`, first re-reading the store if it is time to look (`force`: now) and no other thread
    /// is looking already (that thread's callers use the snapshot they find meanwhile). A store that fails to
    /// read (busy) leaves the snapshot as it was until the next look.
    private func lookup(_ hash: [UInt8], now: ContinuousClock.Instant, force: Bool) -> IdentityStore.TokenEntry? {
        let (entry, due, mustReload, known, localSeen, seq) = snapshot.withLock {
            state -> (IdentityStore.TokenEntry?, Bool, Bool, Int64?, Int, Int64?) in
            let written = store?.localWrites.load(ordering: .acquiring) ?? 0
            let due =
                store != nil && !state.checking
                && (force || written != state.localWrites || state.checkedAt.map { now - $0 >= checkInterval } ?? true)
            if due { state.checking = true }
            let old = state.loadedAt.map { now - $0 >= reloadInterval } ?? true
            return (state.entries[hash], due, old, state.version, state.localWrites, state.seq)
        }
        guard due, let store else { return entry }
        let written = store.localWrites.load(ordering: .acquiring)
        let version = try? store.database.dataVersion
        // What changed since the last look (all of it only the first time): a sign-up costs its own row, not the table.
        var changes =
            mustReload || version == nil || version != known || written != localSeen
            ? try? store.tokenChanges(since: seq) : nil
        if let seq, let read = changes, read.seq < seq {
            // The numbers went back: the file was replaced (a restored copy). Everything is read again.
            changes = try? store.tokenChanges(since: nil)
        }
        return snapshot.withLock { state in
            state.checking = false
            state.checkedAt = .now
            state.localWrites = written
            if let changes {
                if seq == nil || changes.seq < seq! {
                    state.entries = changes.entries
                } else {
                    state.entries.merge(changes.entries) { $1 }
                }
                state.seq = changes.seq
                state.version = version
                state.loadedAt = .now
            }
            return state.entries[hash]
        }
    }
}
