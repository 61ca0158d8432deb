import HTTP
import RPC
import Synchronization

/// The one cache of answers a server keeps, for the Connect calls and the REST routes of its `AnswerCachePolicy`:
/// each successful unary answer, as it went out before any 304 or CORS header, by method (or route), request and the
/// way the client asked (JSON or proto, gzip, GET or POST), for the data version it was made from. Looked up on the
/// loop thread, after the guard, before a call opens; a hit is answered there at once. Shared by the server's loops
/// (one lock, held for a dictionary lookup).
public final class AnswerCache: Sendable {
    package struct Key: Hashable, Sendable {
        let method: String
        let json: Bool
        let gzip: Bool
        let get: Bool
        /// The request's message as the client sent it (JSON text or protobuf, decompressed), or a route's path and
        /// query: a hit skips transcoding it too.
        let request: [UInt8]

        package init(method: String, json: Bool, gzip: Bool, get: Bool, request: [UInt8]) {
            self.method = method
            self.json = json
            self.gzip = gzip
            self.get = get
            self.request = request
        }

        /// A REST route's request: its name, its path and query as sent, and whether it takes gzip.
        package init(route: String, _ request: HTTPRequest) {
            self.init(
                method: route, json: true, gzip: request.acceptsGzip, get: true, request: Array(request.target.utf8))
        }
    }

    package let policy: AnswerCachePolicy
    private let state = Mutex<State>(State())

    private struct State {
        var version: Int64?
        var answers: [Key: HTTPResponse] = [:]
        var bytes = 0
    }

    /// Answers larger than this share of the cache are not kept: one would push out many.
    private var largestKept: Int { policy.maxBytes / 8 }

    package init(policy: AnswerCachePolicy) { self.policy = policy }

    package func covers(_ method: String) -> Bool { policy.methods.contains(method) }

    /// The answer kept for `key` at the data's current version, and that version (nil: not known now, so nothing
    /// may be answered from or added to the cache). A new version empties the cache.
    package func lookup(_ key: Key) -> (answer: HTTPResponse?, version: Int64?) {
        guard let version = policy.version() else { return (nil, nil) }
        return lookup(key, at: version)
    }

    /// The answer kept for `key` at `version`, a version the policy just gave.
    private func lookup(_ key: Key, at version: Int64) -> (answer: HTTPResponse?, version: Int64?) {
        state.withLock { state in
            if state.version != version {
                state = State(version: version)
                return (nil, version)
            }
            return (state.answers[key], version)
        }
    }

    /// `lookup` after the policy's check (`AnswerCachePolicy.checkedVersion`, which may read storage: a worker's
    /// call), for a request the loop could not look up; the version stays nil when there is no such check or it fails.
    package func lookupChecked(_ key: Key) -> (answer: HTTPResponse?, version: Int64?) {
        guard let check = policy.checkedVersion, let version = try? check() else { return (nil, nil) }
        return lookup(key, at: version)
    }

    /// Keeps `answer`, made from the data at `version` (as `lookup` gave it before the call ran), unless the
    /// version moved on meanwhile: an answer made from older data is never kept under a newer version. `checking`:
    /// when a recheck fell due while the answer was made, the policy's check is made here, so a slow answer (the whole
    /// catalogue) is kept all the same — only where blocking is fine (a route's worker, holding no lock), as the check
    /// may read storage.
    package func keep(_ answer: HTTPResponse, for key: Key, madeAt version: Int64, checking: Bool = false) {
        let size = answer.body.count + key.request.count + 256
        guard answer.status == 200, size <= largestKept else { return }
        let current = policy.version() ?? (checking ? (try? policy.checkedVersion?()) ?? nil : nil)
        guard current == version else { return }
        state.withLock { state in
            guard state.version == version, state.answers[key] == nil else { return }
            if state.bytes + size > policy.maxBytes { state = State(version: version) }
            state.answers[key] = answer
            state.bytes += size
        }
    }
}
