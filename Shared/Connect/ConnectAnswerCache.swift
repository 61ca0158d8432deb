import HTTP
import RPC
import Synchronization

/// The answers a server's Connect face keeps for the methods of its `AnswerCachePolicy`: each successful unary
/// answer, as it went out before any 304 or CORS header, by method, request bytes and the way the client asked
/// (JSON or proto, gzip, GET or POST), for the data version it was made from. Looked up on the loop thread before a
/// call opens; a hit is answered there at once. Shared by the server's loops (one lock, held for a dictionary
/// lookup).
public final class ConnectAnswerCache: Sendable {
    package struct Key: Hashable, Sendable {
        let method: String
        let json: Bool
        let gzip: Bool
        let get: Bool
        /// The request's message as the client sent it (JSON text or protobuf, decompressed): a hit skips
        /// transcoding it too.
        let request: [UInt8]
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
        return state.withLock { state in
            if state.version != version {
                state = State(version: version)
                return (nil, version)
            }
            return (state.answers[key], version)
        }
    }

    /// Keeps `answer`, made from the data at `version` (as `lookup` gave it before the call ran), unless the
    /// version moved on meanwhile: an answer made from older data is never kept under a newer version.
    package func keep(_ answer: HTTPResponse, for key: Key, madeAt version: Int64) {
        let size = answer.body.count + key.request.count + 256
        guard answer.status == 200, size <= largestKept, policy.version() == version else { return }
        state.withLock { state in
            guard state.version == version, state.answers[key] == nil else { return }
            if state.bytes + size > policy.maxBytes { state = State(version: version) }
            state.answers[key] = answer
            state.bytes += size
        }
    }
}
