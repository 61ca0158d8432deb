import Synchronization

/// The feature print's features of images already seen, by image: a second training on the same photos (another
/// seed, other labels, the held-out share) skips the network for every image it takes as it is. Only unaltered
/// images are kept — an augmented copy is new each time. The key names the module (its checksum), the input's
/// scaling and the image's SHA-256, so a reinstalled feature print or another scaling misses.
public final class FeatureCache: Sendable {
    private struct State {
        var rows: [String: [Float]] = [:]
        var hits = 0
    }
    private let state = Mutex(State())
    /// Rows kept at most (1,280 floats each: 5 KB; the default holds 10,000 photos in about 50 MB). When full it
    /// starts again empty, which is simple and keeps the bound.
    public let limit: Int

    public init(limit: Int = 10_000) { self.limit = limit }

    /// Rows served from the cache since it was made.
    public var hits: Int { state.withLock { $0.hits } }
    public var count: Int { state.withLock { $0.rows.count } }

    /// The rows of `keys` (nil for an input without one), computing the missing ones with `extract` in one call.
    func rows(_ keys: [String?], inputs: [[Float]], extract: ([[Float]]) throws -> [[Float]]) throws -> [[Float]] {
        var found: [[Float]?] = state.withLock { state in keys.map { key in key.flatMap { state.rows[$0] } } }
        let missing = found.indices.filter { found[$0] == nil }
        let computed = try extract(missing.map { inputs[$0] })
        for (slot, row) in zip(missing, computed) { found[slot] = row }
        state.withLock { state in
            state.hits += keys.count - missing.count
            if state.rows.count + missing.count > limit { state.rows.removeAll() }
            for slot in missing { if let key = keys[slot] { state.rows[key] = found[slot] } }
        }
        return found.map { $0! }
    }
}
